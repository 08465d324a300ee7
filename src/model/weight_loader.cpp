#include "model/weight_loader.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "gguf/gguf.h"
#include "tensor/quant.h"
#include "util/mapped_file.h"

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

// Narrows `desc` to `s`: by pointer arithmetic where the slice is contiguous, else by copying
// into `storage` (which then owns desc.data; desc.keep_alive is cleared so the backend copies).
Status cut(kernels::WeightDesc& desc, const Slice& s, std::vector<uint8_t>& storage) {
  const int64_t extent = s.dim == 0 ? desc.cols : s.dim == 1 ? desc.rows : desc.matrices;
  if (s.dim > 2 || s.begin < 0 || s.count < 1 || s.begin + s.count > extent) {
    return make_error("slice [{}, {}) of dimension {} is outside its {} elements", s.begin,
                      s.begin + s.count, s.dim, extent);
  }
  const size_t row = static_cast<size_t>(*row_bytes(desc.type, desc.cols));
  const auto* src = static_cast<const uint8_t*>(desc.data);
  auto own = [&](std::vector<uint8_t> bytes) {
    storage = std::move(bytes);
    desc.data = storage.data();
    desc.keep_alive.reset();
  };
  if (s.dim == 2 || (s.dim == 1 && desc.matrices == 1)) {  // contiguous
    const size_t unit = s.dim == 2 ? row * static_cast<size_t>(desc.rows) : row;
    desc.data = src + unit * static_cast<size_t>(s.begin);
    (s.dim == 2 ? desc.matrices : desc.rows) = s.count;
    if (!desc.keep_alive) own({static_cast<const uint8_t*>(desc.data),
                               static_cast<const uint8_t*>(desc.data) + unit * s.count});
    return {};
  }
  if (s.dim == 1) {  // rows [begin, begin + count) of every matrix
    std::vector<uint8_t> out;
    out.reserve(row * static_cast<size_t>(s.count * desc.matrices));
    for (int64_t m = 0; m < desc.matrices; ++m) {
      const uint8_t* first = src + row * static_cast<size_t>(m * desc.rows + s.begin);
      out.insert(out.end(), first, first + row * static_cast<size_t>(s.count));
    }
    desc.rows = s.count;
    own(std::move(out));
    return {};
  }
  // Columns of every row.
  const int64_t block = traits(desc.type).block_size;
  const int64_t n_rows = desc.rows * desc.matrices;
  std::vector<uint8_t> out;
  if (s.begin % block == 0 && s.count % block == 0) {
    const size_t skip = static_cast<size_t>(*row_bytes(desc.type, s.begin));
    const size_t keep = static_cast<size_t>(*row_bytes(desc.type, s.count));
    out.reserve(keep * static_cast<size_t>(n_rows));
    for (int64_t r = 0; r < n_rows; ++r) {
      const uint8_t* first = src + row * static_cast<size_t>(r) + skip;
      out.insert(out.end(), first, first + keep);
    }
  } else {  // the slice cuts through quantization blocks: keep it dequantized
    std::vector<float> decoded(static_cast<size_t>(desc.cols));
    out.resize(static_cast<size_t>(s.count * n_rows) * sizeof(float));
    auto* dst = reinterpret_cast<float*>(out.data());
    for (int64_t r = 0; r < n_rows; ++r) {
      dequantize_row(desc.type, src + row * static_cast<size_t>(r), decoded.data(), desc.cols);
      std::copy_n(decoded.data() + s.begin, s.count, dst + r * s.count);
    }
    desc.type = DType::F32;
  }
  desc.cols = s.count;
  own(std::move(out));
  return {};
}

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
    Result<std::unique_ptr<kernels::Weight>> w =
        upload(*t, spec.shape, spec.slice, spec.slice2, spec.pick,
               spec.backend != nullptr ? *spec.backend : backend_);
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
                                                              std::vector<int64_t> shape,
                                                              Slice slice, Slice slice2,
                                                              const std::vector<int32_t>& pick,
                                                              kernels::Backend& backend) {
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
  std::vector<uint8_t> copied;  // a slice that is not contiguous in the file
  if (!pick.empty()) {
    const bool by_rows = actual.size() < 3;  // the outermost dimension: rows of a 2-d tensor
    const int64_t extent = by_rows ? desc.rows : desc.matrices;
    const size_t unit = static_cast<size_t>(*row_bytes(desc.type, desc.cols)) *
                        static_cast<size_t>(by_rows ? 1 : desc.rows);
    std::vector<uint8_t> out;
    out.reserve(unit * pick.size());
    for (const int32_t m : pick) {
      if (m < 0 || m >= extent) {
        return make_error("{}: tensor '{}': {} {} is outside its {}", file_->name(), t.name,
                          by_rows ? "row" : "matrix", m, extent);
      }
      const uint8_t* first = static_cast<const uint8_t*>(desc.data) + unit * static_cast<size_t>(m);
      out.insert(out.end(), first, first + unit);
    }
    copied = std::move(out);
    desc.data = copied.data();
    (by_rows ? desc.rows : desc.matrices) = static_cast<int64_t>(pick.size());
    desc.keep_alive.reset();
  }
  for (const Slice& s : {slice, slice2}) {
    if (s.dim < 0) continue;
    if (Status st = cut(desc, s, copied); !st) {
      return make_error("{}: tensor '{}': {}", file_->name(), t.name, st.error());
    }
  }
  // Copied out of the mapping: the file's pages of this tensor (which hold the other ranks'
  // columns too) need not stay resident in this process.
  // (Only for a mapping: on the caller's own memory, MADV_DONTNEED would discard its contents.)
  if (!desc.keep_alive && file_->mapped()) MappedFile::release_pages(t.data, t.nbytes);
  if (desc.type != t.type && !warned_f32_slice_) {
    warned_f32_slice_ = true;
    spdlog::warn("{}: tensor '{}': its tensor-parallel slice cuts through {} blocks of {} "
                 "values, so the slice is kept in f32 (exact, but larger and slower); other "
                 "tensors like it are not logged", file_->name(), t.name,
                 traits->name, traits->block_size);
  }
  desc.file_mapped = desc.keep_alive != nullptr && file_->mapped();
  Result<std::unique_ptr<kernels::Weight>> w = backend.upload_weight(desc);
  if (!w) return make_error("{}: {}", file_->name(), w.error());
  return w;
}

}  // namespace cadenza::model
