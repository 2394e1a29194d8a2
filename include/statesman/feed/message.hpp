// Building one statesman.state-change/v1 message (docs/design.md §5) from a record's fields as
// Datums: what statesman._message / _message_text do for their arguments, and what the page
// reader (src/feed/page.cpp) does for each row of statesman._feed_page, without a function call
// per row. Pulls in postgres.h. The functions here hold no C++ object with a destructor and may
// ereport: call them under pg::Call.
#pragma once

#include "statesman/pg/guard.hpp"

extern "C" {
#include "lib/stringinfo.h"
#include "utils/jsonb.h"
}

namespace statesman::pg {

// A message's fields, in the argument order of statesman._message.
enum MessageField {
  kStore,
  kEpoch,
  kAddress,
  kRoot,
  kPath,
  kPartition,
  kRevision,
  kGlobalPosition,
  kOccurredAt,
  kOperation,
  kStatus,
  kValueType,
  kSchemaVersion,
  kSource,
  kFingerprint,
  kContentType,
  kSerializerId,
  kPayload,
  kCorrelationId,
  kCausationId,
  kMetadata,
  kError,
  kMessageFieldCount
};

// The fields of one message: value[f] is the field's Datum (text, uuid, int8, int4,
// timestamptz, bytea or jsonb as statesman._message takes them), unless isnull[f].
// store, epoch, address and revision must not be NULL.
// message_id, when set, is the messageId already built (MessageIdText) for this input;
// epoch_text, when set, the epoch already written as text (36 characters, FormatUuid).
struct MessageInput {
  Datum value[kMessageFieldCount];
  bool isnull[kMessageFieldCount];
  const char *message_id = nullptr;
  int message_id_len = 0;
  const char *epoch_text = nullptr;
};

// NULL when the message can be built; else, without raising it, the error building it would
// raise (palloc'd): a payload whose base64 does not fit in a jsonb string (54000).
char *MessageUnbuildable(const MessageInput &in);
// The message as jsonb (raises what MessageUnbuildable says, 54000).
Jsonb *BuildMessageJsonb(const MessageInput &in);
// The same message as JSON text, byte for byte BuildMessageJsonb's output, appended to buf.
void AppendMessageText(StringInfo buf, const MessageInput &in);
// messageId, "{store}/{address}#{revision}", as a text (palloc'd).
text *MessageIdText(const MessageInput &in);

}  // namespace statesman::pg
