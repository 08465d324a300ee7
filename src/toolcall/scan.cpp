// The shared scanning machinery (scan.h): the Sink's whitespace rules, the JSON extent scanner and
// the marker-block loop.
#include "toolcall/scan.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

namespace cadenza::toolcall::detail {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

size_t skip_space(std::string_view text, size_t pos) {
  while (pos < text.size() && is_space(text[pos])) ++pos;
  return pos;
}

bool starts_with_at(std::string_view text, size_t pos, std::string_view prefix) {
  return pos <= text.size() && text.substr(pos).starts_with(prefix);
}

bool is_partial_at(std::string_view text, size_t pos, std::string_view marker) {
  std::string_view rest = text.substr(std::min(pos, text.size()));
  return rest.size() < marker.size() && marker.starts_with(rest);
}

void Sink::begin_run(Target target, bool lstrip, std::string_view separator) {
  run_.clear();
  target_ = target;
  lstrip_ = lstrip;
  separator_ = separator;
}

void Sink::flush(bool at_marker) {
  std::string_view r = run_;
  if (lstrip_) {
    while (!r.empty() && is_space(r.front())) r.remove_prefix(1);
  }
  if (trim(r).empty()) return;  // whitespace-only runs are dropped
  if (at_marker) {
    while (!r.empty() && is_space(r.back())) r.remove_suffix(1);
  }
  std::string& out = target_ == Target::kContent ? content : reasoning;
  if (!out.empty()) out += separator_;
  out += r;
}

void Sink::end_run(bool at_marker) {
  flush(at_marker);
  begin_run(Target::kContent);
}

void Sink::call(RawCall c) {
  end_run(true);
  calls.push_back(std::move(c));
}

void Sink::finish(bool final) {
  // Not final: the open run may still grow, so its trailing whitespace is not settled (the same
  // text as at a marker).
  flush(!final);
  run_.clear();
}

JsonExtent json_extent(std::string_view text, size_t start) {
  using S = JsonExtent::Status;
  // A small push-down scanner: it only has to know where the value ends and whether the bytes so
  // far can still start a valid value; nlohmann parses the text once it is complete.
  std::vector<char> stack;  // '{' or '['
  enum class Expect { kValue, kKeyOrClose, kKey, kColon, kCommaOrClose, kValueOrClose };
  Expect expect = Expect::kValue;
  size_t i = skip_space(text, start);
  const size_t n = text.size();
  auto after_value = [&]() { expect = stack.empty() ? Expect::kValue : Expect::kCommaOrClose; };
  while (true) {
    i = skip_space(text, i);
    if (i >= n) return {S::kIncomplete, n};
    const char c = text[i];
    if (expect == Expect::kColon) {
      if (c != ':') return {S::kInvalid, i + 1};
      ++i;
      expect = Expect::kValue;
      continue;
    }
    if (expect == Expect::kCommaOrClose) {
      if (c == ',') {
        ++i;
        expect = stack.back() == '{' ? Expect::kKey : Expect::kValue;
        continue;
      }
      if ((c == '}' && stack.back() == '{') || (c == ']' && stack.back() == '[')) {
        stack.pop_back();
        ++i;
        if (stack.empty()) return {S::kComplete, i};
        continue;
      }
      return {S::kInvalid, i + 1};
    }
    if ((expect == Expect::kKeyOrClose && c == '}') || (expect == Expect::kValueOrClose && c == ']')) {
      stack.pop_back();
      ++i;
      if (stack.empty()) return {S::kComplete, i};
      expect = Expect::kCommaOrClose;
      continue;
    }
    const bool want_key = expect == Expect::kKey || expect == Expect::kKeyOrClose;
    if (c == '"') {
      size_t j = i + 1;
      while (j < n && text[j] != '"') {
        if (static_cast<unsigned char>(text[j]) < 0x20) return {S::kInvalid, j + 1};
        j += text[j] == '\\' ? 2 : 1;
      }
      if (j >= n) return {S::kIncomplete, n};
      i = j + 1;
      if (want_key) {
        expect = Expect::kColon;
      } else {
        if (stack.empty()) return {S::kComplete, i};
        after_value();
      }
      continue;
    }
    if (want_key) return {S::kInvalid, i + 1};
    if (c == '{' || c == '[') {
      stack.push_back(c);
      ++i;
      expect = c == '{' ? Expect::kKeyOrClose : Expect::kValueOrClose;
      continue;
    }
    // Literals and numbers: a maximal run of their characters. At the top level a number's end is
    // unknown until a non-digit follows, which only matters for top-level scalars (never a call).
    size_t j = i;
    while (j < n && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '-' ||
                     text[j] == '+' || text[j] == '.')) {
      ++j;
    }
    if (j == i) return {S::kInvalid, i + 1};
    if (j >= n) return {S::kIncomplete, n};
    const std::string_view token = text.substr(i, j - i);
    const bool literal = token == "true" || token == "false" || token == "null";
    const bool number = !literal && (token[0] == '-' || std::isdigit(static_cast<unsigned char>(token[0])));
    if (!literal && !number) return {S::kInvalid, j};
    if (number && !nlohmann::json::accept(token)) return {S::kInvalid, j};
    i = j;
    if (stack.empty()) return {S::kComplete, i};
    after_value();
  }
}

namespace {
std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}
}  // namespace

std::optional<std::string> normalize_object(std::string_view json_text) {
  auto j = nlohmann::ordered_json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  return dump(j);
}

std::optional<RawCall> call_from_object_text(std::string_view json_text) {
  auto j = nlohmann::ordered_json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  // {"type": "function", "function": {...}} wraps the call in some outputs.
  if (j.contains("function") && j["function"].is_object()) j = j["function"];
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  RawCall call;
  call.name = name->get<std::string>();
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  if (args == j.end()) {
    call.arguments = "{}";
  } else if (args->is_object()) {
    call.arguments = dump(*args);
  } else if (args->is_string()) {
    // Some models write the arguments as a JSON string holding the object.
    auto inner = normalize_object(args->get<std::string>());
    if (!inner) return std::nullopt;
    call.arguments = *inner;
  } else {
    return std::nullopt;
  }
  if (auto id = j.find("id"); id != j.end() && id->is_string()) call.id = id->get<std::string>();
  return call;
}

size_t partial_marker_tail(std::string_view text, std::initializer_list<std::string_view> markers) {
  size_t best = 0;
  for (std::string_view m : markers) {
    for (size_t len = std::min(m.size() - 1, text.size()); len > best; --len) {
      if (text.substr(text.size() - len) == m.substr(0, len)) {
        best = len;
        break;
      }
    }
  }
  return best;
}

std::optional<MarkerHit> find_first(std::string_view text, size_t from,
                                    std::initializer_list<std::string_view> markers) {
  std::optional<MarkerHit> best;
  size_t which = 0;
  for (std::string_view m : markers) {
    const size_t p = text.find(m, from);
    if (p != std::string_view::npos && (!best || p < best->pos)) best = MarkerHit{p, which};
    ++which;
  }
  return best;
}

void scan_blocks(std::string_view text, size_t pos, bool final,
                 std::initializer_list<std::string_view> open_markers, BlockParser parse_block,
                 Sink& sink) {
  while (pos <= text.size()) {
    auto hit = find_first(text, pos, open_markers);
    if (!hit) {
      std::string_view rest = text.substr(pos);
      if (!final) rest.remove_suffix(partial_marker_tail(rest, open_markers));
      sink.text(rest);
      return;
    }
    sink.text(text.substr(pos, hit->pos - pos));
    Block block = parse_block(text, hit->pos, final);
    if (block.status == Block::Status::kIncomplete) {
      if (!final) return;  // held: everything from the marker on waits for more text
      block.status = Block::Status::kInvalid;  // truncated: the rest is content
      block.end = text.size();
    }
    if (block.status == Block::Status::kInvalid) {
      block.end = std::max(block.end, hit->pos + 1);
      sink.text(text.substr(hit->pos, block.end - hit->pos));
    } else {
      for (auto& c : block.calls) sink.call(std::move(c));
    }
    pos = block.end;
  }
}

void scan_plain(std::string_view text, bool final, Sink& sink) { sink.text(text); }

}  // namespace cadenza::toolcall::detail
