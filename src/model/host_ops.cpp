#include "model/host_ops.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "gguf/gguf.h"
#include "tensor/quant.h"

namespace cadenza::model {

Result<std::vector<float>> host_tensor(const gguf::GgufFile& f, const std::string& name,
                                       int64_t cols, int64_t rows) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) return make_error("{}: tensor '{}' missing", f.name(), name);
  if (t->shape.empty() || t->shape[0] != cols || t->rows() != rows)
    return make_error("{}: tensor '{}' has {} elements per row and {} rows, expected {} and {}",
                      f.name(), name, t->shape.empty() ? 0 : t->shape[0], t->rows(), cols, rows);
  if (!traits(t->type).compute_supported)
    return make_error("{}: tensor '{}' has an unsupported type", f.name(), name);
  std::vector<float> out(static_cast<size_t>(cols * rows));
  const std::optional<uint64_t> rb = row_bytes(t->type, cols);
  if (!rb) return make_error("{}: tensor {} has a row size that does not fit its type", f.name(), name);
  const size_t row_size = static_cast<size_t>(*rb);
  for (int64_t r = 0; r < rows; ++r)
    dequantize_row(t->type, t->data + r * row_size, out.data() + r * cols, cols);
  return out;
}

void layer_norm(std::vector<float>& x, int64_t n, int64_t d, const std::vector<float>& w,
                const std::vector<float>& b, float eps) {
  for (int64_t r = 0; r < n; ++r) {
    float* row = x.data() + r * d;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += row[i];
    mean /= static_cast<double>(d);
    for (int64_t i = 0; i < d; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= static_cast<double>(d);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < d; ++i)
      row[i] = static_cast<float>((row[i] - mean) * inv) * w[static_cast<size_t>(i)] +
               b[static_cast<size_t>(i)];
  }
}

void bidirectional_attention(const float* q_h, const float* k_h, const float* v_h, float* a_h,
                             int64_t d, int64_t n_heads, const std::vector<int64_t>& starts,
                             const std::vector<int64_t>& lengths) {
  const int64_t H = n_heads, hd = d / n_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Work items: (sequence, head); each writes its own columns of its own rows.
  std::vector<std::pair<size_t, int64_t>> items;
  int64_t work = 0;
  for (size_t s = 0; s < starts.size(); ++s) {
    for (int64_t h = 0; h < H; ++h) items.emplace_back(s, h);
    work += lengths[s] * lengths[s] * d;
  }
  auto run = [&](size_t begin, size_t step) {
    std::vector<float> p;
    for (size_t it = begin; it < items.size(); it += step) {
      const auto [s, h] = items[it];
      const int64_t o = starts[s], L = lengths[s];
      p.resize(static_cast<size_t>(L));
      for (int64_t i = 0; i < L; ++i) {
        const float* q = q_h + (o + i) * d + h * hd;
        float mx = -INFINITY;
        for (int64_t j = 0; j < L; ++j) {
          const float* k = k_h + (o + j) * d + h * hd;
          // Eight partial sums (a fixed order, so the compiler may keep them in one vector
          // register; a single running sum would stay scalar).
          float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          int64_t c = 0;
          for (; c + 8 <= hd; c += 8)
            for (int l = 0; l < 8; ++l) part[l] += q[c + l] * k[c + l];
          float dot = ((part[0] + part[1]) + (part[2] + part[3])) +
                      ((part[4] + part[5]) + (part[6] + part[7]));
          for (; c < hd; ++c) dot += q[c] * k[c];
          p[static_cast<size_t>(j)] = dot * scale;
          mx = std::max(mx, p[static_cast<size_t>(j)]);
        }
        float sum = 0;
        for (int64_t j = 0; j < L; ++j) sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
        float* out = a_h + (o + i) * d + h * hd;
        std::fill(out, out + hd, 0.0f);
        for (int64_t j = 0; j < L; ++j) {
          const float w = p[static_cast<size_t>(j)] / sum;
          const float* v = v_h + (o + j) * d + h * hd;
          for (int64_t c = 0; c < hd; ++c) out[c] += w * v[c];
        }
      }
    }
  };
  // The backend's threads are idle meanwhile; spread large batches over the cores. Results do
  // not depend on the thread count (each item is computed whole by one thread).
  const size_t threads = work < (1 << 22)
                             ? 1
                             : std::min<size_t>(items.size(),
                                                std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(run, t, threads);
  run(0, threads);
  for (auto& t : pool) t.join();
}

void gelu_erf(std::vector<float>& x) {
  for (float& e : x) e = 0.5f * e * (1.0f + std::erf(e * static_cast<float>(M_SQRT1_2)));
}

void gelu_tanh(std::vector<float>& x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (float& e : x) e = 0.5f * e * (1.0f + std::tanh(kSqrt2OverPi * (e + 0.044715f * e * e * e)));
}

void gelu_quick(std::vector<float>& x) {
  for (float& e : x) e = e / (1.0f + std::exp(-1.702f * e));
}

}  // namespace cadenza::model
