// Routing by root (docs/sinks.md, "Routing"): a broker name — a redis stream, a nats subject, a
// kafka topic, a rabbitmq routing key — with the placeholders {root}, {partition} and {store},
// replaced per message, so that one outbox can send each root to its own stream or topic.
// Pure C++ (no PostgreSQL headers); a Route is immutable after Parse and thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "statesman/sinks/sink.hpp"

namespace statesman::sink {

class Route {
 public:
  // Throws statesman::Error (22023) naming `option` (and `sink`, when given, as the other
  // option errors do: `sink "nats": option "subject" …`) when the pattern is empty, has an
  // unknown placeholder or an unbalanced brace.
  static Route Parse(const std::string &pattern, const std::string &option, const std::string &sink = {});

  // Whether the pattern has at least one placeholder (else For always returns Pattern()).
  bool Routed() const { return routed_; }
  const std::string &Pattern() const { return pattern_; }

  // The name for one message, from its messageId "{store}/{address}#{revision}", where
  // address = root "/" path or root "@" partition "/" path. {partition} of a record without
  // one is "". A messageId not of that shape gives "" for the parts it lacks.
  std::string For(const Message &m) const;

  // The same from the parts themselves.
  std::string For(std::string_view store, std::string_view root, std::string_view partition) const;

 private:
  enum class Part { kText, kRoot, kPartition, kStore };
  struct Piece {
    Part part;
    std::string text;  // kText only
  };

  std::string pattern_;
  std::vector<Piece> pieces_;
  bool routed_ = false;
};

// The store, root and partition of a messageId "{store}/{address}#{revision}" (views into `id`).
struct MessageIdParts {
  std::string_view store, root, partition;
};
MessageIdParts SplitMessageId(std::string_view id);

}  // namespace statesman::sink
