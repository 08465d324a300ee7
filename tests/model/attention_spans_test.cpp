// Non-causal attention spans (Gemma 3's image tokens, which attend to each other both ways):
// the CPU kernel's AttentionBatch::last_positions against a naive softmax in double (with a
// sliding window, tokens interleaved with another sequence, more than one online-softmax chunk),
// and model::Batch::attention_spans through Session: the same logits whatever the pass size,
// different from causal ones, and the contract's errors.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "backend_test_util.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/session.h"
#include "synth/presets.h"
#include "synth/synth.h"
#include "temp_dir.h"

namespace cadenza::kernels {
namespace {

// Sequence 0: positions 0..69 with a span [20, 59] (crosses the online softmax's 32-position
// chunks); sequence 1: positions 0..9 with a span [3, 6]; tokens interleaved; window 0 and 12.
TEST(AttentionSpans, KernelMatchesNaiveSoftmax) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 3});
  const int32_t n_heads = 4, n_kv = 2, dk = 16, dv = 16, block_size = 8, num_blocks = 16;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const int32_t len0 = 70, len1 = 10;
  struct Span { int32_t seq, first, last; };
  const std::vector<Span> spans = {{0, 20, 59}, {1, 3, 6}};
  const int32_t blocks0 = (len0 + block_size - 1) / block_size;
  std::vector<int32_t> table_matrix(2 * blocks0, 0);
  for (int32_t i = 0; i < blocks0; ++i) table_matrix[i] = i;  // sequence 0: blocks 0..8
  table_matrix[blocks0] = 9;                                   // sequence 1: blocks 9, 10
  table_matrix[blocks0 + 1] = 10;
  std::vector<int32_t> seq, pos, last, slots;
  for (int32_t p = 0; p < len0; ++p) {
    seq.push_back(0);
    pos.push_back(p);
    if (p < len1) {
      seq.push_back(1);
      pos.push_back(p);
    }
  }
  const int64_t n = static_cast<int64_t>(seq.size());
  for (int64_t t = 0; t < n; ++t) {
    int32_t l = pos[t];
    for (const Span& s : spans)
      if (s.seq == seq[t] && pos[t] >= s.first && pos[t] <= s.last) l = s.last;
    last.push_back(l);
    slots.push_back(table_matrix[seq[t] * blocks0 + pos[t] / block_size] * block_size + pos[t] % block_size);
  }
  const std::vector<float> q = random_floats(static_cast<size_t>(n * n_heads * dk), 21);
  const std::vector<float> k = random_floats(static_cast<size_t>(n * n_kv * dk), 22);
  const std::vector<float> v = random_floats(static_cast<size_t>(n * n_kv * dv), 23);
  HostBuffer keys(*backend, std::vector<float>(static_cast<size_t>(num_blocks * block_size * n_kv * dk)));
  HostBuffer values(*backend, std::vector<float>(static_cast<size_t>(num_blocks * block_size * n_kv * dv)));
  KvLayer kv{keys.matrix(1, 1).data, values.matrix(1, 1).data, DType::F32, num_blocks, block_size,
             n_kv, dk, dv};
  HostBuffer qb(*backend, q), kb(*backend, k), vb(*backend, v);
  HostBuffer slot_b(*backend, slots), seq_b(*backend, seq), pos_b(*backend, pos),
      last_b(*backend, last), table_b(*backend, table_matrix);
  backend->kv_write(kv, kb.matrix(n, n_kv * dk), vb.matrix(n, n_kv * dv), slot_b.index(n, 1));
  AttentionBatch batch{pos_b.index(n, 1), seq_b.index(n, 1), table_b.index(2, blocks0), last_b.index(n, 1)};
  ASSERT_TRUE(backend->supports_attention_spans());
  for (int32_t window : {0, 12}) {
    SCOPED_TRACE(::testing::Message() << "window " << window);
    HostBuffer out(*backend, std::vector<float>(static_cast<size_t>(n * n_heads * dv)));
    backend->attention(qb.matrix(n, n_heads * dk), kv, batch, n_heads, {.scale = scale, .window = window},
                       out.matrix(n, n_heads * dv));
    const std::vector<float> got = out.floats();
    for (int64_t t = 0; t < n; ++t) {
      // Keys of the same sequence from the window's start (counted from the token's own
      // position) to its last position.
      const int32_t lo = window > 0 ? std::max(0, pos[t] - window + 1) : 0;
      std::vector<int64_t> src;
      for (int64_t u = 0; u < n; ++u)
        if (seq[u] == seq[t] && pos[u] >= lo && pos[u] <= last[t]) src.push_back(u);
      for (int32_t h = 0; h < n_heads; ++h) {
        const int32_t g = h / (n_heads / n_kv);
        std::vector<double> w;
        double mx = -1e300;
        for (int64_t u : src) {
          double s = 0;
          for (int32_t i = 0; i < dk; ++i) s += double(q[(t * n_heads + h) * dk + i]) * k[(u * n_kv + g) * dk + i];
          w.push_back(s * scale);
          mx = std::max(mx, s * scale);
        }
        double total = 0;
        for (double& x : w) total += (x = std::exp(x - mx));
        for (int32_t i = 0; i < dv; ++i) {
          double ref = 0;
          for (size_t j = 0; j < src.size(); ++j) ref += w[j] / total * v[(src[j] * n_kv + g) * dv + i];
          ASSERT_NEAR(got[(t * n_heads + h) * dv + i], ref, 1e-5) << "token " << t << " head " << h;
        }
      }
    }
  }
}

}  // namespace
}  // namespace cadenza::kernels

namespace cadenza::model {
namespace {

// A small gemma3 (sliding window 8, shorter than the span) with a span of 12 input embeddings.
class SessionSpans : public ::testing::Test {
 protected:
  void SetUp() override {
    synth::SynthOptions o;
    o.shape = *synth::find_preset("gemma3-tiny");
    o.weight_type = "f32";
    o.seed = 3;
    path_ = dir_.file("lm.gguf");
    ASSERT_TRUE(synth::write_synthetic_model(o, path_).ok());
    backend_ = kernels::make_cpu_backend({.n_threads = 2});
    auto m = Model::open(path_, *backend_);
    ASSERT_TRUE(m.ok()) << m.error();
    model_ = std::move(*m);
    tokens_.resize(24);
    std::iota(tokens_.begin(), tokens_.end(), 60);
    values_ = kernels::random_floats(static_cast<size_t>(12 * model_->config().n_embd), 5);
  }
  Result<std::vector<float>> eval(int32_t pass, bool bidirectional) {
    auto s = Session::create(*model_, {.max_tokens = 64, .max_batch_tokens = pass});
    if (!s) return s.error_value();
    return (*s)->eval(tokens_, InputEmbeddings{5, 12, values_, bidirectional});
  }
  cadenza::test::TempDir dir_;
  std::string path_;
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<Model> model_;
  std::vector<int32_t> tokens_;
  std::vector<float> values_;
};

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - b[i]));
  return m;
}

TEST_F(SessionSpans, PassSizeDoesNotMatterAndCausalDiffers) {
  // Passes of 24 (one), 13 (cut before the span at 5, then 5..17) and 12 (the span exactly).
  auto whole = eval(24, true);
  ASSERT_TRUE(whole.ok()) << whole.error();
  for (int32_t pass : {13, 12}) {
    auto split = eval(pass, true);
    ASSERT_TRUE(split.ok()) << split.error();
    EXPECT_LT(max_diff(*whole, *split), 1e-4) << "pass " << pass;
  }
  auto causal = eval(24, false);
  ASSERT_TRUE(causal.ok());
  EXPECT_GT(max_diff(*whole, *causal), 1e-2) << "the span changed nothing";
  // A causal run may be split anywhere; a bidirectional one that does not fit a pass is refused.
  auto causal_split = eval(5, false);
  ASSERT_TRUE(causal_split.ok());
  EXPECT_LT(max_diff(*causal, *causal_split), 1e-4);
  auto too_small = eval(8, true);
  ASSERT_FALSE(too_small.ok());
  EXPECT_NE(too_small.error().find("does not fit one forward pass of 8 tokens"), std::string::npos) << too_small.error();
}

TEST_F(SessionSpans, ABatchEndingInsideASpanIsRefused) {
  ASSERT_TRUE(model_->reserve({.max_tokens = 32, .max_logit_rows = 1, .max_sequences = 1, .max_blocks_per_sequence = 4}).ok());
  auto kv = model_->create_kv_cache({.num_blocks = 4, .block_size = 16});
  ASSERT_TRUE(kv.ok()) << kv.error();
  std::vector<int32_t> pos(10), seq(10, 0), table = {0, 1}, rows = {9};
  std::iota(pos.begin(), pos.end(), 0);
  const std::span<const int32_t> t(table);
  const std::vector<AttentionSpan> spans = {{0, 5, 12}};
  Batch b;
  b.tokens = std::span<const int32_t>(tokens_).first(10);
  b.positions = pos;
  b.seq_index = seq;
  b.block_tables = std::span<const std::span<const int32_t>>(&t, 1);
  b.logit_rows = rows;
  b.attention_spans = spans;
  std::vector<float> logits(static_cast<size_t>(model_->config().n_vocab));
  Status st = model_->forward(b, **kv, logits);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("must not end inside a span"), std::string::npos) << st.error();
}

}  // namespace
}  // namespace cadenza::model
