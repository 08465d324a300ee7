// `cadenza bench` on a hybrid MoE model (qwen35moe: recurrent state per sequence): the batched
// decode test (-b) and the MoE step it measures after the runs decode more sequences than a KV
// cache's default number of state slots (8), so each must size its cache's slots. No timing
// assertions.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_process.h"
#include "synth/synth.h"
#include "test_models.h"

namespace cadenza {
namespace {

using test::run_cadenza;

TEST(BenchHybrid, BatchedDecodeAndTheMoeStepRunPastEightSequences) {
  synth::SynthOptions opts;
  opts.shape = *synth::find_preset("qwen35moe-small");
  opts.shape.n_vocab = 300;
  opts.weight_type = "f32";
  const std::string path = test::write_temp_model(opts, "bench-qwen35moe");
  const test::CliRun r = run_cadenza("bench -m " + test::shell_quote(path) +
                                     " -t 2 -r 1 --no-probe --no-peak -p 8 -n 2 -b 12 --json");
  std::remove(path.c_str());
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["architecture"], "qwen35moe");
  EXPECT_GT(j["pp"]["tokens_per_s"]["median"].get<double>(), 0);
  EXPECT_EQ(j["tg_batch"]["sequences"], 12);
  EXPECT_GT(j["tg_batch"]["tokens_per_s"]["median"].get<double>(), 0);
  EXPECT_TRUE(j.contains("experts")) << r.out;  // the MoE step of 16 sequences ran
}

}  // namespace
}  // namespace cadenza
