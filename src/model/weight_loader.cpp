#include "model/weight_loader.h"

#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gguf/gguf.h"

namespace cadenza::model {

namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::vector<int64_t> trimmed(std::vector<int64_t> shape) {
  while (shape.size() > 1 && shape.back() == 1) shape.pop_back();
  return shape;
}

}  // namespace

std::string layer_tensor(int64_t layer, std::string_view suffix) {
  return fmt::format("blk.{}.{}", layer, suffix);
}

WeightLoader::WeightLoader(std::shared_ptr<const gguf::GgufFile> file, kernels::Backend& backend)
    : file_(std::move(file)), backend_(backend) {}

Status WeightLoader::load(std::initializer_list<TensorSpec> specs) {
  for (const TensorSpec& spec : specs) {
    if (spec.load == Load::Skip) continue;
    const gguf::TensorInfo* t = file_->find_tensor(spec.name);
    if (!t) {
      if (spec.load == Load::IfPresent) continue;
      return make_error("{}: tensor '{}' is missing", file_->name(), spec.name);
    }
    Result<std::unique_ptr<kernels::Weight>> w = upload(*t, spec.shape);
    if (!w) return w.error_value();
    spec.dst = std::move(*w);
  }
  return {};
}

Result<std::unique_ptr<kernels::Weight>> WeightLoader::from_host(const std::string& name,
                                                                 const std::vector<float>& values) {
  kernels::WeightDesc desc;
  desc.name = name;
  desc.type = DType::F32;
  desc.cols = static_cast<int64_t>(values.size());
  desc.data = values.data();
  return backend_.upload_weight(desc);
}

std::vector<std::string> WeightLoader::unused() const {
  std::vector<std::string> names;
  for (const gguf::TensorInfo& t : file_->tensors()) {
    if (!used_.count(t.name)) names.push_back(t.name);
  }
  return names;
}

Result<std::unique_ptr<kernels::Weight>> WeightLoader::upload(const gguf::TensorInfo& t,
                                                              std::vector<int64_t> shape) {
  used_.insert(t.name);
  const std::vector<int64_t> expected = trimmed(std::move(shape));
  const std::vector<int64_t> actual = trimmed(t.shape);
  if (expected != actual) {
    return make_error("{}: tensor '{}' has shape {}, expected {}", file_->name(), t.name,
                      shape_string(t.shape), shape_string(expected));
  }
  const std::optional<DTypeTraits> traits = dtype_traits(static_cast<uint32_t>(t.type));
  if (!traits || !traits->compute_supported) {
    return make_error("{}: tensor '{}' has type {}, which is not supported", file_->name(), t.name,
                      traits ? traits->name : "unknown");
  }
  const std::optional<uint64_t> row = row_bytes(t.type, actual[0]);
  const int64_t rows = actual.size() > 1 ? actual[1] : 1;
  const int64_t matrices = actual.size() > 2 ? actual[2] : 1;
  if (!row || *row * static_cast<uint64_t>(rows) * static_cast<uint64_t>(matrices) != t.nbytes ||
      t.data == nullptr) {
    return make_error("{}: tensor '{}' of type {} has {} bytes of data, which does not match its "
                      "shape {}", file_->name(), t.name, traits->name, t.nbytes,
                      shape_string(t.shape));
  }
  kernels::WeightDesc desc;
  desc.name = t.name;
  desc.type = t.type;
  desc.cols = actual[0];
  desc.rows = rows;
  desc.matrices = matrices;
  desc.data = t.data;
  desc.keep_alive = file_;
  Result<std::unique_ptr<kernels::Weight>> w = backend_.upload_weight(desc);
  if (!w) return make_error("{}: {}", file_->name(), w.error());
  return w;
}

}  // namespace cadenza::model
