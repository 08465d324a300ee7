#include "quantize/awq.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tensor/quant.h"

namespace cadenza::quantize {
namespace {

// A matrix whose columns get the group's scales.
struct Member {
  const gguf::TensorInfo* t = nullptr;
  DType type = DType::F32;
  std::vector<float> imp;  // its own imatrix entry (weights its encoding); empty: encoded plainly
  std::vector<float> sample;  // the searched rows, decoded: [rows_sampled][cols]
  int64_t sampled = 0;
};

// A tensor the inverse scales are folded into: a 1-D vector (element-wise) or a matrix's rows.
struct Fold {
  const gguf::TensorInfo* t = nullptr;
  bool rows = false;
};

struct Spec {
  std::string name;
  std::vector<Member> members;
  std::vector<Fold> folds;
  std::vector<float> importance;  // per column of the members: E[x_c^2]
  std::vector<int64_t> map;       // column -> scale index; empty: the identity
  int64_t n_scales = 0;
};

const gguf::TensorInfo* find2d(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  return t && t->shape.size() == 2 ? t : nullptr;
}

// The scales for one alpha: stat^(alpha/2), normalised so that max * min = 1. Channels that saw
// (almost) nothing are held at a floor of 1e-6 of the largest statistic.
std::vector<float> scales_for(const std::vector<float>& stat, float alpha) {
  std::vector<float> s(stat.size(), 1.0f);
  const float top = stat.empty() ? 0.0f : *std::max_element(stat.begin(), stat.end());
  if (!(top > 0) || alpha == 0) return s;
  double lo = INFINITY, hi = 0;
  for (size_t i = 0; i < stat.size(); ++i) {
    s[i] = static_cast<float>(std::pow(static_cast<double>(std::max(stat[i], top * 1e-6f)), alpha / 2.0));
    lo = std::min(lo, static_cast<double>(s[i]));
    hi = std::max(hi, static_cast<double>(s[i]));
  }
  const double norm = std::sqrt(lo * hi);
  for (float& v : s) v = static_cast<float>(v / norm);
  return s;
}

// err(alpha) of the group's sampled rows (awq.h).
double group_error(const Spec& g, const std::vector<float>& col_scale, std::vector<float>& w,
                   std::vector<float>& imp, std::vector<uint8_t>& q, std::vector<float>& back) {
  double err = 0;
  const size_t n = col_scale.size();
  w.resize(n);
  back.resize(n);
  for (const Member& m : g.members) {
    const bool weighted = !m.imp.empty() && has_weighted_quantizer(m.type);
    if (weighted) {
      imp.resize(n);
      for (size_t c = 0; c < n; ++c) imp[c] = m.imp[c] / (col_scale[c] * col_scale[c]);
    }
    q.resize(static_cast<size_t>(*row_bytes(m.type, static_cast<int64_t>(n))));
    for (int64_t r = 0; r < m.sampled; ++r) {
      const float* src = m.sample.data() + static_cast<size_t>(r) * n;
      for (size_t c = 0; c < n; ++c) w[c] = src[c] * col_scale[c];
      if (weighted) {
        quantize_row_weighted(m.type, w.data(), q.data(), static_cast<int64_t>(n), imp.data());
      } else {
        quantize_row(m.type, w.data(), q.data(), static_cast<int64_t>(n));
      }
      dequantize_row(m.type, q.data(), back.data(), static_cast<int64_t>(n));
      for (size_t c = 0; c < n; ++c) {
        const double d = static_cast<double>(src[c]) - static_cast<double>(back[c]) / col_scale[c];
        err += static_cast<double>(g.importance[c]) * d * d;
      }
    }
  }
  return err;
}

std::vector<float> column_scales(const Spec& g, const std::vector<float>& s) {
  if (g.map.empty()) return s;
  std::vector<float> out(g.map.size());
  for (size_t c = 0; c < g.map.size(); ++c) out[c] = s[static_cast<size_t>(g.map[c])];
  return out;
}

}  // namespace

bool awq_supports(const std::string& architecture) {
  return architecture == "llama" || architecture == "qwen2" || architecture == "qwen3";
}

Result<AwqPlan> plan_awq(const gguf::GgufFile& model, const Imatrix& imatrix, const AwqOptions& o,
                         const std::map<std::string, DType>& type_of, ThreadPool& pool) {
  const Result<std::string> arch = model.get_string("general.architecture");
  if (!arch) return make_error("--awq: {} has no general.architecture", model.name());
  if (!awq_supports(*arch)) {
    return make_error("--awq: the fold points of architecture '{}' are not known (supported: llama, "
                      "qwen2, qwen3); quantize without --awq", *arch);
  }
  if (o.alpha && !(*o.alpha >= 0.0f && *o.alpha <= 1.0f))
    return make_error("--awq-alpha {}: must be in [0, 1]", *o.alpha);
  int64_t n_layers = 0, n_head = 0;
  if (const gguf::Value* v = model.find(*arch + ".block_count")) n_layers = v->as_int().value_or(0);
  if (const gguf::Value* v = model.find(*arch + ".attention.head_count")) n_head = v->as_int().value_or(0);

  AwqPlan plan;
  std::vector<Spec> specs;
  auto skip = [&](const std::string& group, const std::string& why) {
    plan.skipped.push_back(fmt::format("{}: {}", group, why));
  };
  // Adds a group of members sharing their input; false (and the reason) when it cannot be.
  auto add = [&](Spec g, const std::vector<std::string>& member_names) {
    for (const std::string& name : member_names) {
      const gguf::TensorInfo* t = find2d(model, name);
      if (!t) return skip(g.name, fmt::format("no 2-D tensor '{}'", name));
      const auto type = type_of.find(name);
      if (type == type_of.end()) return skip(g.name, fmt::format("no type for '{}'", name));
      Member m;
      m.t = t;
      m.type = type->second;
      if (!g.members.empty() && t->shape[0] != g.members.front().t->shape[0])
        return skip(g.name, "the matrices' rows differ in length");
      if (imatrix.importance(name, 0, m.imp) && static_cast<int64_t>(m.imp.size()) != t->shape[0])
        return skip(g.name, fmt::format("the imatrix entry of '{}' has another length", name));
      if (g.importance.empty() && !m.imp.empty()) g.importance = m.imp;
      g.members.push_back(std::move(m));
    }
    if (g.importance.empty()) return skip(g.name, "not in the imatrix");
    if (!o.alpha &&
        std::none_of(g.members.begin(), g.members.end(), [](const Member& m) { return is_block_quantized(m.type); }))
      return skip(g.name, "no matrix of it is quantized (nothing to search for)");
    for (const Fold& f : g.folds) {
      if (!f.t) return skip(g.name, "a tensor to fold into is missing");
    }
    const int64_t cols = g.members.front().t->shape[0];
    if (g.map.empty()) {
      g.n_scales = cols;
    } else if (static_cast<int64_t>(g.map.size()) != cols) {
      return skip(g.name, "the column map does not fit");
    }
    for (const Fold& f : g.folds) {
      const bool fits = f.rows ? f.t->shape.size() == 2 && f.t->shape[1] == g.n_scales
                               : f.t->shape.size() == 1 && f.t->shape[0] == g.n_scales;
      if (!fits) return skip(g.name, fmt::format("'{}' does not have one value per scale", f.t->name));
    }
    specs.push_back(std::move(g));
  };

  for (int64_t il = 0; il < n_layers; ++il) {
    const std::string p = fmt::format("blk.{}.", il);
    if (model.find_tensor(p + "attn_q.weight")) {
      Spec g;
      g.name = p + "attn_in";
      g.folds.push_back({model.find_tensor(p + "attn_norm.weight"), false});
      if (const gguf::TensorInfo* b = model.find_tensor(p + "attn_norm.bias")) g.folds.push_back({b, false});
      add(std::move(g), {p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"});
    } else {
      skip(p + "attn_in", "no separate attn_q/k/v");
    }
    if (model.find_tensor(p + "ffn_gate_inp.weight")) {
      skip(p + "ffn_in", "a mixture-of-experts layer (the router reads ffn_norm too)");
      skip(p + "ffn_down", "a mixture-of-experts layer");
    } else {
      Spec in;
      in.name = p + "ffn_in";
      in.folds.push_back({model.find_tensor(p + "ffn_norm.weight"), false});
      if (const gguf::TensorInfo* b = model.find_tensor(p + "ffn_norm.bias")) in.folds.push_back({b, false});
      add(std::move(in), {p + "ffn_gate.weight", p + "ffn_up.weight"});
      Spec down;
      down.name = p + "ffn_down";
      if (!find2d(model, p + "ffn_gate.weight")) {
        skip(down.name, "no gate: the input is not linear in ffn_up");
      } else {
        down.folds.push_back({find2d(model, p + "ffn_up.weight"), true});
        if (const gguf::TensorInfo* b = model.find_tensor(p + "ffn_up.bias")) down.folds.push_back({b, false});
        add(std::move(down), {p + "ffn_down.weight"});
      }
    }
    // attn_output's column (head h, element d) reads attn_v's row (KV head of h, d).
    Spec out;
    out.name = p + "attn_out";
    const gguf::TensorInfo* o_t = find2d(model, p + "attn_output.weight");
    const gguf::TensorInfo* v_t = find2d(model, p + "attn_v.weight");
    if (!o_t || !v_t || n_head <= 0 || o_t->shape[0] % n_head != 0) {
      skip(out.name, "no attn_output/attn_v, or a head count that does not divide attn_output");
      continue;
    }
    const int64_t hd = o_t->shape[0] / n_head;
    const int64_t n_kv = v_t->shape[1] % hd == 0 ? v_t->shape[1] / hd : 0;
    if (n_kv <= 0 || n_head % n_kv != 0) {
      skip(out.name, "attn_v's rows do not make whole KV heads");
      continue;
    }
    out.map.resize(static_cast<size_t>(o_t->shape[0]));
    for (int64_t c = 0; c < o_t->shape[0]; ++c)
      out.map[static_cast<size_t>(c)] = (c / hd) / (n_head / n_kv) * hd + c % hd;
    out.n_scales = n_kv * hd;
    out.folds.push_back({v_t, true});
    if (const gguf::TensorInfo* b = model.find_tensor(p + "attn_v.bias")) out.folds.push_back({b, false});
    add(std::move(out), {p + "attn_output.weight"});
  }

  for (Spec& g : specs) {
    // The statistic per scale: the mean importance of the columns that share it.
    std::vector<float> stat(static_cast<size_t>(g.n_scales), 0.0f);
    std::vector<int> seen(static_cast<size_t>(g.n_scales), 0);
    for (size_t c = 0; c < g.importance.size(); ++c) {
      const size_t i = g.map.empty() ? c : static_cast<size_t>(g.map[c]);
      stat[i] += g.importance[c];
      ++seen[i];
    }
    for (size_t i = 0; i < stat.size(); ++i) stat[i] = seen[i] ? stat[i] / static_cast<float>(seen[i]) : 0.0f;

    AwqGroup report{g.name};
    if (o.alpha) {
      report.alpha = *o.alpha;
    } else {
      const int64_t cols = g.members.front().t->shape[0];
      for (Member& m : g.members) {
        const int64_t rows = m.t->shape[1];
        const int64_t step = std::max<int64_t>(1, rows / std::max<int64_t>(1, o.search_rows));
        m.sampled = (rows + step - 1) / step;
        m.sample.resize(static_cast<size_t>(m.sampled * cols));
        const size_t in_row = static_cast<size_t>(*row_bytes(m.t->type, cols));
        for (int64_t k = 0; k < m.sampled; ++k) {
          dequantize_row(m.t->type, m.t->data + in_row * static_cast<size_t>(k * step),
                         m.sample.data() + static_cast<size_t>(k * cols), cols);
        }
      }
      const int steps = std::max(1, o.grid_steps);
      std::vector<double> err(static_cast<size_t>(steps + 1));
      struct Scratch {
        std::vector<float> w, imp, back;
        std::vector<uint8_t> q;
      };
      std::vector<Scratch> scratch(static_cast<size_t>(pool.size()));
      pool.parallel_for(steps + 1, [&](int64_t a, int thread) {
        Scratch& s = scratch[static_cast<size_t>(thread)];
        const float alpha = static_cast<float>(a) / static_cast<float>(steps);
        err[static_cast<size_t>(a)] = group_error(g, column_scales(g, scales_for(stat, alpha)), s.w, s.imp, s.q, s.back);
      });
      size_t best = 0;
      for (size_t a = 1; a < err.size(); ++a) {
        if (err[a] < err[best]) best = a;
      }
      report.alpha = static_cast<float>(best) / static_cast<float>(steps);
      report.error_plain = err[0];
      report.error = err[best];
      for (Member& m : g.members) std::vector<float>().swap(m.sample);
    }
    plan.groups.push_back(report);
    if (report.alpha == 0) continue;
    const std::vector<float> s = scales_for(stat, report.alpha);
    const std::vector<float> cs = column_scales(g, s);
    for (const Member& m : g.members) plan.tensors[m.t->name].cols = cs;
    std::vector<float> inv(s.size());
    for (size_t i = 0; i < s.size(); ++i) inv[i] = 1.0f / s[i];
    for (const Fold& f : g.folds) {
      TensorScale& ts = plan.tensors[f.t->name];
      (f.rows ? ts.rows : ts.cols) = inv;
    }
  }
  return plan;
}

void scale_row(const TensorScale& scale, int64_t r, float* row, int64_t n) {
  const float rf = scale.rows.empty() ? 1.0f : scale.rows[static_cast<size_t>(r) % scale.rows.size()];
  if (scale.cols.empty()) {
    if (rf != 1.0f) {
      for (int64_t c = 0; c < n; ++c) row[c] *= rf;
    }
    return;
  }
  for (int64_t c = 0; c < n; ++c) row[c] = row[c] * scale.cols[static_cast<size_t>(c)] * rf;
}

void scale_importance(const TensorScale& scale, std::vector<float>& importance) {
  if (scale.cols.empty()) return;
  for (size_t c = 0; c < importance.size(); ++c) importance[c] /= scale.cols[c] * scale.cols[c];
}

}  // namespace cadenza::quantize
