// SQL entry points of the sink registry (src/sinks/sink_types.cpp):
//   statesman._known_sinks() → text[]
//   statesman._check_sink_options(sink, options jsonb) → jsonb with defaults filled in
//   statesman._sink_gives_password(sink, options jsonb) → boolean (NULL: no password rule)
#include "statesman/pg/guard.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"

PG_FUNCTION_INFO_V1(statesman_known_sinks);
PG_FUNCTION_INFO_V1(statesman_check_sink_options);
PG_FUNCTION_INFO_V1(statesman_sink_gives_password);
}

#include <string>

#include "statesman/sinks/sink.hpp"

extern "C" Datum statesman_known_sinks(PG_FUNCTION_ARGS) {
  using namespace statesman;
  return pg::Invoke([&] {
    const auto &types = sink::SinkTypes();
    return pg::Call([&] {
      Datum *names = static_cast<Datum *>(palloc(sizeof(Datum) * types.size()));
      for (size_t i = 0; i < types.size(); ++i) names[i] = CStringGetTextDatum(types[i]->name);
      return PointerGetDatum(construct_array(names, static_cast<int>(types.size()), TEXTOID, -1, false, TYPALIGN_INT));
    });
  });
}

namespace {

// The (sink text, sink_options jsonb) arguments both entries take, as C strings.
struct SinkArgs {
  char *name;
  char *options;
};

SinkArgs ReadSinkArgs(FunctionCallInfo fcinfo) {
  using namespace statesman;
  return pg::Call([&] {
    Jsonb *j = PG_GETARG_JSONB_P(1);
    return SinkArgs{text_to_cstring(PG_GETARG_TEXT_PP(0)), JsonbToCString(nullptr, &j->root, VARSIZE(j))};
  });
}

}  // namespace

extern "C" Datum statesman_check_sink_options(PG_FUNCTION_ARGS) {
  using namespace statesman;
  return pg::Invoke([&] {
    auto [name, options] = ReadSinkArgs(fcinfo);
    const sink::SinkType *type = sink::FindSink(name);
    if (type == nullptr || type->check_options == nullptr)
      throw Error(sqlstate::kInvalidParameterValue, std::string("sink \"") + name + "\" takes no options here");
    std::string checked = type->check_options(options);
    const char *text = checked.c_str();
    return pg::Call([&] { return DirectFunctionCall1(jsonb_in, CStringGetDatum(text)); });
  });
}

// Whether checked options give a password of their own (SinkType::gives_password); NULL for a
// sink the password rule does not apply to.
extern "C" Datum statesman_sink_gives_password(PG_FUNCTION_ARGS) {
  using namespace statesman;
  return pg::Invoke([&] {
    auto [name, options] = ReadSinkArgs(fcinfo);
    const sink::SinkType *type = sink::FindSink(name);
    if (type == nullptr || type->gives_password == nullptr) {
      fcinfo->isnull = true;
      return Datum(0);
    }
    return BoolGetDatum(type->gives_password(options));
  });
}
