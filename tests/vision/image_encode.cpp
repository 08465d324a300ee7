#include "image_encode.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include <gif_lib.h>
#include <jpeglib.h>
#include <png.h>
#include <webp/encode.h>

namespace cadenza::vision::testing {
namespace {
[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "image_encode: %s\n", what);
  std::abort();
}
}  // namespace

Image make_test_image(int width, int height, uint32_t seed) {
  Image img;
  img.width = width;
  img.height = height;
  img.rgb.resize(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = img.pixel(x, y);
      p[0] = static_cast<uint8_t>((x * 255) / std::max(1, width - 1));
      p[1] = static_cast<uint8_t>((y * 255) / std::max(1, height - 1));
      p[2] = static_cast<uint8_t>(((x / 8 + y / 8 + seed) % 2) ? 200 : 40);
    }
  }
  return img;
}

Image make_palette_image(int width, int height, int colours) {
  Image img;
  img.width = width;
  img.height = height;
  img.rgb.resize(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      int k = (x * 7 + y * 13) % colours;
      uint8_t* p = img.pixel(x, y);
      p[0] = static_cast<uint8_t>(k * 37);
      p[1] = static_cast<uint8_t>(255 - k * 11);
      p[2] = static_cast<uint8_t>(k * 5);
    }
  }
  return img;
}

std::vector<uint8_t> encode_png(const Image& img, PngLayout layout) {
  std::vector<uint8_t> pixels;
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(img.width);
  png.height = static_cast<png_uint_32>(img.height);
  size_t n = static_cast<size_t>(img.width) * img.height;
  if (layout == PngLayout::kRgb) {
    png.format = PNG_FORMAT_RGB;
    pixels = img.rgb;
  } else if (layout == PngLayout::kGrey) {
    png.format = PNG_FORMAT_GRAY;
    pixels.resize(n);
    for (size_t i = 0; i < n; ++i) pixels[i] = img.rgb[i * 3 + 1];
  } else {
    png.format = PNG_FORMAT_RGBA;
    pixels.resize(n * 4);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(&pixels[i * 4], &img.rgb[i * 3], 3);
      pixels[i * 4 + 3] = 255;  // opaque, so the decoded colours equal the source
    }
  }
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&png, nullptr, &size, 0, pixels.data(), 0, nullptr)) die(png.message);
  std::vector<uint8_t> out(size);
  if (!png_image_write_to_memory(&png, out.data(), &size, 0, pixels.data(), 0, nullptr)) die(png.message);
  out.resize(size);
  return out;
}

std::vector<uint8_t> encode_jpeg(const Image& img, int quality, bool progressive, bool grey) {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr jerr{};
  cinfo.err = jpeg_std_error(&jerr);  // the default error_exit exits: fine for a test helper
  jpeg_create_compress(&cinfo);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buf, &size);
  cinfo.image_width = static_cast<JDIMENSION>(img.width);
  cinfo.image_height = static_cast<JDIMENSION>(img.height);
  cinfo.input_components = grey ? 1 : 3;
  cinfo.in_color_space = grey ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  if (progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  std::vector<uint8_t> row(static_cast<size_t>(img.width) * 3);
  while (cinfo.next_scanline < cinfo.image_height) {
    int y = static_cast<int>(cinfo.next_scanline);
    if (grey) {
      for (int x = 0; x < img.width; ++x) row[static_cast<size_t>(x)] = img.pixel(x, y)[1];
    } else {
      std::memcpy(row.data(), img.pixel(0, y), row.size());
    }
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&cinfo, &r, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::vector<uint8_t> out(buf, buf + size);
  jpeg_destroy_compress(&cinfo);
  std::free(buf);
  return out;
}

std::vector<uint8_t> encode_webp(const Image& img, bool lossless) {
  uint8_t* buf = nullptr;
  size_t size = lossless ? WebPEncodeLosslessRGB(img.rgb.data(), img.width, img.height, img.width * 3, &buf)
                         : WebPEncodeRGB(img.rgb.data(), img.width, img.height, img.width * 3, 90.0f, &buf);
  if (size == 0) die("WebP encode failed");
  std::vector<uint8_t> out(buf, buf + size);
  WebPFree(buf);
  return out;
}

namespace {
int write_vector(GifFileType* gif, const GifByteType* data, int n) {
  auto* out = static_cast<std::vector<uint8_t>*>(gif->UserData);
  out->insert(out->end(), data, data + n);
  return n;
}
}  // namespace

std::vector<uint8_t> encode_gif(const Image& img, bool interlaced) {
  std::map<uint32_t, int> index;
  std::vector<GifColorType> colours;
  std::vector<GifPixelType> pixels(static_cast<size_t>(img.width) * img.height);
  for (size_t i = 0; i < pixels.size(); ++i) {
    const uint8_t* p = &img.rgb[i * 3];
    uint32_t key = (uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2];
    auto [it, fresh] = index.emplace(key, static_cast<int>(colours.size()));
    if (fresh) colours.push_back(GifColorType{p[0], p[1], p[2]});
    pixels[i] = static_cast<GifPixelType>(it->second);
  }
  if (colours.size() > 256) die("GIF: more than 256 colours");
  int map_size = 2;
  while (map_size < static_cast<int>(colours.size())) map_size *= 2;
  colours.resize(static_cast<size_t>(map_size), GifColorType{0, 0, 0});
  ColorMapObject* cmap = GifMakeMapObject(map_size, colours.data());
  std::vector<uint8_t> out;
  int err = 0;
  GifFileType* gif = EGifOpen(&out, write_vector, &err);
  if (gif == nullptr) die("EGifOpen");
  if (EGifPutScreenDesc(gif, img.width, img.height, 8, 0, cmap) == GIF_ERROR) die("screen desc");
  if (EGifPutImageDesc(gif, 0, 0, img.width, img.height, interlaced, nullptr) == GIF_ERROR) die("image desc");
  auto put_row = [&](int y) {
    if (EGifPutLine(gif, &pixels[static_cast<size_t>(y) * img.width], img.width) == GIF_ERROR) die("line");
  };
  if (interlaced) {
    const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
    for (int pass = 0; pass < 4; ++pass)
      for (int y = start[pass]; y < img.height; y += step[pass]) put_row(y);
  } else {
    for (int y = 0; y < img.height; ++y) put_row(y);
  }
  if (EGifCloseFile(gif, &err) == GIF_ERROR) die("EGifCloseFile");
  GifFreeMapObject(cmap);
  return out;
}

}  // namespace cadenza::vision::testing
