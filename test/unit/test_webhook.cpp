// The webhook sink's parts that need no server (src/sinks/webhook_signature.cpp): the Standard
// Webhooks signature (its published test vector), the secret's key, a batch's id, Retry-After.
#include "statesman/sinks/webhook.hpp"

#include "tap.hpp"

using namespace statesman::sink::webhook;

static void TestSignature() {
  // The Standard Webhooks reference vector.
  auto key = SecretKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
  CHECK(key.has_value() && key->size() == 24, "SecretKey: whsec_ + base64 decodes to the 24 key bytes");
  CHECK_EQ(Signature(key.value_or(""), "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "{\"test\": 2432232314}"),
           std::string("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
           "Signature: the Standard Webhooks test vector");
  CHECK(Signature(key.value_or(""), "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265331", "{\"test\": 2432232314}") !=
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        "Signature: another timestamp signs differently");
  // A secret without the prefix is the key's bytes as written (python: hmac.new(b"plain-secret", …)).
  CHECK_EQ(SecretKey("plain-secret").value_or(""), std::string("plain-secret"), "SecretKey: plain text is the key");
  CHECK_EQ(Signature("plain-secret", "id", "1", "body"), std::string("v1,sr8/aoKu5apjq2eIJkdI+jZ8SXkSWoRp67aVUQ1E+AU="),
           "Signature: a plain-text key");
  CHECK(!SecretKey("whsec_not base64!").has_value(), "SecretKey: whsec_ with bad base64 is refused");
  CHECK(!SecretKey("whsec_").has_value(), "SecretKey: whsec_ with nothing after it is refused");
}

static void TestBatchId() {
  CHECK_EQ(BatchId(101, 200), std::string("statesman-batch-101-200"), "BatchId: from the first and last position");
  CHECK(BatchId(101, 200) != BatchId(101, 201), "BatchId: another last position, another id");
}

static void TestRetryAfter() {
  const std::time_t now = 784111777;  // Sun, 06 Nov 1994 08:49:37 GMT
  CHECK_EQ(RetryAfterMillis("2", now).value_or(-1), int64_t{2000}, "RetryAfterMillis: delay-seconds");
  CHECK_EQ(RetryAfterMillis(" 120\r\n", now).value_or(-1), int64_t{120000}, "RetryAfterMillis: spaces and CRLF around");
  CHECK_EQ(RetryAfterMillis("0", now).value_or(-1), int64_t{0}, "RetryAfterMillis: 0");
  CHECK_EQ(RetryAfterMillis("99999999999999", now).value_or(-1), int64_t{86400000}, "RetryAfterMillis: at most a day");
  CHECK_EQ(RetryAfterMillis("Sun, 06 Nov 1994 08:49:47 GMT", now).value_or(-1), int64_t{10000},
           "RetryAfterMillis: an HTTP-date 10 s ahead");
  CHECK_EQ(RetryAfterMillis("Sun, 06 Nov 1994 08:40:00 GMT", now).value_or(-1), int64_t{0},
           "RetryAfterMillis: an HTTP-date in the past is 0");
  CHECK(!RetryAfterMillis("soon", now).has_value(), "RetryAfterMillis: neither form is nothing");
  CHECK(!RetryAfterMillis("-3", now).has_value(), "RetryAfterMillis: a negative number is nothing");
  CHECK(!RetryAfterMillis("", now).has_value(), "RetryAfterMillis: empty is nothing");
}

int main() {
  TestSignature();
  TestBatchId();
  TestRetryAfter();
  return unit::Done();
}
