// Image preprocessing for vision encoders: resizing, square padding, centre cropping and the
// per-channel normalization CLIP-style encoders expect.
//
// Pixel-centre convention (half-pixel): output pixel x samples the source at
// (x + 0.5) * src_w / dst_w - 0.5, edges clamped, as torchvision / PIL do for upscaling. There is
// no antialiasing filter when shrinking (PIL widens its kernel then), so a large downscale differs
// from PIL's; encoders whose input is already the model's size pass through exactly.
// All functions are pure and thread-safe; they allocate only their result.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "vision/image.h"

namespace cadenza::vision {

enum class ResizeFilter { kBilinear, kBicubic };

// `src` resized to width x height (both > 0). Bicubic uses the Keys kernel with a = -0.5 (PIL's)
// and rounds and clamps to 0..255. Same size returns a copy.
Image resize(const Image& src, int width, int height, ResizeFilter filter);

// `src` centred on a square canvas of side max(width, height) filled with `fill` (LLaVA-1.5's
// "pad" aspect mode fills with the mean colour).
Image pad_to_square(const Image& src, std::array<uint8_t, 3> fill);

// The centred width x height window of `src`; a side larger than the source is padded with
// `fill` on both sides (the extra pixel of an odd difference goes right / bottom).
Image center_crop(const Image& src, int width, int height, std::array<uint8_t, 3> fill = {0, 0, 0});

// An image as the encoder's float input: channel-major (C, H, W) with C = 3,
// value = (byte / 255 - mean[c]) / std[c].
struct NormalizedImage {
  int width = 0;
  int height = 0;
  std::vector<float> chw;  // 3 * height * width
  float at(int c, int y, int x) const {
    return chw[(static_cast<size_t>(c) * height + y) * width + x];
  }
};

NormalizedImage normalize(const Image& src, const std::array<float, 3>& mean,
                          const std::array<float, 3>& std);

}  // namespace cadenza::vision
