// The "format" option of the sinks outside the database (docs/sinks.md, "CloudEvents"): what
// goes on the wire for one message. Pure C++ (no PostgreSQL headers), thread-safe.
#pragma once

#include <string>

#include "statesman/sinks/sink.hpp"

namespace statesman::sink {

enum class Format { kStatesman, kCloudEvents };

// The "format" option's value: "statesman" (the default, which callers pass when the option
// is absent) or "cloudevents"; anything else throws statesman::Error (22023) naming the option
// "format" and both values (and `sink`, when given: `sink "nats": option "format" …`).
Format ParseFormat(const std::string &value, const std::string &sink = {});
const char *FormatName(Format f);

// What goes on the wire for one message: m.json itself for kStatesman; for kCloudEvents the
// CloudEvents 1.0 structured-mode JSON built from m.json (the statesman.state-change/v1 message):
//   specversion "1.0", id = messageId, source = "statesman://{store}", type = "statesman.{operation}",
//   subject = address, time = occurredAt, datacontenttype = contentType (omitted when null),
//   data = the payload inline when contentType is application/json or ends in +json (media type
//   parameters aside, case-insensitive) and the payload parses as JSON, else data_base64 = the
//   payload's base64 (as in the message); no data at all when the payload is null (a delete);
//   extension attributes statesmanposition, statesmanrevision (decimal strings: CloudEvents'
//   Integer type is 32-bit, positions are not) and statesmanepoch (the epoch UUID).
// Throws std::runtime_error when m.json is not a JSON object (never for a message of the feed).
std::string Render(Format f, const Message &m);

// Base64 (RFC 4648, standard alphabet, padding optional) into `out`; false on anything else.
bool Base64Decode(const std::string &in, std::string &out);

}  // namespace statesman::sink
