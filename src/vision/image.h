// Decoded images and the limits every decoder enforces.
//
// An Image owns its pixels: interleaved 8-bit RGB, row-major, no padding (rgb.size() ==
// width * height * 3). Decoders convert every source layout (grey, palette, alpha, CMYK, 16-bit)
// to this one; alpha is dropped (the pixel's colour channels are kept as stored).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace cadenza::vision {

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3 bytes, R G B per pixel

  uint8_t* pixel(int x, int y) { return rgb.data() + (static_cast<size_t>(y) * width + x) * 3; }
  const uint8_t* pixel(int x, int y) const {
    return rgb.data() + (static_cast<size_t>(y) * width + x) * 3;
  }
};

enum class ImageFormat { kUnknown, kJpeg, kPng, kWebp, kGif };

std::string_view image_format_name(ImageFormat f);

// Checked against the image's header before any pixel buffer is allocated, so an image whose
// header claims huge dimensions (a decompression bomb, a 20000x20000 picture) costs nothing but
// the header parse. The defaults bound one decoded image to 150 MB of RGB.
struct DecodeLimits {
  uint64_t max_pixels = 50'000'000;  // width * height
  int max_dimension = 16384;         // width and height each
};

}  // namespace cadenza::vision
