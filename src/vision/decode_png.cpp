// PNG via libpng's simplified API (png_image): no setjmp here, errors come back in
// image.message. The header (png_image_begin_read_from_memory) gives the size before any pixel
// buffer exists; the format conversion to RGB8 (palette, grey, 16-bit, alpha) is libpng's.
#include <png.h>

#include "vision/decoders.h"

namespace cadenza::vision::detail {

Result<Image> decode_png(std::span<const uint8_t> data, const DecodeLimits& limits) {
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, data.data(), data.size())) {
    Error e = make_error("PNG: corrupt header: {}", png.message);
    png_image_free(&png);
    return e;
  }
  if (Status s = check_dimensions("PNG", png.width, png.height, limits); !s) {
    png_image_free(&png);
    return s.error_value();
  }
  // Alpha, if any, is composited onto the buffer as it is: zero-filled, so onto black.
  png.format = PNG_FORMAT_RGB;
  Image out;
  out.width = static_cast<int>(png.width);
  out.height = static_cast<int>(png.height);
  out.rgb.resize(PNG_IMAGE_SIZE(png));
  // finish_read frees the png_image's internal state on success and failure alike.
  if (!png_image_finish_read(&png, nullptr, out.rgb.data(), 0, nullptr)) {
    return make_error("PNG: corrupt or truncated data: {}", png.message);
  }
  return out;
}

}  // namespace cadenza::vision::detail
