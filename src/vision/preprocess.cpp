#include "vision/preprocess.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace cadenza::vision {
namespace {

// Keys cubic convolution kernel, a = -0.5.
float cubic_weight(float t) {
  constexpr float a = -0.5f;
  t = std::fabs(t);
  if (t <= 1.0f) return ((a + 2.0f) * t - (a + 3.0f)) * t * t + 1.0f;
  if (t < 2.0f) return ((a * t - 5.0f * a) * t + 8.0f * a) * t - 4.0f * a;
  return 0.0f;
}

// Per output coordinate: the source taps and their weights along one axis.
struct Taps {
  std::vector<int> index;     // n_out * k
  std::vector<float> weight;  // n_out * k
  int k = 0;
};

Taps make_taps(int n_in, int n_out, ResizeFilter filter) {
  Taps t;
  t.k = filter == ResizeFilter::kBilinear ? 2 : 4;
  t.index.resize(static_cast<size_t>(n_out) * t.k);
  t.weight.resize(static_cast<size_t>(n_out) * t.k);
  const float scale = static_cast<float>(n_in) / static_cast<float>(n_out);
  for (int o = 0; o < n_out; ++o) {
    float s = (static_cast<float>(o) + 0.5f) * scale - 0.5f;
    int base = static_cast<int>(std::floor(s));
    float frac = s - static_cast<float>(base);
    for (int j = 0; j < t.k; ++j) {
      int off = filter == ResizeFilter::kBilinear ? j : j - 1;
      float w = filter == ResizeFilter::kBilinear ? (j == 0 ? 1.0f - frac : frac)
                                                   : cubic_weight(frac - static_cast<float>(off));
      size_t at = static_cast<size_t>(o) * t.k + j;
      t.index[at] = std::clamp(base + off, 0, n_in - 1);
      t.weight[at] = w;
    }
  }
  return t;
}

Image filled(int width, int height, std::array<uint8_t, 3> fill) {
  Image out;
  out.width = width;
  out.height = height;
  out.rgb.resize(static_cast<size_t>(width) * height * 3);
  for (size_t i = 0; i < out.rgb.size(); i += 3) {
    out.rgb[i] = fill[0];
    out.rgb[i + 1] = fill[1];
    out.rgb[i + 2] = fill[2];
  }
  return out;
}

// Copies the overlap of `src` placed with its top-left corner at (dx, dy) of `dst`.
void blit(const Image& src, Image* dst, int dx, int dy) {
  for (int y = std::max(0, -dy); y < src.height && y + dy < dst->height; ++y) {
    int x0 = std::max(0, -dx);
    int x1 = std::min(src.width, dst->width - dx);
    if (x1 <= x0) continue;
    std::copy(src.pixel(x0, y), src.pixel(x0, y) + static_cast<size_t>(x1 - x0) * 3,
              dst->pixel(x0 + dx, y + dy));
  }
}

}  // namespace

Image resize(const Image& src, int width, int height, ResizeFilter filter) {
  assert(width > 0 && height > 0 && src.width > 0 && src.height > 0);
  if (width == src.width && height == src.height) return src;
  const Taps tx = make_taps(src.width, width, filter);
  const Taps ty = make_taps(src.height, height, filter);
  // Horizontal pass into floats (no rounding between passes), then vertical.
  std::vector<float> mid(static_cast<size_t>(src.height) * width * 3);
  for (int y = 0; y < src.height; ++y) {
    for (int x = 0; x < width; ++x) {
      float acc[3] = {0, 0, 0};
      for (int j = 0; j < tx.k; ++j) {
        size_t at = static_cast<size_t>(x) * tx.k + j;
        const uint8_t* p = src.pixel(tx.index[at], y);
        for (int c = 0; c < 3; ++c) acc[c] += tx.weight[at] * static_cast<float>(p[c]);
      }
      float* m = &mid[(static_cast<size_t>(y) * width + x) * 3];
      for (int c = 0; c < 3; ++c) m[c] = acc[c];
    }
  }
  Image out;
  out.width = width;
  out.height = height;
  out.rgb.resize(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      float acc[3] = {0, 0, 0};
      for (int j = 0; j < ty.k; ++j) {
        size_t at = static_cast<size_t>(y) * ty.k + j;
        const float* m = &mid[(static_cast<size_t>(ty.index[at]) * width + x) * 3];
        for (int c = 0; c < 3; ++c) acc[c] += ty.weight[at] * m[c];
      }
      uint8_t* p = out.pixel(x, y);
      for (int c = 0; c < 3; ++c) p[c] = static_cast<uint8_t>(std::clamp(std::lround(acc[c]), 0L, 255L));
    }
  }
  return out;
}

Image pad_to_square(const Image& src, std::array<uint8_t, 3> fill) {
  int side = std::max(src.width, src.height);
  Image out = filled(side, side, fill);
  blit(src, &out, (side - src.width) / 2, (side - src.height) / 2);
  return out;
}

Image center_crop(const Image& src, int width, int height, std::array<uint8_t, 3> fill) {
  assert(width > 0 && height > 0);
  Image out = filled(width, height, fill);
  // Negative offsets crop the source; positive ones pad it. floor division keeps the odd pixel
  // of a crop on the left/top of what is dropped, matching torchvision's int(round(d / 2)).
  auto offset = [](int dst, int src) {
    int d = dst - src;
    return d >= 0 ? d / 2 : -static_cast<int>(std::lround(-d / 2.0));
  };
  blit(src, &out, offset(width, src.width), offset(height, src.height));
  return out;
}

NormalizedImage normalize(const Image& src, const std::array<float, 3>& mean,
                          const std::array<float, 3>& std) {
  NormalizedImage out;
  out.width = src.width;
  out.height = src.height;
  const size_t plane = static_cast<size_t>(src.width) * src.height;
  out.chw.resize(plane * 3);
  for (int c = 0; c < 3; ++c) {
    const float scale = 1.0f / (255.0f * std[c]);
    const float shift = mean[c] / std[c];
    for (size_t i = 0; i < plane; ++i) {
      out.chw[c * plane + i] = static_cast<float>(src.rgb[i * 3 + c]) * scale - shift;
    }
  }
  return out;
}

}  // namespace cadenza::vision
