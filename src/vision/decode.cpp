#include "vision/decode.h"

#include <cstdio>
#include <cstring>
#include <memory>

#include "vision/decoders.h"

namespace cadenza::vision {

std::string_view image_format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kGif: return "GIF";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

ImageFormat sniff_image_format(std::span<const uint8_t> d) {
  auto starts = [&](const char* magic, size_t n, size_t at = 0) {
    return d.size() >= at + n && std::memcmp(d.data() + at, magic, n) == 0;
  };
  if (starts("\xFF\xD8\xFF", 3)) return ImageFormat::kJpeg;
  if (starts("\x89PNG\r\n\x1A\n", 8)) return ImageFormat::kPng;
  if (starts("RIFF", 4) && starts("WEBP", 4, 8)) return ImageFormat::kWebp;
  if (starts("GIF87a", 6) || starts("GIF89a", 6)) return ImageFormat::kGif;
  return ImageFormat::kUnknown;
}

namespace detail {
Status check_dimensions(const char* format, uint64_t width, uint64_t height,
                        const DecodeLimits& limits) {
  if (width == 0 || height == 0) return make_error("{}: image has zero width or height", format);
  if (width > static_cast<uint64_t>(limits.max_dimension) ||
      height > static_cast<uint64_t>(limits.max_dimension)) {
    return make_error("{}: image is {}x{}, over the limit of {} pixels per side", format, width,
                      height, limits.max_dimension);
  }
  if (width * height > limits.max_pixels) {
    return make_error("{}: image is {}x{} = {} pixels, over the limit of {}", format, width, height,
                      width * height, limits.max_pixels);
  }
  return {};
}
}  // namespace detail

Result<Image> decode_image(std::span<const uint8_t> data, const DecodeLimits& limits) {
  switch (sniff_image_format(data)) {
    case ImageFormat::kJpeg: return detail::decode_jpeg(data, limits);
    case ImageFormat::kPng: return detail::decode_png(data, limits);
    case ImageFormat::kWebp: return detail::decode_webp(data, limits);
    case ImageFormat::kGif: return detail::decode_gif(data, limits);
    case ImageFormat::kUnknown: break;
  }
  if (data.empty()) return Error("image: empty data");
  return Error("image: unsupported format (expected JPEG, PNG, WebP or GIF by their magic bytes)");
}

Result<Image> decode_image_file(const char* path, const DecodeLimits& limits) {
  constexpr long kMaxFileBytes = 64L << 20;
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path, "rb"), &std::fclose);
  if (!f) return make_error("{}: cannot open: {}", path, std::strerror(errno));
  if (std::fseek(f.get(), 0, SEEK_END) != 0) return make_error("{}: cannot seek", path);
  long size = std::ftell(f.get());
  if (size < 0) return make_error("{}: cannot tell size", path);
  if (size > kMaxFileBytes) return make_error("{}: {} bytes, over the 64 MiB image limit", path, size);
  std::rewind(f.get());
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (size > 0 && std::fread(bytes.data(), 1, bytes.size(), f.get()) != bytes.size()) {
    return make_error("{}: short read", path);
  }
  auto img = decode_image(bytes, limits);
  if (!img) return make_error("{}: {}", path, img.error());
  return img;
}

}  // namespace cadenza::vision
