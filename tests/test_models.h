// The tiny random-weight model that engine, server and CLI tests synthesize (no ../shared needed):
// the "demo" preset scaled down to 2 layers of width 64 over a 300-token byte-level vocabulary.
#pragma once

#include <cstdint>

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

}  // namespace cadenza::test
