// jsonb's binary format, read and written directly where PostgreSQL's own routines would cost
// more than the work itself:
//  - jsonb as JSON text, byte for byte what PostgreSQL's jsonb output (JsonbToCString) writes,
//    without its iterator, which allocates a state for every container and a NUL-terminated
//    copy of every string before escaping it a character at a time. The append stores each
//    JSON payload as this text, capture each captured row, and the sinks outside the database
//    send each message's metadata so.
//  - an integer as the numeric a jsonb holds for it, byte for byte what int64_to_numeric makes,
//    written in place: the message builder's positions and revisions.
// Pulls in postgres.h; plain PostgreSQL code that may ereport (numeric_out): run it under
// pg::Call.
#pragma once

extern "C" {
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/jsonb.h"
}

#include <cstring>

namespace statesman::pg {

// appendBinaryStringInfo without its call when the bytes fit, which for the short keys,
// values and separators of a JSON text is nearly always.
inline void PutBytes(StringInfo buf, const char *data, int length) {
  if (buf->len + length < buf->maxlen) {
    memcpy(buf->data + buf->len, data, length);
    buf->len += length;
    buf->data[buf->len] = '\0';
  } else {
    appendBinaryStringInfo(buf, data, length);
  }
}

// Appends the JSON text of the container (a whole jsonb's root, or one nested in it) to buf.
void AppendJsonbText(StringInfo buf, const JsonbContainer *container);
// Appends a JSON string of length bytes (not NUL-terminated), escaped as escape_json does.
void AppendJsonString(StringInfo buf, const char *data, int length);

// The most bytes WriteIntNumeric writes: a 4-byte varlena header, the 2-byte short header and
// the five base-10000 digits of the largest int64.
constexpr int kMaxIntNumericBytes = 4 + 2 + 5 * 2;
// Writes n as a numeric varlena (4-byte header, short format) at out, 4-byte aligned with room
// for kMaxIntNumericBytes; returns the bytes written.
int WriteIntNumeric(int64 n, char *out);

}  // namespace statesman::pg
