#include "gateway/router.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "gateway/hashing.h"

namespace cadenza::gateway {

HashRing::HashRing(const std::vector<std::string>& ids, int virtual_nodes) {
  points_.reserve(ids.size() * static_cast<size_t>(std::max(virtual_nodes, 1)));
  for (size_t m = 0; m < ids.size(); ++m)
    for (int k = 0; k < std::max(virtual_nodes, 1); ++k)
      points_.push_back({hash64(ids[m] + "#" + std::to_string(k)), static_cast<int>(m)});
  std::sort(points_.begin(), points_.end(), [](const Point& a, const Point& b) {
    return a.hash != b.hash ? a.hash < b.hash : a.member < b.member;
  });
}

size_t HashRing::first_at_or_after(uint64_t hash) const {
  auto it = std::lower_bound(points_.begin(), points_.end(), hash,
                             [](const Point& p, uint64_t h) { return p.hash < h; });
  return it == points_.end() ? 0 : static_cast<size_t>(it - points_.begin());
}

int pick_least_loaded(std::span<const Candidate> c, uint64_t rotate) {
  if (c.empty()) return -1;
  int best = -1;
  const size_t n = c.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (rotate + k) % n;
    if (!c[i].eligible) continue;
    if (best < 0 || c[i].outstanding < c[static_cast<size_t>(best)].outstanding)
      best = static_cast<int>(i);
  }
  return best;
}

Pick pick_replica(const HashRing& ring, std::span<const Candidate> c,
                  std::optional<uint64_t> prefix_hash, int busy_threshold, uint64_t rotate) {
  if (prefix_hash && !ring.empty()) {
    const int o = ring.owner(*prefix_hash, [&](int m) {
      return m >= 0 && static_cast<size_t>(m) < c.size() && c[static_cast<size_t>(m)].eligible;
    });
    if (o >= 0 && c[static_cast<size_t>(o)].outstanding < busy_threshold) return {o, true};
  }
  return {pick_least_loaded(c, rotate), false};
}

int pick_weighted(std::span<const double> weights, double u) {
  double total = 0;
  for (double w : weights) total += std::max(w, 0.0);
  if (total <= 0) return -1;
  double x = std::clamp(u, 0.0, 1.0) * total;
  int last = -1;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0) continue;
    last = static_cast<int>(i);
    if (x < weights[i]) return last;
    x -= weights[i];
  }
  return last;  // u == 1 or rounding
}

namespace {

void append_capped(std::string& out, std::string_view s, size_t n) {
  if (out.size() >= n) return;
  out.append(s.substr(0, n - out.size()));
}

void append_content(std::string& out, const nlohmann::json& content, size_t n) {
  if (content.is_string()) {
    append_capped(out, content.get_ref<const std::string&>(), n);
  } else if (content.is_array()) {
    for (const auto& part : content) {
      if (out.size() >= n) return;
      if (part.is_object() && part.contains("text") && part["text"].is_string())
        append_capped(out, part["text"].get_ref<const std::string&>(), n);
    }
  }
}

}  // namespace

std::string affinity_prefix(const nlohmann::json& request, size_t n) {
  std::string out;
  if (!request.is_object() || n == 0) return out;
  if (auto it = request.find("messages"); it != request.end() && it->is_array()) {
    for (const auto& m : *it) {
      if (out.size() >= n) break;
      if (!m.is_object()) continue;
      if (auto r = m.find("role"); r != m.end() && r->is_string())
        append_capped(out, r->get_ref<const std::string&>(), n);
      append_capped(out, "\n", n);
      if (auto c = m.find("content"); c != m.end()) append_content(out, *c, n);
      append_capped(out, "\n", n);
    }
    return out;
  }
  if (auto it = request.find("prompt"); it != request.end()) {
    if (it->is_string()) {
      append_capped(out, it->get_ref<const std::string&>(), n);
    } else if (it->is_array() && !it->empty()) {
      const auto& first = (*it)[0];
      if (first.is_string())
        append_capped(out, first.get_ref<const std::string&>(), n);
      else
        append_capped(out, it->dump(), n);  // token ids
    }
  }
  return out;
}

}  // namespace cadenza::gateway
