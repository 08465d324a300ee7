// Helpers of the backend op tests (kernels_test.cpp, kernels_latent_test.cpp): random data,
// host values in backend buffers, weights encoded in a given type.
#pragma once

#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "tensor/quant.h"

namespace cadenza::kernels {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Host data in a backend buffer, read back on demand.
class HostBuffer {
 public:
  HostBuffer(Backend& backend, const std::vector<float>& values) : backend_(backend) {
    init(values.data(), values.size() * sizeof(float));
  }
  HostBuffer(Backend& backend, const std::vector<int32_t>& values) : backend_(backend) {
    init(values.data(), values.size() * sizeof(int32_t));
  }
  Matrix matrix(int64_t rows, int64_t cols) const { return Matrix::of(buffer_->data(), rows, cols); }
  IndexMatrix index(int64_t rows, int64_t cols) const {
    return IndexMatrix::of(buffer_->data(), rows, cols);
  }
  std::vector<int32_t> ints() const {
    std::vector<int32_t> v(buffer_->size_bytes() / sizeof(int32_t));
    backend_.read(*buffer_, 0, v.data(), v.size() * sizeof(int32_t));
    return v;
  }
  std::vector<float> floats() const {
    std::vector<float> v(buffer_->size_bytes() / sizeof(float));
    backend_.read(*buffer_, 0, v.data(), v.size() * sizeof(float));
    return v;
  }

 private:
  void init(const void* data, size_t bytes) {
    Result<std::unique_ptr<Buffer>> b = backend_.allocate(bytes);
    EXPECT_TRUE(b);
    buffer_ = std::move(*b);
    backend_.write(*buffer_, 0, data, bytes);
  }
  Backend& backend_;
  std::unique_ptr<Buffer> buffer_;
};

// Encodes `values` ([matrices][rows][cols]) as `type` and uploads them.
inline std::unique_ptr<Weight> upload(Backend& backend, DType type, const std::vector<float>& values,
                               int64_t cols, int64_t rows = 1, int64_t matrices = 1) {
  const size_t row = static_cast<size_t>(*row_bytes(type, cols));
  std::vector<uint8_t> bytes(row * static_cast<size_t>(rows * matrices));
  for (int64_t r = 0; r < rows * matrices; ++r) {
    quantize_row(type, values.data() + r * cols, bytes.data() + static_cast<size_t>(r) * row, cols);
  }
  WeightDesc desc;
  desc.name = "test";
  desc.type = type;
  desc.cols = cols;
  desc.rows = rows;
  desc.matrices = matrices;
  desc.data = bytes.data();  // no keep_alive: the backend copies
  Result<std::unique_ptr<Weight>> w = backend.upload_weight(desc);
  EXPECT_TRUE(w) << w.error();
  return std::move(*w);
}

// The values a weight of `type` really holds: encode then decode with the scalar reference.
inline std::vector<float> as_stored(DType type, const std::vector<float>& values, int64_t cols) {
  const size_t row = static_cast<size_t>(*row_bytes(type, cols));
  std::vector<uint8_t> bytes(row);
  std::vector<float> out(values.size());
  for (size_t r = 0; r < values.size() / static_cast<size_t>(cols); ++r) {
    quantize_row(type, values.data() + r * cols, bytes.data(), cols);
    dequantize_row(type, bytes.data(), out.data() + r * cols, cols);
  }
  return out;
}

}  // namespace cadenza::kernels
