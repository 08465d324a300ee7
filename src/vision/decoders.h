// The per-format decoders behind decode_image (decode.h); internal to src/vision.
// Each gets the whole file, checks the header's dimensions with check_dimensions before
// allocating, and returns an Error naming its format on any failure.
#pragma once

#include <cstdint>
#include <span>

#include "util/result.h"
#include "vision/image.h"

namespace cadenza::vision::detail {

// Ok when width x height is inside `limits` (and positive); the error names the format.
Status check_dimensions(const char* format, uint64_t width, uint64_t height,
                        const DecodeLimits& limits);

Result<Image> decode_jpeg(std::span<const uint8_t> data, const DecodeLimits& limits);
Result<Image> decode_png(std::span<const uint8_t> data, const DecodeLimits& limits);
Result<Image> decode_webp(std::span<const uint8_t> data, const DecodeLimits& limits);
Result<Image> decode_gif(std::span<const uint8_t> data, const DecodeLimits& limits);

}  // namespace cadenza::vision::detail
