// Routing by root (src/sinks/routing.cpp): parsing a name pattern, and the name it gives a message.
#include "statesman/sinks/routing.hpp"

#include <string>

#include "tap.hpp"

using statesman::sink::Message;
using statesman::sink::Route;
using statesman::sink::SplitMessageId;

static Message Id(const std::string &id) {
  Message m;
  m.id = id;
  return m;
}

static std::string ErrorOf(const std::string &pattern, const std::string &option, const std::string &sink = {}) {
  try {
    Route::Parse(pattern, option, sink);
  } catch (const statesman::Error &e) {
    return e.what();
  }
  return "no error";
}

int main() {
  Route plain = Route::Parse("state-change", "stream");
  CHECK(!plain.Routed(), "a name without placeholders is not routed");
  CHECK_EQ(plain.Pattern(), std::string("state-change"), "Pattern() gives the pattern back");
  CHECK_EQ(plain.For(Id("shop/orders/42#3")), std::string("state-change"), "an unrouted name is the same for all");

  Route by_root = Route::Parse("statesman.{root}", "subject");
  CHECK(by_root.Routed(), "{root} makes a routed name");
  CHECK_EQ(by_root.For(Id("shop/orders/42#3")), std::string("statesman.orders"), "{root} of root/path");
  CHECK_EQ(by_root.For(Id("shop/orders@eu/42#3")), std::string("statesman.orders"), "{root} of root@partition/path");
  CHECK_EQ(by_root.For(Id("shop/carts/a/b#c/d#12")), std::string("statesman.carts"),
           "{root} when the path holds '/' and '#'");

  Route all = Route::Parse("{store}.{root}.{partition}", "topic");
  CHECK_EQ(all.For(Id("shop/orders@eu-1/42#3")), std::string("shop.orders.eu-1"), "{store}, {root}, {partition}");
  CHECK_EQ(all.For(Id("shop/orders/42#3")), std::string("shop.orders."), "{partition} of a record without one is \"\"");
  CHECK_EQ(all.For(Id("my_store.v2/orders@p/x@y/z#1")), std::string("my_store.v2.orders.p"),
           "a partition ends at the first '/', whatever the path holds");
  CHECK_EQ(all.For("s", "r", "p"), std::string("s.r.p"), "For(store, root, partition)");
  CHECK_EQ(Route::Parse("{root}{root}", "stream").For(Id("s/ab/x#1")), std::string("abab"),
           "a placeholder may repeat, with no text between");
  CHECK_EQ(Route::Parse("x-{root}-y", "stream").For(Id("s/ab/x#1")), std::string("x-ab-y"), "text on both sides");
  CHECK_EQ(all.For(Id("garbage")), std::string(".."), "a messageId of another shape gives empty parts");

  auto parts = SplitMessageId("st/root@part/path/with@at#x#7");
  CHECK_EQ(std::string(parts.store), std::string("st"), "SplitMessageId: store");
  CHECK_EQ(std::string(parts.root), std::string("root"), "SplitMessageId: root");
  CHECK_EQ(std::string(parts.partition), std::string("part"), "SplitMessageId: partition");

  CHECK_THROWS(Route::Parse("", "stream"), "22023", "an empty pattern is refused (22023)");
  CHECK_THROWS(Route::Parse("a.{roots}", "subject"), "22023", "an unknown placeholder is refused (22023)");
  CHECK_THROWS(Route::Parse("a.{}", "subject"), "22023", "an empty placeholder is refused (22023)");
  CHECK_THROWS(Route::Parse("a.{root", "subject"), "22023", "an unclosed brace is refused (22023)");
  CHECK_THROWS(Route::Parse("a.root}", "subject"), "22023", "a lone closing brace is refused (22023)");
  CHECK_THROWS(Route::Parse("a.{ro{root}ot}", "subject"), "22023", "a nested brace is refused (22023)");
  CHECK_THROWS(Route::Parse("{ROOT}", "subject"), "22023", "placeholders are lower-case");

  std::string e = ErrorOf("a.{nope}", "subject");
  CHECK(e.find("option \"subject\"") != std::string::npos, "the error names the option: " + e);
  CHECK(e.find("{nope}") != std::string::npos, "the error names the unknown placeholder: " + e);
  e = ErrorOf("x{root", "topic", "kafka");
  CHECK(e.rfind("sink \"kafka\": option \"topic\"", 0) == 0, "the error names the sink when given: " + e);
  CHECK(e.find("unbalanced") != std::string::npos, "the error says the brace is unbalanced: " + e);
  e = ErrorOf("", "stream", "redis");
  CHECK(e.find("must not be empty") != std::string::npos, "the error says an empty pattern is the problem: " + e);
  return unit::Done();
}
