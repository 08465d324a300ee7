// WebP via libwebp: WebPGetFeatures reads the size from the header, WebPDecodeRGBInto decodes
// into our own buffer. Animated WebP is refused (its first frame needs the demuxer; not wired).
#include <webp/decode.h>

#include "vision/decoders.h"

namespace cadenza::vision::detail {

Result<Image> decode_webp(std::span<const uint8_t> data, const DecodeLimits& limits) {
  WebPBitstreamFeatures features;
  VP8StatusCode st = WebPGetFeatures(data.data(), data.size(), &features);
  if (st != VP8_STATUS_OK) return make_error("WebP: corrupt or truncated header (status {})", static_cast<int>(st));
  if (features.has_animation) return Error("WebP: animated WebP is not supported");
  if (Status s = check_dimensions("WebP", static_cast<uint64_t>(features.width),
                                  static_cast<uint64_t>(features.height), limits); !s) {
    return s.error_value();
  }
  Image out;
  out.width = features.width;
  out.height = features.height;
  out.rgb.resize(static_cast<size_t>(out.width) * out.height * 3);
  if (!WebPDecodeRGBInto(data.data(), data.size(), out.rgb.data(), out.rgb.size(), out.width * 3)) {
    return Error("WebP: corrupt or truncated data");
  }
  return out;
}

}  // namespace cadenza::vision::detail
