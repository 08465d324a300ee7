// Shared by the engine tests: a fixture over a random-weight model written by the synthesizer (no
// ../shared needed), EngineTest over the tiny dense one, and helpers that run an engine to
// completion.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine_core.h"
#include "kernels/cpu/cpu_backend.h"
#include "synth/synth.h"
#include "test_models.h"

namespace cadenza::engine::test_util {

// What one request produced over a whole run.
struct Generation {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<std::string> deltas;  // text of each output, in order
  FinishReason reason = FinishReason::kNone;
  RequestMetrics metrics;
};

// A loaded model with its tokenizer.
struct Loaded {
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

inline std::unique_ptr<Loaded> load(const std::string& path) {
  auto l = std::make_unique<Loaded>();
  l->backend = kernels::make_cpu_backend({.n_threads = 2});
  auto m = model::Model::open(path, *l->backend);
  EXPECT_TRUE(m.ok()) << m.error();
  if (!m) return nullptr;
  l->model = std::move(*m);
  auto t = Tokenizer::from_gguf(l->model->file());
  EXPECT_TRUE(t.ok()) << t.error();
  if (!t) return nullptr;
  l->tokenizer = std::move(*t);
  return l;
}

// Files written by SynthModelTest in this process (one name each).
inline int synth_model_files = 0;

// A fixture over one model the synthesizer writes: `Options()` gives its SynthOptions. The file is
// written and loaded once per test suite (SetUpTestSuite) and removed after it; engine() makes an
// engine over it. Each instantiation has its own model; suites deriving from one share it.
template <synth::SynthOptions (*Options)()>
class SynthModelTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = (std::filesystem::temp_directory_path() /
             ("engine-test-" + std::to_string(::getpid()) + "-" +
              std::to_string(++synth_model_files) + ".gguf"))
                .string();
    auto written = synth::write_synthetic_model(Options(), path_);
    ASSERT_TRUE(written.ok()) << written.error();
    loaded_ = load(path_).release();
  }
  static void TearDownTestSuite() {
    delete loaded_;
    loaded_ = nullptr;
    std::filesystem::remove(path_);
  }
  void SetUp() override { ASSERT_NE(loaded_, nullptr); }

  static std::unique_ptr<EngineCore> engine(EngineConfig config) {
    auto e = EngineCore::create(*loaded_->model, *loaded_->tokenizer, config);
    EXPECT_TRUE(e.ok()) << e.error();
    return e ? std::move(*e) : nullptr;
  }

  static inline std::string path_;
  static inline Loaded* loaded_ = nullptr;
};

inline synth::SynthOptions tiny_engine_model() { return test::tiny_model_options(3); }

// The engine tests' default model: the tiny dense one of test_models.h.
using EngineTest = SynthModelTest<tiny_engine_model>;

inline std::vector<int32_t> random_prompt(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % 256);  // byte tokens
  return t;
}

inline SamplingParams greedy(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// Steps until idle, collecting every request's outputs.
inline std::map<RequestId, Generation> run(EngineCore& e) {
  std::map<RequestId, Generation> g;
  int steps = 0;
  while (e.has_work()) {
    for (RequestOutput& out : e.step()) {
      Generation& r = g[out.id];
      r.tokens.insert(r.tokens.end(), out.new_token_ids.begin(), out.new_token_ids.end());
      r.text += out.text;
      r.deltas.push_back(out.text);
      EXPECT_FALSE(r.reason != FinishReason::kNone) << "output after the final one";
      if (out.finished) {
        r.reason = out.finish_reason;
        r.metrics = out.metrics;
      }
    }
    if (++steps > 100000) {
      ADD_FAILURE() << "engine does not finish";
      break;
    }
  }
  return g;
}

inline Generation run_alone(EngineCore& e, const std::vector<int32_t>& prompt, const SamplingParams& p) {
  auto id = e.add_request(prompt, p);
  EXPECT_TRUE(id.ok()) << id.error();
  auto g = run(e);
  return g[*id];
}

// Outputs keyed by (request id, sample index).
using Key = std::pair<RequestId, int32_t>;

inline std::map<Key, Generation> run_all(EngineCore& e, std::map<Key, std::vector<TokenLogprob>>* lp = nullptr) {
  std::map<Key, Generation> g;
  for (int steps = 0; e.has_work(); ++steps) {
    if (steps > 100000) {
      ADD_FAILURE() << "engine does not finish";
      break;
    }
    for (RequestOutput& out : e.step()) {
      Generation& r = g[{out.id, out.index}];
      EXPECT_EQ(r.reason, FinishReason::kNone) << "output after the final one";
      r.tokens.insert(r.tokens.end(), out.new_token_ids.begin(), out.new_token_ids.end());
      r.text += out.text;
      if (lp) {
        auto& v = (*lp)[{out.id, out.index}];
        v.insert(v.end(), out.logprobs.begin(), out.logprobs.end());
      }
      if (out.finished) {
        r.reason = out.finish_reason;
        r.metrics = out.metrics;
      }
    }
  }
  return g;
}

}  // namespace cadenza::engine::test_util
