// Helpers shared by the sinks: option parsing and bounded, cancellable waits on a socket.
// Plain C++ (no PostgreSQL headers).
#pragma once

#include <nlohmann/json.hpp>
#include <pthread.h>
#include <signal.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "statesman/sinks/sink.hpp"

namespace statesman::sink {

// ---- Options --------------------------------------------------------------------------------

// Parses a sink's options; throws Error 22023 unless they are one JSON object whose keys are
// all in `known` (the message names the sink and lists the known keys).
nlohmann::json ParseOptions(const char *sink, const std::string &options_json, const std::vector<std::string> &known);

// The option `key` as a string / integer, or nullopt when absent or null. Throws Error 22023
// when it has another type, is empty (strings) or lies outside [min, max] (integers).
std::optional<std::string> StringOption(const char *sink, const nlohmann::json &options, const char *key);
std::optional<int64_t> IntOption(const char *sink, const nlohmann::json &options, const char *key, int64_t min,
                                 int64_t max);
// A secret option (a password, a token): as StringOption, except that a null is refused
// (22004, with `hint`) rather than read as absent: a secret that a template or a function left
// NULL would otherwise log in without one where the server allows it.
std::optional<std::string> SecretOption(const char *sink, const nlohmann::json &options, const char *key,
                                        const char *hint);
// Throws Error 22023 unless the string options "user" and "password" are both given or neither.
void CheckUserPassword(const char *sink, const nlohmann::json &options);

// ---- Waiting on a socket ------------------------------------------------------------------------

enum class WaitResult { kReady, kTimedOut, kCancelled, kFailed };

// Waits until `fd` is readable (and/or writable), the budget's deadline passes, or the budget
// is cancelled (checked every Budget::kCancelCheck). kFailed carries errno.
WaitResult WaitSocket(int fd, bool for_read, bool for_write, const Budget &budget);

// ---- Threads ------------------------------------------------------------------------------------

// Blocks every signal in this thread for its lifetime. A thread started meanwhile (by the sink,
// or by its client library: libcurl's resolver, nats.c's) inherits the mask, so that the
// server's signal handlers only ever run on the dispatcher's own thread.
class SignalsBlocked {
 public:
  SignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &saved_);
  }
  ~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  SignalsBlocked(const SignalsBlocked &) = delete;
  SignalsBlocked &operator=(const SignalsBlocked &) = delete;

 private:
  sigset_t saved_;
};

// Replaces every occurrence of `secret` in `text` with "********" (no-op for an empty secret).
std::string Redact(std::string text, const std::string &secret);

}  // namespace statesman::sink
