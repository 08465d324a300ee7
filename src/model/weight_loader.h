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

#include "dist/topology.h"
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

// The part of a tensor to load (a tensor-parallel or expert-parallel shard, shard.h): elements
// [begin, begin + count) along ggml dimension `dim` (0: columns, 1: rows, 2: matrices) of every
// row / matrix. dim < 0: the whole tensor.
//  - Rows of a single matrix and whole matrices are contiguous: the weight points into the file.
//  - Rows of every matrix (an expert slice) are copied.
//  - Columns are copied when the range starts and ends on the type's block boundary; otherwise
//    the rows are dequantized and the slice kept in f32 (exact, larger; logged once per model).
struct Slice {
  int dim = -1;
  int64_t begin = 0;
  int64_t count = 0;
};
inline Slice columns_of(dist::Range r) { return {0, r.begin, r.count}; }
inline Slice rows_of(dist::Range r) { return {1, r.begin, r.count}; }
inline Slice matrices_of(dist::Range r) { return {2, r.begin, r.count}; }

// One tensor to load into `dst`. `shape` in ggml order ([cols, rows, matrices]), the tensor's
// whole shape in the file; trailing 1s are ignored on both sides. `slice`: the part to keep.
// A second slice (`slice2`, another dim) combines with the first (an expert range and a slice
// of each expert's rows).
struct TensorSpec {
  std::unique_ptr<kernels::Weight>& dst;
  std::string name;
  std::vector<int64_t> shape;
  Load load = Load::Required;
  Slice slice = {};
  Slice slice2 = {};
  // Non-empty: keep only these entries of the outermost dimension, in this order, copied (an
  // expert placement that is not one contiguous range): matrices of a 3-d tensor (the experts'
  // weights), rows of a 2-d one (their biases, [E][f]). Applied before the slices.
  std::vector<int32_t> pick = {};
  // The backend that holds the weight; null: the loader's (the model's). Experts kept on the CPU
  // beside a GPU model (ModelConfig::expert_offload) name the CPU backend here.
  kernels::Backend* backend = nullptr;
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
                                                  std::vector<int64_t> shape, Slice slice,
                                                  Slice slice2,
                                                  const std::vector<int32_t>& pick_matrices,
                                                  kernels::Backend& backend);

  std::shared_ptr<const gguf::GgufFile> file_;
  kernels::Backend& backend_;
  std::set<std::string> used_;
  bool warned_f32_slice_ = false;
};

}  // namespace cadenza::model
