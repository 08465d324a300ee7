// Synthesizing a golden file's model at test time: a recipe (a `cadenza synth` preset, "seed",
// weight "type", optional "layers" and "ctx" (the context length the file declares), and "vocab_from", the ../shared model whose tokenizer is
// copied) written once per test process into a folder removed at exit. Used by the golden tests
// whose models ../shared does not hold (family_golden_test.cpp, long_context_golden_test.cpp).
#pragma once

#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shared_data.h"
#include "synth/synth.h"
#include "temp_dir.h"

namespace cadenza::test {

// The path of the model `recipe` makes, synthesized on the first call for `name` (later calls
// with the same name return the same file). Empty on failure, with the test failed. Not
// thread-safe (tests run one at a time).
inline std::string synthesize_recipe(const std::string& name, const nlohmann::json& recipe) {
  static TempDir dir("golden-recipes");
  static std::map<std::string, std::string> written_paths;
  if (auto it = written_paths.find(name); it != written_paths.end()) return it->second;
  std::optional<synth::ModelShape> shape = synth::find_preset(recipe["preset"].get<std::string>());
  EXPECT_TRUE(shape) << recipe.dump();
  if (!shape) return {};
  if (recipe.contains("layers")) shape->n_layer = recipe["layers"].get<int64_t>();
  if (recipe.contains("ctx")) shape->n_ctx = recipe["ctx"].get<int64_t>();
  synth::SynthOptions options;
  options.shape = *shape;
  options.weight_type = recipe["type"].get<std::string>();
  options.seed = recipe["seed"].get<uint64_t>();
  options.vocab_from = (shared_dir() / recipe["vocab_from"].get<std::string>()).string();
  const std::string path = (dir.path() / (name + ".gguf")).string();
  Result<synth::SynthSummary> written = synth::write_synthetic_model(options, path);
  EXPECT_TRUE(written) << written.error();
  if (!written) return {};
  written_paths[name] = path;
  return path;
}

}  // namespace cadenza::test
