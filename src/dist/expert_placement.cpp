#include "dist/expert_placement.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace cadenza::dist {

namespace {

Result<std::vector<std::vector<int32_t>>> read_lists(const nlohmann::json& j,
                                                     const std::string& where) {
  if (!j.is_array() || j.empty()) return make_error("{}: expected a list of per-rank lists", where);
  std::vector<std::vector<int32_t>> lists;
  for (const auto& rank : j) {
    if (!rank.is_array()) return make_error("{}: expected a list of expert ids per rank", where);
    std::vector<int32_t> ids;
    for (const auto& id : rank) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 20)) {
        return make_error("{}: expert id {} is not a non-negative integer", where, id.dump());
      }
      ids.push_back(id.get<int32_t>());
    }
    lists.push_back(std::move(ids));
  }
  return lists;
}

Status check_lists(const std::vector<std::vector<int32_t>>& lists, int ranks, int64_t n_experts,
                   const std::string& where) {
  if (static_cast<int>(lists.size()) != ranks) {
    return make_error("{}: lists experts for {} ranks, but the tensor-parallel group has {}",
                      where, lists.size(), ranks);
  }
  std::vector<int> owner(static_cast<size_t>(n_experts), -1);
  for (int r = 0; r < ranks; ++r) {
    if (lists[static_cast<size_t>(r)].empty()) {
      return make_error("{}: rank {} holds no expert", where, r);
    }
    for (const int32_t e : lists[static_cast<size_t>(r)]) {
      if (e >= n_experts) {
        return make_error("{}: expert {} does not exist (the model has {})", where, e, n_experts);
      }
      if (owner[static_cast<size_t>(e)] >= 0) {
        return make_error("{}: expert {} is placed on rank {} and rank {}", where, e,
                          owner[static_cast<size_t>(e)], r);
      }
      owner[static_cast<size_t>(e)] = r;
    }
  }
  for (int64_t e = 0; e < n_experts; ++e) {
    if (owner[static_cast<size_t>(e)] < 0) {
      return make_error("{}: expert {} is on no rank", where, e);
    }
  }
  return {};
}

}  // namespace

Result<ExpertPlacement> ExpertPlacement::parse(std::string_view text, const std::string& source) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error("{}: not a JSON object (expected {{\"ranks\": [[...], ...]}})", source);
  }
  ExpertPlacement p;
  p.source_ = source;
  if (!j.contains("ranks")) return make_error("{}: missing \"ranks\"", source);
  Result<Lists> lists = read_lists(j["ranks"], source + ": \"ranks\"");
  if (!lists) return lists.error_value();
  p.default_ = std::move(*lists);
  if (j.contains("layers")) {
    if (!j["layers"].is_object()) return make_error("{}: \"layers\" must be an object", source);
    for (const auto& [key, value] : j["layers"].items()) {
      int64_t layer = -1;
      try {
        size_t used = 0;
        layer = std::stoll(key, &used);
        if (used != key.size()) layer = -1;
      } catch (...) {
        layer = -1;
      }
      if (layer < 0) return make_error("{}: layer key '{}' is not a layer number", source, key);
      Result<Lists> per = read_lists(value, fmt::format("{}: layer {}", source, layer));
      if (!per) return per.error_value();
      p.layers_[layer] = std::move(*per);
    }
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "ranks" && key != "layers") {
      return make_error("{}: unknown key \"{}\" (expected \"ranks\" and \"layers\")", source, key);
    }
  }
  return p;
}

Result<ExpertPlacement> ExpertPlacement::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("--expert-placement: cannot open '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

Status ExpertPlacement::check(int ranks, int64_t n_experts, int64_t n_layers) const {
  if (Status st = check_lists(default_, ranks, n_experts, source_ + ": \"ranks\""); !st) return st;
  for (const auto& [layer, lists] : layers_) {
    if (layer >= n_layers) {
      return make_error("{}: layer {} does not exist (the model has {})", source_, layer, n_layers);
    }
    const std::string where = fmt::format("{}: layer {}", source_, layer);
    if (Status st = check_lists(lists, ranks, n_experts, where); !st) return st;
  }
  return {};
}

const std::vector<int32_t>& ExpertPlacement::held(int64_t layer, int rank) const {
  const auto it = layers_.find(layer);
  const Lists& lists = it != layers_.end() ? it->second : default_;
  return lists[static_cast<size_t>(rank)];
}

uint64_t ExpertPlacement::checksum() const {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](int64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint64_t>(v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  auto mix_lists = [&](const Lists& lists) {
    mix(static_cast<int64_t>(lists.size()));
    for (const auto& l : lists) {
      mix(static_cast<int64_t>(l.size()));
      for (const int32_t e : l) mix(e);
    }
  };
  mix_lists(default_);
  for (const auto& [layer, lists] : layers_) {
    mix(layer);
    mix_lists(lists);
  }
  return h;
}

}  // namespace cadenza::dist
