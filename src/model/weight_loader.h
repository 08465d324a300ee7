// WeightLoader: looks a model's tensors up by name, checks their shape and type, and uploads them
// to the backend. The blocks (blocks/*.h) and families (arch/*.cpp) say which tensors they need;
// the loader knows nothing about architectures. Internal to src/model.
//
//   Status st = loader.load({
//       {w.wq, layer_tensor(il, "attn_q.weight"), {d, q_cols}},
//       {w.bq, layer_tensor(il, "attn_q.bias"), {q_cols}, required_if(config.qkv_bias)},
//   });
//
// Errors name the file and the tensor ("x.gguf: tensor 'blk.3.attn_k.weight' has shape [4096,
// 512], expected [4096, 1024]"). Ownership: keeps the file alive (weights may point into its
// mapping); must not outlive the backend. Not thread-safe.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/backend.h"
#include "util/result.h"

namespace cadenza::gguf {
class GgufFile;
struct TensorInfo;
}  // namespace cadenza::gguf

namespace cadenza::model {

// Whether a tensor is loaded.
enum class Load {
  Required,   // missing: an error
  IfPresent,  // missing: the handle stays null
  Skip,       // not looked up (the handle stays null; a tensor of that name counts as unused)
};

inline Load required_if(bool needed) { return needed ? Load::Required : Load::Skip; }

// One tensor to load into `dst`. `shape` in ggml order ([cols, rows, matrices]); trailing 1s are
// ignored on both sides.
struct TensorSpec {
  std::unique_ptr<kernels::Weight>& dst;
  std::string name;
  std::vector<int64_t> shape;
  Load load = Load::Required;
};

// "blk.<layer>.<suffix>": the name of a per-layer tensor.
std::string layer_tensor(int64_t layer, std::string_view suffix);

class WeightLoader {
 public:
  WeightLoader(std::shared_ptr<const gguf::GgufFile> file, kernels::Backend& backend);

  // Loads every spec in order; stops at the first error.
  Status load(std::initializer_list<TensorSpec> specs);

  // Uploads values computed on the host (copied by the backend), e.g. tables derived from keys.
  Result<std::unique_ptr<kernels::Weight>> from_host(const std::string& name,
                                                     const std::vector<float>& values);

  // Names of tensors in the file that nothing loaded (reported as a warning).
  std::vector<std::string> unused() const;

  const gguf::GgufFile& file() const { return *file_; }

 private:
  Result<std::unique_ptr<kernels::Weight>> upload(const gguf::TensorInfo& t,
                                                  std::vector<int64_t> shape);

  std::shared_ptr<const gguf::GgufFile> file_;
  kernels::Backend& backend_;
  std::set<std::string> used_;
};

}  // namespace cadenza::model
