// The sinks this build knows (docs/design.md §6). A new sink adds its SinkType here.
#include "statesman/sinks/sink.hpp"

#include <nlohmann/json.hpp>

namespace statesman::sink {

extern const SinkType kTableSink;
extern const SinkType kRedisSink;
extern const SinkType kPostgresSink;
extern const SinkType kNatsSink;
extern const SinkType kKafkaSink;
extern const SinkType kRabbitSink;
extern const SinkType kWebhookSink;

const std::vector<const SinkType *> &SinkTypes() {
  static const std::vector<const SinkType *> types = {&kTableSink, &kRedisSink,  &kPostgresSink, &kNatsSink,
                                                      &kKafkaSink, &kRabbitSink, &kWebhookSink};
  return types;
}

const SinkType *FindSink(const std::string &name) {
  for (const SinkType *type : SinkTypes())
    if (name == type->name) return type;
  return nullptr;
}

int64_t TimeoutMillis(const std::string &options_json, int64_t fallback) {
  nlohmann::json options = nlohmann::json::parse(options_json, nullptr, false);
  if (options.is_object()) {
    auto it = options.find("timeout_ms");
    if (it != options.end() && it->is_number_integer()) return it->get<int64_t>();
  }
  return fallback;
}

}  // namespace statesman::sink
