#include "model/pooling.h"

#include <cassert>
#include <cmath>
#include <string>

#include "gguf/gguf.h"

namespace cadenza::model {

namespace {
constexpr std::string_view kNames[] = {"none", "mean", "cls", "last", "rank"};
}

std::string_view pooling_name(Pooling p) { return kNames[static_cast<int>(p)]; }

std::optional<Pooling> parse_pooling(std::string_view name) {
  for (int i = 0; i < 5; ++i)
    if (kNames[i] == name) return static_cast<Pooling>(i);
  return std::nullopt;
}

Result<std::optional<Pooling>> pooling_of(const gguf::GgufFile& file) {
  auto arch = file.get_string("general.architecture");
  if (!arch) return arch.error_value();
  const std::string key = *arch + ".pooling_type";
  if (file.find(key) == nullptr) return std::optional<Pooling>{};
  auto v = file.get_uint(key);
  if (!v) return v.error_value();
  if (*v > 4) return make_error("{}: unknown pooling type {} (0 none .. 4 rank)", key, *v);
  return std::optional<Pooling>{static_cast<Pooling>(*v)};
}

std::vector<float> pool(std::span<const float> hidden, int64_t n, int64_t d, Pooling pooling) {
  assert(n >= 1 && d >= 1 && hidden.size() == static_cast<size_t>(n * d));
  std::vector<float> out(static_cast<size_t>(d));
  switch (pooling) {
    case Pooling::kMean: {
      std::vector<double> sum(static_cast<size_t>(d), 0.0);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < d; ++i) sum[static_cast<size_t>(i)] += hidden[static_cast<size_t>(t * d + i)];
      for (int64_t i = 0; i < d; ++i)
        out[static_cast<size_t>(i)] = static_cast<float>(sum[static_cast<size_t>(i)] / static_cast<double>(n));
      break;
    }
    case Pooling::kCls:
    case Pooling::kLast: {
      const int64_t row = pooling == Pooling::kCls ? 0 : n - 1;
      for (int64_t i = 0; i < d; ++i) out[static_cast<size_t>(i)] = hidden[static_cast<size_t>(row * d + i)];
      break;
    }
    default:
      assert(false && "pool: no vector for this pooling type");
  }
  return out;
}

void l2_normalize(std::span<float> v) {
  double ss = 0;
  for (float x : v) ss += static_cast<double>(x) * x;
  if (ss <= 0) return;
  const double inv = 1.0 / std::sqrt(ss);
  for (float& x : v) x = static_cast<float>(x * inv);
}

double cosine_similarity(std::span<const float> a, std::span<const float> b) {
  assert(a.size() == b.size());
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  if (na <= 0 || nb <= 0) return 0;
  return dot / std::sqrt(na * nb);
}

}  // namespace cadenza::model
