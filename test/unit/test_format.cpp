// The "format" option (src/sinks/format.cpp): the statesman message unchanged, or CloudEvents 1.0.
#include "statesman/sinks/format.hpp"

#include <nlohmann/json.hpp>

#include <string>

#include "tap.hpp"

using nlohmann::json;
using statesman::sink::Base64Decode;
using statesman::sink::Format;
using statesman::sink::FormatName;
using statesman::sink::Message;
using statesman::sink::ParseFormat;
using statesman::sink::Render;

static std::string B64(const std::string &in) {
  static const char *abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
    out += abc[v >> 18 & 63], out += abc[v >> 12 & 63], out += abc[v >> 6 & 63], out += abc[v & 63];
  }
  if (i + 1 == in.size()) {
    unsigned v = (unsigned char)in[i] << 16;
    out += abc[v >> 18 & 63], out += abc[v >> 12 & 63], out += "==";
  } else if (i + 2 == in.size()) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
    out += abc[v >> 18 & 63], out += abc[v >> 12 & 63], out += abc[v >> 6 & 63], out += '=';
  }
  return out;
}

// A statesman.state-change/v1 message as the feed writes it.
static Message Msg(const json &content_type, const json &payload, const std::string &operation = "put") {
  json m = {{"schema", "statesman.state-change/v1"},
            {"messageId", "shop/orders@eu/42#7"},
            {"store", "shop"},
            {"root", "orders"},
            {"path", "42"},
            {"partition", "eu"},
            {"address", "orders@eu/42"},
            {"revision", 7},
            {"globalPosition", 9007199254740993LL},
            {"epoch", "6f1c2d3e-0000-4000-8000-000000000001"},
            {"occurredAt", "2026-11-30T07:49:20.123456Z"},
            {"operation", operation},
            {"status", nullptr},
            {"contentType", content_type},
            {"payload", payload}};
  Message out;
  out.position = 9007199254740993LL;
  out.id = "shop/orders@eu/42#7";
  out.json = m.dump();
  return out;
}

static std::string Decoded(const std::string &b64) {
  std::string out;
  return Base64Decode(b64, out) ? out : std::string("<invalid>");
}

int main() {
  CHECK(ParseFormat("statesman") == Format::kStatesman, "\"statesman\" parses");
  CHECK(ParseFormat("cloudevents") == Format::kCloudEvents, "\"cloudevents\" parses");
  CHECK_THROWS(ParseFormat("CloudEvents"), "22023", "values are case-sensitive (22023)");
  CHECK_THROWS(ParseFormat(""), "22023", "an empty format is refused (22023)");
  try {
    ParseFormat("avro", "nats");
    CHECK(false, "an unknown format throws");
  } catch (const statesman::Error &e) {
    std::string w = e.what();
    CHECK(w.rfind("sink \"nats\": option \"format\"", 0) == 0, "the error names sink and option: " + w);
    CHECK(w.find("\"statesman\"") != std::string::npos && w.find("\"cloudevents\"") != std::string::npos,
          "the error names both values: " + w);
  }
  CHECK_EQ(std::string(FormatName(Format::kStatesman)), std::string("statesman"), "FormatName(kStatesman)");
  CHECK_EQ(std::string(FormatName(Format::kCloudEvents)), std::string("cloudevents"), "FormatName(kCloudEvents)");

  CHECK_EQ(Decoded(""), std::string(""), "base64 decode of \"\"");
  CHECK_EQ(Decoded("Zg=="), std::string("f"), "base64 decode of Zg==");
  CHECK_EQ(Decoded("Zm8="), std::string("fo"), "base64 decode of Zm8=");
  CHECK_EQ(Decoded("Zm9vYmFy"), std::string("foobar"), "base64 decode of Zm9vYmFy");
  CHECK_EQ(Decoded("+/+/"), std::string("\xfb\xff\xbf"), "base64 decode, standard alphabet");
  CHECK_EQ(Decoded("Zm9v!mFy"), std::string("<invalid>"), "base64 decode refuses a foreign character");
  CHECK_EQ(Decoded("Z"), std::string("<invalid>"), "base64 decode refuses a lone character");
  CHECK_EQ(Decoded("Zh=="), std::string("<invalid>"), "base64 decode refuses non-zero padding bits");

  Message json_put = Msg("application/json", B64("{\"total\": 12, \"big\": 123456789012345678901234567890}"));
  CHECK_EQ(Render(Format::kStatesman, json_put), json_put.json, "statesman format: the message unchanged");

  json ce = json::parse(Render(Format::kCloudEvents, json_put));
  CHECK_EQ(ce.value("specversion", ""), std::string("1.0"), "specversion 1.0");
  CHECK_EQ(ce.value("id", ""), std::string("shop/orders@eu/42#7"), "id = messageId");
  CHECK_EQ(ce.value("source", ""), std::string("statesman://shop"), "source = statesman://{store}");
  CHECK_EQ(ce.value("type", ""), std::string("statesman.put"), "type = statesman.{operation}");
  CHECK_EQ(ce.value("subject", ""), std::string("orders@eu/42"), "subject = address");
  CHECK_EQ(ce.value("time", ""), std::string("2026-11-30T07:49:20.123456Z"), "time = occurredAt");
  CHECK_EQ(ce.value("datacontenttype", ""), std::string("application/json"), "datacontenttype = contentType");
  CHECK_EQ(ce.value("statesmanposition", ""), std::string("9007199254740993"),
           "statesmanposition: the exact position as a decimal string");
  CHECK_EQ(ce.value("statesmanrevision", ""), std::string("7"), "statesmanrevision as a decimal string");
  CHECK_EQ(ce.value("statesmanepoch", ""), std::string("6f1c2d3e-0000-4000-8000-000000000001"), "statesmanepoch");
  CHECK(ce.contains("data") && ce["data"].is_object(), "a JSON payload goes inline as data");
  CHECK_EQ(ce["data"].value("total", 0), 12, "data holds the payload's fields");
  CHECK(!ce.contains("data_base64"), "no data_base64 beside inline data");
  CHECK(Render(Format::kCloudEvents, json_put).find("\"big\": 123456789012345678901234567890") != std::string::npos,
        "the payload goes in byte for byte (a number beyond 64 bits keeps its digits)");
  CHECK(!ce.contains("schema") && !ce.contains("payload") && !ce.contains("messageId"),
        "the statesman message's own keys are not in the event");

  json plus = json::parse(Render(Format::kCloudEvents, Msg("Application/Vnd.Shop+JSON; charset=utf-8", B64("[1,2]"))));
  CHECK(plus.contains("data") && plus["data"] == json::array({1, 2}), "+json types with parameters go inline too");

  json scalar = json::parse(Render(Format::kCloudEvents, Msg("application/json", B64("\"hello\""))));
  CHECK(scalar.contains("data") && scalar["data"] == "hello", "a JSON string payload goes inline");

  json broken = json::parse(Render(Format::kCloudEvents, Msg("application/json", B64("{not json"))));
  CHECK(!broken.contains("data") && broken.value("data_base64", "") == B64("{not json"),
        "a JSON type whose payload does not parse goes as data_base64");

  json text = json::parse(Render(Format::kCloudEvents, Msg("text/plain", B64("{\"a\":1}"))));
  CHECK(!text.contains("data") && text.value("data_base64", "") == B64("{\"a\":1}"),
        "a non-JSON type goes as data_base64, even when the bytes parse");
  CHECK_EQ(text.value("datacontenttype", ""), std::string("text/plain"), "datacontenttype of text/plain");

  json jsonish = json::parse(Render(Format::kCloudEvents, Msg("application/jsonx", B64("1"))));
  CHECK(!jsonish.contains("data"), "application/jsonx is not a JSON type");

  json untyped = json::parse(Render(Format::kCloudEvents, Msg(nullptr, B64("{\"a\":1}"))));
  CHECK(!untyped.contains("datacontenttype"), "no datacontenttype when contentType is null");
  CHECK(!untyped.contains("data") && untyped.contains("data_base64"), "an untyped payload goes as data_base64");

  json deleted = json::parse(Render(Format::kCloudEvents, Msg("application/json", nullptr, "delete")));
  CHECK(!deleted.contains("data") && !deleted.contains("data_base64"), "a delete (null payload) carries no data");
  CHECK_EQ(deleted.value("type", ""), std::string("statesman.delete"), "type of a delete");

  Message bad;
  bad.id = "x";
  bad.json = "[1]";
  bool threw = false;
  try {
    Render(Format::kCloudEvents, bad);
  } catch (const std::exception &) {
    threw = true;
  }
  CHECK(threw, "a message that is not a JSON object throws");
  return unit::Done();
}
