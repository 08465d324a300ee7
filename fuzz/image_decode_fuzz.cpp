// libFuzzer target for image decoding (src/vision): JPEG, PNG, WebP and GIF bytes through
// decode_image, then the preprocessing an encoder input takes.
//
// Input: the whole file. Limits: 4 M pixels and 4096 per side (so one input stays far below
// the 1 GiB RSS limit even under ASan). Invariants: a decoded image has positive dimensions
// inside the limits and exactly width * height * 3 bytes; resizing it (both filters), padding it
// to a square, centre-cropping and normalizing it give the promised sizes and finite values.
// A failure must be an error return naming the format (or "image:"). Crashes, leaks, hangs,
// sanitizer reports and out-of-memory are findings.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "vision/decode.h"
#include "vision/preprocess.h"

using namespace cadenza::vision;

namespace {
void check(bool ok) {
  if (!ok) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const DecodeLimits limits{.max_pixels = 4'000'000, .max_dimension = 4096};
  auto img = decode_image(std::span<const uint8_t>(data, size), limits);
  if (!img) {
    const std::string& e = img.error();
    check(e.rfind("JPEG:", 0) == 0 || e.rfind("PNG:", 0) == 0 || e.rfind("WebP:", 0) == 0 ||
          e.rfind("GIF:", 0) == 0 || e.rfind("image:", 0) == 0);
    return 0;
  }
  check(img->width > 0 && img->height > 0 && img->width <= 4096 && img->height <= 4096);
  check(static_cast<uint64_t>(img->width) * img->height <= limits.max_pixels);
  check(img->rgb.size() == static_cast<size_t>(img->width) * img->height * 3);
  for (auto f : {ResizeFilter::kBilinear, ResizeFilter::kBicubic}) {
    Image r = resize(*img, 7, 5, f);
    check(r.width == 7 && r.height == 5 && r.rgb.size() == 7 * 5 * 3);
  }
  if (static_cast<uint64_t>(img->width) * img->height <= 65536) {  // keep the square small
    Image sq = pad_to_square(*img, {1, 2, 3});
    check(sq.width == sq.height && sq.width == std::max(img->width, img->height));
  }
  Image c = center_crop(*img, 9, 4, {0, 0, 0});
  check(c.width == 9 && c.height == 4);
  NormalizedImage n = normalize(c, {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f});
  for (float v : n.chw) check(std::isfinite(v));
  return 0;
}
