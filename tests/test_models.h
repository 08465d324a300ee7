// The tiny random-weight model that engine, server and CLI tests synthesize (no ../shared needed):
// the "demo" preset scaled down to 2 layers of width 64 over a 300-token byte-level vocabulary.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "synth/synth.h"

namespace cadenza::test {

inline synth::SynthOptions tiny_model_options(uint64_t seed) {
  synth::SynthOptions opts;
  opts.shape = *synth::find_preset("demo");
  opts.shape.n_vocab = 300;
  opts.shape.n_embd = 64;
  opts.shape.n_layer = 2;
  opts.shape.n_head = 4;
  opts.shape.n_head_kv = 2;
  opts.shape.head_dim = 16;
  opts.shape.n_ff = 128;
  opts.weight_type = "f32";
  opts.seed = seed;
  return opts;
}

// Writes `opts`' model to the temp folder as `<stem>-<pid>.gguf` (a gtest failure if it cannot)
// and returns its path. The caller removes the file.
inline std::string write_temp_model(const synth::SynthOptions& opts, const std::string& stem) {
  const std::string p = (std::filesystem::temp_directory_path() /
                         (stem + "-" + std::to_string(::getpid()) + ".gguf"))
                            .string();
  auto written = synth::write_synthetic_model(opts, p);
  EXPECT_TRUE(written.ok()) << written.error();
  return p;
}

}  // namespace cadenza::test
