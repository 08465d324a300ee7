// The fixture of the `cadenza bench` tests (bench_verify_test.cpp, bench_depth_test.cpp): ../shared's
// tiny model (a test skips without it) and the command line of a bench run on it.
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cli_process.h"
#include "shared_data.h"

namespace cadenza::test {

class TinyModelBenchTest : public testing::Test {
 protected:
  void SetUp() override {
    const std::filesystem::path dir = shared_dir();
    model_ = dir.empty() ? std::filesystem::path() : dir / "models" / "tiny-llama-spm-f16.gguf";
    if (model_.empty() || !std::filesystem::exists(model_)) {
      GTEST_SKIP() << "SKIPPED: ../shared test data not found (tiny-llama-spm-f16.gguf)";
    }
  }
  // `bench -m MODEL -t 2 OPTIONS` (arguments of run_cadenza).
  std::string bench_on_model(const std::string& options) const {
    return "bench -m " + shell_quote(model_.string()) + " -t 2 " + options;
  }
  std::filesystem::path model_;
};

}  // namespace cadenza::test
