// qwen2moe (routed experts without renormalisation plus a sigmoid-gated shared expert): the
// model's logits against a plain, independent forward pass written out here in scalar C++ over
// the file's F32 weights, llama2.c style; plus load errors of the shared-expert tensors.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/session.h"
#include "synthetic_model.h"

namespace cadenza {
namespace {

using test::SyntheticSpec;

SyntheticSpec qwen2moe_spec() {
  SyntheticSpec s;
  s.arch = "qwen2moe";
  s.embd = 32;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.ff = 48;
  s.vocab = 64;
  s.experts = 6;
  s.experts_used = 2;
  s.ff_expert = 16;
  s.ff_shared = 40;
  s.qkv_bias = true;
  s.type = DType::F32;  // exact weights, so the reference below reads the same numbers
  return s;
}

// The weights of the file as plain float arrays, in ggml order (row-major [rows][cols]).
struct Tensors {
  const gguf::GgufFile& file;
  std::vector<float> get(const std::string& name) const {
    const gguf::TensorInfo* t = file.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    if (t == nullptr) return {};
    EXPECT_EQ(t->type, DType::F32) << name;
    std::vector<float> v(static_cast<size_t>(t->num_elements()));
    std::memcpy(v.data(), t->data, v.size() * sizeof(float));
    return v;
  }
};

// y[r] = sum_c w[r][c] * x[c], w: [rows][cols].
std::vector<float> matvec(const std::vector<float>& w, const std::vector<float>& x, size_t rows) {
  const size_t cols = x.size();
  std::vector<float> y(rows, 0.0f);
  for (size_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (size_t c = 0; c < cols; ++c) acc += static_cast<double>(w[r * cols + c]) * x[c];
    y[r] = static_cast<float>(acc);
  }
  return y;
}

std::vector<float> rms_norm(const std::vector<float>& x, const std::vector<float>& weight) {
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + 1e-5);
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(x[i] * inv) * weight[i];
  return out;
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// silu(x Wgate) * (x Wup) Wdown for one token.
std::vector<float> swiglu_ffn(const std::vector<float>& wg, const std::vector<float>& wu,
                              const std::vector<float>& wd, const std::vector<float>& x, size_t f) {
  std::vector<float> g = matvec(wg, x, f), u = matvec(wu, x, f);
  for (size_t i = 0; i < f; ++i) g[i] = static_cast<float>(silu(g[i]) * u[i]);
  return matvec(wd, g, x.size());
}

// NeoX RoPE (halves) on one head of `dim` values at position `pos`, base 10000.
void rope_neox(float* head, int64_t dim, int64_t pos) {
  const int64_t half = dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double theta = static_cast<double>(pos) * std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
    const double c = std::cos(theta), s = std::sin(theta);
    const double a = head[i], b = head[i + half];
    head[i] = static_cast<float>(a * c - b * s);
    head[i + half] = static_cast<float>(a * s + b * c);
  }
}

// Logits of every position of `tokens`, [n][vocab], computed from scratch.
std::vector<float> reference_logits(const gguf::GgufFile& file, const SyntheticSpec& s,
                                    const std::vector<int32_t>& tokens) {
  const Tensors w{file};
  const size_t d = static_cast<size_t>(s.embd), n = tokens.size();
  const int64_t hd = s.embd / s.heads;
  const size_t q_cols = static_cast<size_t>(s.heads * hd), kv_cols = static_cast<size_t>(s.kv_heads * hd);
  const std::vector<float> embd = w.get("token_embd.weight");
  std::vector<std::vector<float>> x(n);
  for (size_t t = 0; t < n; ++t) {
    x[t].assign(embd.begin() + static_cast<std::ptrdiff_t>(tokens[t] * d),
                embd.begin() + static_cast<std::ptrdiff_t>((tokens[t] + 1) * d));
  }
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const auto wq = w.get(p + "attn_q.weight"), wk = w.get(p + "attn_k.weight"),
               wv = w.get(p + "attn_v.weight"), wo = w.get(p + "attn_output.weight");
    const auto bq = w.get(p + "attn_q.bias"), bk = w.get(p + "attn_k.bias"), bv = w.get(p + "attn_v.bias");
    std::vector<std::vector<float>> q(n), k(n), v(n);
    for (size_t t = 0; t < n; ++t) {
      const std::vector<float> h = rms_norm(x[t], w.get(p + "attn_norm.weight"));
      q[t] = matvec(wq, h, q_cols);
      k[t] = matvec(wk, h, kv_cols);
      v[t] = matvec(wv, h, kv_cols);
      for (size_t i = 0; i < q_cols; ++i) q[t][i] += bq[i];
      for (size_t i = 0; i < kv_cols; ++i) k[t][i] += bk[i], v[t][i] += bv[i];
      for (int64_t hh = 0; hh < s.heads; ++hh) rope_neox(q[t].data() + hh * hd, hd, static_cast<int64_t>(t));
      for (int64_t hh = 0; hh < s.kv_heads; ++hh) rope_neox(k[t].data() + hh * hd, hd, static_cast<int64_t>(t));
    }
    for (size_t t = 0; t < n; ++t) {
      std::vector<float> attn(q_cols, 0.0f);
      for (int64_t hh = 0; hh < s.heads; ++hh) {
        const int64_t kvh = hh / (s.heads / s.kv_heads);
        std::vector<double> score(t + 1);
        for (size_t pos = 0; pos <= t; ++pos) {
          double dot = 0;
          for (int64_t i = 0; i < hd; ++i) dot += static_cast<double>(q[t][hh * hd + i]) * k[pos][kvh * hd + i];
          score[pos] = dot / std::sqrt(static_cast<double>(hd));
        }
        const double mx = *std::max_element(score.begin(), score.end());
        double sum = 0;
        for (double& sc : score) sum += (sc = std::exp(sc - mx));
        for (int64_t i = 0; i < hd; ++i) {
          double acc = 0;
          for (size_t pos = 0; pos <= t; ++pos) acc += score[pos] / sum * v[pos][kvh * hd + i];
          attn[hh * hd + i] = static_cast<float>(acc);
        }
      }
      const std::vector<float> o = matvec(wo, attn, d);
      for (size_t i = 0; i < d; ++i) x[t][i] += o[i];
    }
    // Feed-forward: routed experts (softmax, top-k, weights NOT renormalised) + shared expert.
    const auto router = w.get(p + "ffn_gate_inp.weight");
    const auto gate_exps = w.get(p + "ffn_gate_exps.weight"), up_exps = w.get(p + "ffn_up_exps.weight"),
               down_exps = w.get(p + "ffn_down_exps.weight");
    const size_t f = static_cast<size_t>(s.ff_expert), fs = static_cast<size_t>(s.ff_shared);
    for (size_t t = 0; t < n; ++t) {
      const std::vector<float> h = rms_norm(x[t], w.get(p + "ffn_norm.weight"));
      std::vector<float> logits = matvec(router, h, static_cast<size_t>(s.experts));
      const float mx = *std::max_element(logits.begin(), logits.end());
      double sum = 0;
      std::vector<double> prob(logits.size());
      for (size_t e = 0; e < logits.size(); ++e) sum += (prob[e] = std::exp(logits[e] - mx));
      for (double& pr : prob) pr /= sum;
      std::vector<size_t> order(prob.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return prob[a] > prob[b]; });
      std::vector<float> out(d, 0.0f);
      for (int64_t slot = 0; slot < s.experts_used; ++slot) {
        const size_t e = order[static_cast<size_t>(slot)];
        auto slice = [&](const std::vector<float>& all, size_t per) {
          return std::vector<float>(all.begin() + static_cast<std::ptrdiff_t>(e * per),
                                    all.begin() + static_cast<std::ptrdiff_t>((e + 1) * per));
        };
        const std::vector<float> y = swiglu_ffn(slice(gate_exps, f * d), slice(up_exps, f * d),
                                                slice(down_exps, f * d), h, f);
        for (size_t i = 0; i < d; ++i) out[i] += static_cast<float>(prob[e] * y[i]);
      }
      const std::vector<float> shared =
          swiglu_ffn(w.get(p + "ffn_gate_shexp.weight"), w.get(p + "ffn_up_shexp.weight"),
                     w.get(p + "ffn_down_shexp.weight"), h, fs);
      const float gate = matvec(w.get(p + "ffn_gate_inp_shexp.weight"), h, 1)[0];
      const double g = 1.0 / (1.0 + std::exp(-static_cast<double>(gate)));
      for (size_t i = 0; i < d; ++i) x[t][i] += out[i] + static_cast<float>(g * shared[i]);
    }
  }
  const auto lm_head = w.get("output.weight");
  std::vector<float> all;
  for (size_t t = 0; t < n; ++t) {
    const std::vector<float> logits =
        matvec(lm_head, rms_norm(x[t], w.get("output_norm.weight")), static_cast<size_t>(s.vocab));
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

std::vector<float> model_logits(model::Model& m, const std::vector<int32_t>& tokens, int32_t chunk) {
  model::SessionOptions options;
  options.max_tokens = static_cast<int32_t>(tokens.size());
  options.max_batch_tokens = chunk;
  options.kv_type = DType::F32;  // the reference keeps K/V exact
  Result<std::unique_ptr<model::Session>> session = model::Session::create(m, options);
  EXPECT_TRUE(session) << session.error();
  if (!session) return {};
  Result<std::vector<float>> logits = (*session)->eval_all(tokens);
  EXPECT_TRUE(logits) << logits.error();
  return logits ? *logits : std::vector<float>();
}

TEST(Qwen2Moe, LogitsMatchAPlainReferenceForwardPass) {
  const SyntheticSpec spec = qwen2moe_spec();
  std::shared_ptr<const gguf::GgufFile> file = test::make_synthetic(spec);
  ASSERT_TRUE(file);
  std::unique_ptr<kernels::Backend> be = kernels::make_cpu_backend({.n_threads = 2});
  Result<std::unique_ptr<model::Model>> m = model::Model::load(file, *be);
  ASSERT_TRUE(m) << m.error();
  const model::ModelConfig& c = (*m)->config();
  EXPECT_EQ(c.architecture, "qwen2moe");
  EXPECT_EQ(c.n_ff_shared_expert, spec.ff_shared);
  EXPECT_FALSE(c.moe_normalize_top_k);
  EXPECT_TRUE(c.qkv_bias);

  std::vector<int32_t> tokens(19);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 29 + 5) % 64);
  const std::vector<float> expected = reference_logits(*file, spec, tokens);
  const std::vector<float> got = model_logits(**m, tokens, 512);
  ASSERT_EQ(got.size(), expected.size());
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(got[i]) - expected[i]));
    max_abs = std::max(max_abs, std::abs(static_cast<double>(expected[i])));
  }
  EXPECT_GT(max_abs, 0.1);  // the comparison is not between near-zero numbers
  EXPECT_LT(max_diff, 2e-3) << "largest |logit| " << max_abs;
  // Batch invariance: token by token gives the same bits.
  EXPECT_EQ(got, model_logits(**m, tokens, 1));
}

TEST(Qwen2Moe, TheSharedExpertChangesTheOutput) {
  // One layer: the shared-expert tensors are the last ones drawn, so both files hold the same
  // values for every other tensor and differ only in the shared expert.
  SyntheticSpec spec = qwen2moe_spec();
  spec.layers = 1;
  SyntheticSpec routed_only = spec;
  routed_only.ff_shared = 0;  // no key and no tensors: the model runs without a shared expert
  std::unique_ptr<kernels::Backend> be = kernels::make_cpu_backend({.n_threads = 1});
  auto with_shared = model::Model::load(test::make_synthetic(spec), *be);
  auto without = model::Model::load(test::make_synthetic(routed_only), *be);
  ASSERT_TRUE(with_shared) << with_shared.error();
  ASSERT_TRUE(without) << without.error();
  EXPECT_EQ((*without)->config().n_ff_shared_expert, 0);
  const std::vector<int32_t> tokens = {1, 7, 3, 9, 2};
  EXPECT_NE(model_logits(**with_shared, tokens, 512), model_logits(**without, tokens, 512));
}

TEST(Qwen2Moe, MissingOrMisshapenSharedExpertTensorsAreLoadErrors) {
  std::unique_ptr<kernels::Backend> be = kernels::make_cpu_backend({.n_threads = 1});
  SyntheticSpec missing = qwen2moe_spec();
  missing.omit.insert("blk.1.ffn_down_shexp.weight");
  auto a = model::Model::load(test::make_synthetic(missing), *be);
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().find("blk.1.ffn_down_shexp.weight"), std::string::npos) << a.error();
  SyntheticSpec misshapen = qwen2moe_spec();
  misshapen.reshape["blk.0.ffn_gate_inp_shexp.weight"] = {misshapen.embd, 2};
  auto b = model::Model::load(test::make_synthetic(misshapen), *be);
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().find("ffn_gate_inp_shexp"), std::string::npos) << b.error();
  SyntheticSpec no_experts = qwen2moe_spec();
  no_experts.experts = 0;
  no_experts.ff_shared = 0;
  auto e = model::Model::load(test::make_synthetic(no_experts), *be);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().find("expert_count"), std::string::npos) << e.error();
}

}  // namespace
}  // namespace cadenza
