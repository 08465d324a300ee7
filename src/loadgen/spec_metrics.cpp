#include "loadgen/spec_metrics.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

namespace cadenza::loadgen {
namespace {

constexpr std::string_view kDrafts = "cadenza_spec_decode_num_drafts_total";
constexpr std::string_view kDraftTokens = "cadenza_spec_decode_num_draft_tokens_total";
constexpr std::string_view kAccepted = "cadenza_spec_decode_num_accepted_tokens_total";
constexpr std::string_view kPerPos = "cadenza_spec_decode_num_accepted_tokens_per_pos_total";
constexpr size_t kMaxPositions = 4096;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// The value of label `name` in `labels` (the text between the braces), if present.
std::optional<std::string> label_value(std::string_view labels, std::string_view name) {
  size_t i = 0;
  while (i < labels.size()) {
    while (i < labels.size() && (labels[i] == ' ' || labels[i] == ',')) ++i;
    const size_t eq = labels.find('=', i);
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string_view key = trim(labels.substr(i, eq - i));
    size_t j = eq + 1;
    while (j < labels.size() && labels[j] == ' ') ++j;
    if (j >= labels.size() || labels[j] != '"') return std::nullopt;
    std::string value;
    ++j;
    for (; j < labels.size() && labels[j] != '"'; ++j) {
      if (labels[j] == '\\' && j + 1 < labels.size()) ++j;
      value.push_back(labels[j]);
    }
    if (j >= labels.size()) return std::nullopt;  // unterminated
    if (key == name) return value;
    i = j + 1;
  }
  return std::nullopt;
}

std::optional<double> parse_value(std::string_view s) {
  s = trim(s);
  const size_t space = s.find_first_of(" \t");  // an optional timestamp follows
  if (space != std::string_view::npos) s = s.substr(0, space);
  if (s.empty()) return std::nullopt;
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v) || v < 0)
    return std::nullopt;
  return v;
}

int64_t count(double v) { return static_cast<int64_t>(std::llround(v)); }

}  // namespace

SpecCounters parse_spec_counters(std::string_view text) {
  SpecCounters c;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty() || line.front() == '#') continue;
    const size_t name_end = line.find_first_of("{ \t");
    if (name_end == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, name_end);
    if (name != kDrafts && name != kDraftTokens && name != kAccepted && name != kPerPos) continue;
    std::string_view labels, rest = line.substr(name_end);
    if (rest.front() == '{') {
      const size_t close = rest.rfind('}');
      if (close == std::string_view::npos) continue;
      labels = rest.substr(1, close - 1);
      rest = rest.substr(close + 1);
    }
    const auto v = parse_value(rest);
    if (!v) continue;
    if (name == kPerPos) {
      const auto pos = label_value(labels, "position");
      if (!pos || pos->empty()) continue;
      size_t i = 0;
      auto [p, ec] = std::from_chars(pos->data(), pos->data() + pos->size(), i);
      if (ec != std::errc() || p != pos->data() + pos->size() || i >= kMaxPositions) continue;
      if (c.accepted_per_pos.size() <= i) c.accepted_per_pos.resize(i + 1, 0.0);
      c.accepted_per_pos[i] += *v;
    } else if (name == kDrafts) {
      c.drafts += *v;
    } else if (name == kDraftTokens) {
      c.draft_tokens += *v;
    } else {
      c.accepted += *v;
    }
    c.present = true;
  }
  return c;
}

std::optional<SpecDecode> spec_delta(const SpecCounters& before, const SpecCounters& after) {
  if (!before.present || !after.present) return std::nullopt;
  SpecDecode d;
  d.drafts = count(after.drafts - before.drafts);
  d.draft_tokens = count(after.draft_tokens - before.draft_tokens);
  d.accepted = count(after.accepted - before.accepted);
  if (d.drafts <= 0 || d.draft_tokens <= 0 || d.accepted < 0) return std::nullopt;
  const size_t n = after.accepted_per_pos.size();
  for (size_t i = 0; i < n; ++i) {
    const double b = i < before.accepted_per_pos.size() ? before.accepted_per_pos[i] : 0.0;
    const int64_t a = count(after.accepted_per_pos[i] - b);
    if (a < 0) return std::nullopt;
    d.accepted_per_pos.push_back(a);
  }
  // Positions beyond the last one with acceptances carry no information.
  while (!d.accepted_per_pos.empty() && d.accepted_per_pos.back() == 0)
    d.accepted_per_pos.pop_back();
  const double drafts = static_cast<double>(d.drafts);
  d.acceptance_rate = static_cast<double>(d.accepted) / static_cast<double>(d.draft_tokens);
  d.mean_tokens_per_verification = 1.0 + static_cast<double>(d.accepted) / drafts;
  for (int64_t a : d.accepted_per_pos)
    d.acceptance_by_position.push_back(static_cast<double>(a) / drafts);
  return d;
}

void to_json(nlohmann::json& j, const SpecDecode& s) {
  j = nlohmann::json{{"drafts", s.drafts},
                     {"draft_tokens", s.draft_tokens},
                     {"accepted_tokens", s.accepted},
                     {"accepted_per_position", s.accepted_per_pos},
                     {"acceptance_rate", s.acceptance_rate},
                     {"mean_tokens_per_verification", s.mean_tokens_per_verification},
                     {"acceptance_by_position", s.acceptance_by_position}};
}

void from_json(const nlohmann::json& j, SpecDecode& s) {
  s.drafts = j.value("drafts", s.drafts);
  s.draft_tokens = j.value("draft_tokens", s.draft_tokens);
  s.accepted = j.value("accepted_tokens", s.accepted);
  s.accepted_per_pos = j.value("accepted_per_position", s.accepted_per_pos);
  s.acceptance_rate = j.value("acceptance_rate", s.acceptance_rate);
  s.mean_tokens_per_verification =
      j.value("mean_tokens_per_verification", s.mean_tokens_per_verification);
  s.acceptance_by_position = j.value("acceptance_by_position", s.acceptance_by_position);
}

}  // namespace cadenza::loadgen
