// Routing by root: a broker name with {root}, {partition} and {store} (see routing.hpp).
#include "statesman/sinks/routing.hpp"

#include "statesman/error.hpp"

namespace statesman::sink {

namespace {

[[noreturn]] void Invalid(const std::string &sink, const std::string &option, const std::string &rule) {
  std::string prefix = sink.empty() ? std::string() : "sink \"" + sink + "\": ";
  throw Error(sqlstate::kInvalidParameterValue, prefix + "option \"" + option + "\" " + rule,
              "A name may use the placeholders {root}, {partition} and {store}, replaced per message.");
}

}  // namespace

Route Route::Parse(const std::string &pattern, const std::string &option, const std::string &sink) {
  if (pattern.empty()) Invalid(sink, option, "must not be empty");
  Route r;
  r.pattern_ = pattern;
  std::string text;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '}') Invalid(sink, option, "has an unbalanced \"}\" at byte " + std::to_string(i + 1));
    if (c != '{') {
      text += c;
      continue;
    }
    size_t close = pattern.find_first_of("{}", i + 1);
    if (close == std::string::npos || pattern[close] == '{')
      Invalid(sink, option, "has an unbalanced \"{\" at byte " + std::to_string(i + 1));
    std::string name = pattern.substr(i + 1, close - i - 1);
    Part part;
    if (name == "root")
      part = Part::kRoot;
    else if (name == "partition")
      part = Part::kPartition;
    else if (name == "store")
      part = Part::kStore;
    else
      Invalid(sink, option, "has an unknown placeholder \"{" + name + "}\"");
    if (!text.empty()) r.pieces_.push_back(Piece{Part::kText, std::move(text)});
    text.clear();
    r.pieces_.push_back(Piece{part, {}});
    r.routed_ = true;
    i = close;
  }
  if (!text.empty()) r.pieces_.push_back(Piece{Part::kText, std::move(text)});
  return r;
}

MessageIdParts SplitMessageId(std::string_view id) {
  MessageIdParts parts;
  size_t slash = id.find('/');
  if (slash == std::string_view::npos) return parts;
  parts.store = id.substr(0, slash);
  // The address runs to the last '#' (a path may hold '#'; the revision is digits).
  size_t hash = id.rfind('#');
  std::string_view address =
      id.substr(slash + 1, hash == std::string_view::npos || hash <= slash ? std::string_view::npos : hash - slash - 1);
  // A root has neither '/' nor '@'; a partition follows '@' up to the next '/'.
  size_t end = address.find_first_of("/@");
  parts.root = address.substr(0, end);
  if (end != std::string_view::npos && address[end] == '@') {
    std::string_view rest = address.substr(end + 1);
    parts.partition = rest.substr(0, rest.find('/'));
  }
  return parts;
}

std::string Route::For(const Message &m) const {
  if (!routed_) return pattern_;
  MessageIdParts p = SplitMessageId(m.id);
  return For(p.store, p.root, p.partition);
}

std::string Route::For(std::string_view store, std::string_view root, std::string_view partition) const {
  if (!routed_) return pattern_;
  std::string out;
  out.reserve(pattern_.size() + 32);
  for (const Piece &piece : pieces_) {
    switch (piece.part) {
      case Part::kText: out += piece.text; break;
      case Part::kRoot: out += root; break;
      case Part::kPartition: out += partition; break;
      case Part::kStore: out += store; break;
    }
  }
  return out;
}

}  // namespace statesman::sink
