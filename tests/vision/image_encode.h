// Test-only image encoders (the same Debian libraries the decoders use), so vision tests make
// their own images instead of committing binaries. Every function aborts the test binary on an
// encoder failure (a bug in the test, not an input error).
#pragma once

#include <cstdint>
#include <vector>

#include "vision/image.h"

namespace cadenza::vision::testing {

// A deterministic test picture: smooth gradients plus a few hard edges (so JPEG has to work).
Image make_test_image(int width, int height, uint32_t seed = 1);
// At most `colours` distinct colours (for GIF, whose palette holds 256).
Image make_palette_image(int width, int height, int colours);

enum class PngLayout { kRgb, kGrey, kRgba };
std::vector<uint8_t> encode_png(const Image& img, PngLayout layout = PngLayout::kRgb);
std::vector<uint8_t> encode_jpeg(const Image& img, int quality, bool progressive = false,
                                 bool grey = false);
std::vector<uint8_t> encode_webp(const Image& img, bool lossless);
// `img` must have at most 256 distinct colours.
std::vector<uint8_t> encode_gif(const Image& img, bool interlaced = false);

}  // namespace cadenza::vision::testing
