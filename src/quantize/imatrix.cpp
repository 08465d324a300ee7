#include "quantize/imatrix.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "gguf/gguf.h"

namespace cadenza::quantize {
namespace {

constexpr std::string_view kSum2 = ".in_sum2";
constexpr std::string_view kCounts = ".counts";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::vector<uint8_t> f32_bytes(const std::vector<double>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  for (size_t i = 0; i < v.size(); ++i) {
    const float f = static_cast<float>(v[i]);
    std::memcpy(out.data() + i * sizeof(float), &f, sizeof f);
  }
  return out;
}

Result<std::vector<double>> f32_values(const std::string& path, const gguf::TensorInfo& t) {
  if (t.type != DType::F32) {
    return make_error("{}: tensor '{}' has type {}, an imatrix holds f32", path, t.name,
                      dtype_name(t.type));
  }
  std::vector<double> out(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < out.size(); ++i) {
    float f;
    std::memcpy(&f, t.data + i * sizeof(float), sizeof f);
    if (!std::isfinite(f) || f < 0) {
      return make_error("{}: tensor '{}' holds {} at element {}: not a sum of squares or a count",
                        path, t.name, f, i);
    }
    out[i] = f;
  }
  return out;
}

}  // namespace

ImatrixEntry& Imatrix::entry(const std::string& name, int64_t cols, int64_t matrices) {
  auto [it, inserted] = entries.try_emplace(name);
  ImatrixEntry& e = it->second;
  if (inserted) {
    e.cols = cols;
    e.matrices = matrices;
    e.sum2.assign(static_cast<size_t>(cols * matrices), 0.0);
    e.counts.assign(static_cast<size_t>(matrices), 0.0);
  }
  assert(e.cols == cols && e.matrices == matrices);
  return e;
}

bool Imatrix::importance(const std::string& name, int64_t m, std::vector<float>& out) const {
  const auto it = entries.find(name);
  if (it == entries.end() || m < 0 || m >= it->second.matrices) return false;
  const ImatrixEntry& e = it->second;
  const double count = e.counts[static_cast<size_t>(m)];
  if (!(count > 0)) return false;
  out.resize(static_cast<size_t>(e.cols));
  const double* s = e.sum2.data() + m * e.cols;
  for (int64_t c = 0; c < e.cols; ++c) out[static_cast<size_t>(c)] = static_cast<float>(s[c] / count);
  return true;
}

Status write_imatrix(const Imatrix& imatrix, const std::string& path) {
  gguf::GgufWriter w;
  w.set("general.type", gguf::Value::string("imatrix"));
  w.set("imatrix.datasets", gguf::Value::string_array(imatrix.datasets));
  w.set("imatrix.chunk_count", gguf::Value::u32(static_cast<uint32_t>(imatrix.chunk_count)));
  w.set("imatrix.chunk_size", gguf::Value::u32(static_cast<uint32_t>(imatrix.chunk_size)));
  for (const auto& [name, e] : imatrix.entries) {  // std::map: a stable, sorted order
    if (Status st = w.add_tensor(name + std::string(kSum2), DType::F32, {e.cols, e.matrices},
                                 f32_bytes(e.sum2));
        !st) {
      return st;
    }
    if (Status st = w.add_tensor(name + std::string(kCounts), DType::F32, {1, e.matrices},
                                 f32_bytes(e.counts));
        !st) {
      return st;
    }
  }
  return w.write(path);
}

Result<Imatrix> read_imatrix(const std::string& path) {
  auto opened = gguf::GgufFile::open(path);
  if (!opened) {
    return make_error("{} (an imatrix must be a GGUF file; the older headerless .dat format is "
                      "not read)", opened.error());
  }
  const gguf::GgufFile& f = **opened;
  auto type = f.get_string_or("general.type", "");
  if (!type || *type != "imatrix") {
    return make_error("{}: not an imatrix file (general.type is '{}', not 'imatrix')", path,
                      type ? *type : "?");
  }
  Imatrix out;
  if (f.find("imatrix.datasets")) {
    auto ds = f.get_string_array("imatrix.datasets");
    if (!ds) return ds.error_value();
    out.datasets = std::move(*ds);
  }
  auto chunks = f.get_uint_or("imatrix.chunk_count", 0);
  auto size = f.get_uint_or("imatrix.chunk_size", 0);
  if (!chunks) return chunks.error_value();
  if (!size) return size.error_value();
  out.chunk_count = static_cast<int64_t>(*chunks);
  out.chunk_size = static_cast<int64_t>(*size);
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (ends_with(t.name, kCounts)) {
      const std::string base = t.name.substr(0, t.name.size() - kCounts.size());
      if (!f.find_tensor(base + std::string(kSum2))) {
        return make_error("{}: '{}' has no '{}{}'", path, t.name, base, kSum2);
      }
      continue;
    }
    if (!ends_with(t.name, kSum2)) {
      return make_error("{}: tensor '{}' is neither NAME{} nor NAME{}", path, t.name, kSum2, kCounts);
    }
    const std::string base = t.name.substr(0, t.name.size() - kSum2.size());
    const gguf::TensorInfo* c = f.find_tensor(base + std::string(kCounts));
    if (!c) return make_error("{}: '{}' has no '{}{}'", path, t.name, base, kCounts);
    if (t.shape.empty() || t.shape.size() > 2 || t.shape[0] < 1) {
      return make_error("{}: tensor '{}' is not [cols, matrices]", path, t.name);
    }
    const int64_t cols = t.shape[0];
    const int64_t matrices = t.shape.size() > 1 ? t.shape[1] : 1;
    if (c->num_elements() != matrices || c->shape[0] != 1) {
      return make_error("{}: '{}' has {} values for {} matrices", path, c->name,
                        c->num_elements(), matrices);
    }
    auto sum2 = f32_values(path, t);
    if (!sum2) return sum2.error_value();
    auto counts = f32_values(path, *c);
    if (!counts) return counts.error_value();
    ImatrixEntry& e = out.entries[base];
    e.cols = cols;
    e.matrices = matrices;
    e.sum2 = std::move(*sum2);
    e.counts = std::move(*counts);
  }
  if (out.entries.empty()) return make_error("{}: the imatrix holds no tensors", path);
  return out;
}

}  // namespace cadenza::quantize
