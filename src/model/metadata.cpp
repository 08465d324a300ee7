#include "model/metadata.h"

#include <cmath>
#include <tuple>

#include "gguf/gguf.h"
#include "model/config.h"

namespace cadenza::model {

MetadataReader::MetadataReader(const gguf::GgufFile& file, std::string arch)
    : file_(file), arch_(std::move(arch)) {}

std::string MetadataReader::key(std::string_view suffix) const {
  return arch_ + "." + std::string(suffix);
}

bool MetadataReader::has(std::string_view suffix) const { return file_.find(key(suffix)) != nullptr; }

Result<int64_t> MetadataReader::count(std::string_view suffix, int64_t min, int64_t max) const {
  const std::string k = key(suffix);
  Result<uint64_t> v = file_.get_uint(k);
  if (!v) return v.error_value();
  if (*v < static_cast<uint64_t>(min) || *v > static_cast<uint64_t>(max)) {
    return make_error("{}: key '{}' = {} is out of range [{}, {}]", file_.name(), k, *v, min, max);
  }
  return static_cast<int64_t>(*v);
}

Result<int64_t> MetadataReader::count_or(std::string_view suffix, int64_t fallback, int64_t min,
                                         int64_t max) const {
  if (has(suffix)) return count(suffix, min, max);
  if (fallback < min || fallback > max) {
    return make_error("{}: key '{}' is missing and its default {} is out of range [{}, {}]",
                      file_.name(), key(suffix), fallback, min, max);
  }
  return fallback;
}

Result<double> MetadataReader::real_or(std::string_view suffix, double fallback) const {
  const std::string k = key(suffix);
  Result<double> v = file_.get_float_or(k, fallback);
  if (!v) return v.error_value();
  if (!std::isfinite(*v)) return make_error("{}: key '{}' is not a finite number", file_.name(), k);
  return *v;
}

Result<bool> MetadataReader::flag_or(std::string_view suffix, bool fallback) const {
  return file_.get_bool_or(key(suffix), fallback);
}

Status read_feed_forward(const MetadataReader& md, ModelConfig& c, const FeedForwardKeys& keys) {
  const std::string& file = md.file().name();
  Result<int64_t> experts = md.count_or("expert_count", 0, 0, limits::kMaxExperts);
  if (!experts) return experts.error_value();
  c.n_experts = *experts;
  using Experts = FeedForwardKeys::Experts;
  if (keys.experts == Experts::Required && c.n_experts == 0) {
    return make_error("{}: key '{}' is missing or 0 ({} needs experts)", file,
                      md.key("expert_count"), c.architecture);
  }
  if (keys.experts == Experts::None && c.n_experts > 0) {
    return make_error("{}: key '{}' = {}, but {} is a dense architecture", file,
                      md.key("expert_count"), c.n_experts, c.architecture);
  }
  if (c.n_experts > 0) {
    Result<int64_t> used = md.count("expert_used_count", 1, c.n_experts);
    if (!used) return used.error_value();
    c.n_experts_used = *used;
  }
  // An all-experts model needs no dense FFN width, but its file usually has one.
  Result<int64_t> ff = keys.experts == Experts::Required
                           ? md.count_or("feed_forward_length", 0, 0, limits::kMaxFf)
                           : md.count("feed_forward_length", 1, limits::kMaxFf);
  if (!ff) return ff.error_value();
  c.n_ff = *ff;
  if (c.n_experts == 0) return {};

  Result<int64_t> ff_expert = md.count_or("expert_feed_forward_length", c.n_ff, 1, limits::kMaxFf);
  if (!ff_expert) return ff_expert.error_value();
  c.n_ff_expert = *ff_expert;
  Result<bool> norm = md.flag_or("expert_weights_norm", keys.normalize_top_k);
  if (!norm) return norm.error_value();
  c.moe_normalize_top_k = *norm;
  // Gating function as the reference numbers it: 1 = softmax, 2 = sigmoid, 3 = softmax over the
  // k experts chosen by their logits (gpt-oss); the family says which is the default.
  Result<int64_t> gating = md.count_or("expert_gating_func", keys.gating_func, 0, 16);
  if (!gating) return gating.error_value();
  if (*gating != 1 && *gating != 2 && *gating != 3) {
    return make_error("{}: key '{}' = {}: only softmax (1), sigmoid (2) and softmax over the "
                      "chosen experts (3) gating are supported",
                      file, md.key("expert_gating_func"), *gating);
  }
  c.moe_gating = *gating == 2   ? kernels::ExpertGating::Sigmoid
                 : *gating == 3 ? kernels::ExpertGating::SoftmaxTopK
                                : kernels::ExpertGating::Softmax;
  // Expert groups: the experts split into equal groups, the top-k chosen from the best ones.
  Result<int64_t> groups = md.count_or("expert_group_count", 1, 1, c.n_experts);
  if (!groups) return groups.error_value();
  if (c.n_experts % *groups != 0) {
    return make_error("{}: key '{}' = {} does not divide the {} experts", file,
                      md.key("expert_group_count"), *groups, c.n_experts);
  }
  Result<int64_t> groups_used = md.count_or("expert_group_used_count", *groups, 1, *groups);
  if (!groups_used) return groups_used.error_value();
  if (*groups_used * (c.n_experts / *groups) < c.n_experts_used) {
    return make_error("{}: key '{}' = {}: {} of {} groups hold fewer than the {} experts used per "
                      "token", file, md.key("expert_group_used_count"), *groups_used, *groups_used,
                      *groups, c.n_experts_used);
  }
  c.moe_groups = *groups;
  c.moe_groups_used = *groups_used;
  Result<double> scale = md.real_or("expert_weights_scale", 0.0);
  if (!scale) return scale.error_value();
  c.moe_weights_scale = *scale == 0.0 ? 1.0f : static_cast<float>(*scale);
  return {};
}

Status read_recurrent_shape(const MetadataReader& md, ModelConfig& c) {
  ModelConfig::RecurrentShape& r = c.recurrent;
  Result<int64_t> v = int64_t{0};
  for (auto [key, dst, lo] : {std::tuple{"ssm.conv_kernel", &r.conv_kernel, int64_t{2}},
                              std::tuple{"ssm.state_size", &r.k_dim, int64_t{1}},
                              std::tuple{"ssm.group_count", &r.k_heads, int64_t{1}},
                              std::tuple{"ssm.time_step_rank", &r.v_heads, int64_t{1}}}) {
    if (v = md.count(key, lo, 1 << 16); !v) return v.error_value();
    *dst = *v;
  }
  if (v = md.count("ssm.inner_size", 1, 1 << 24); !v) return v.error_value();
  if (*v % r.v_heads != 0 || r.v_heads % r.k_heads != 0) {
    return make_error("{}: '{}' = {} must be a multiple of '{}' = {}, itself a multiple of '{}' = "
                      "{}", md.file().name(), md.key("ssm.inner_size"), *v,
                      md.key("ssm.time_step_rank"), r.v_heads, md.key("ssm.group_count"),
                      r.k_heads);
  }
  r.v_dim = *v / r.v_heads;
  return {};
}

}  // namespace cadenza::model
