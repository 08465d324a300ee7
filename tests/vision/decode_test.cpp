// Image decoding: round trips through the same libraries' encoders, format sniffing, header
// limits (checked before allocating), truncated and corrupt data.
#include "vision/decode.h"

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>
#include <zlib.h>

#include "image_encode.h"
#include "temp_dir.h"

namespace cadenza::vision {
namespace {

using testing::encode_gif;
using testing::encode_jpeg;
using testing::encode_png;
using testing::encode_webp;
using testing::make_palette_image;
using testing::make_test_image;
using testing::PngLayout;

double mean_abs_error(const Image& a, const Image& b) {
  EXPECT_EQ(a.rgb.size(), b.rgb.size());
  double sum = 0;
  for (size_t i = 0; i < a.rgb.size() && i < b.rgb.size(); ++i) sum += std::abs(a.rgb[i] - b.rgb[i]);
  return sum / static_cast<double>(a.rgb.size());
}

Image swap_red_blue(Image img) {
  for (size_t i = 0; i < img.rgb.size(); i += 3) std::swap(img.rgb[i], img.rgb[i + 2]);
  return img;
}

Image decode_ok(const std::vector<uint8_t>& bytes) {
  auto img = decode_image(bytes);
  EXPECT_TRUE(img.ok()) << (img.ok() ? "" : img.error());
  return img.ok() ? std::move(*img) : Image{};
}

TEST(VisionDecode, SniffsFormatsFromMagicBytes) {
  Image img = make_palette_image(8, 8, 4);
  EXPECT_EQ(sniff_image_format(encode_png(img)), ImageFormat::kPng);
  EXPECT_EQ(sniff_image_format(encode_jpeg(img, 90)), ImageFormat::kJpeg);
  EXPECT_EQ(sniff_image_format(encode_webp(img, true)), ImageFormat::kWebp);
  EXPECT_EQ(sniff_image_format(encode_gif(img)), ImageFormat::kGif);
  const std::string bmp = "BM\x36\x00\x00\x00";
  EXPECT_EQ(sniff_image_format({reinterpret_cast<const uint8_t*>(bmp.data()), bmp.size()}),
            ImageFormat::kUnknown);
  EXPECT_EQ(sniff_image_format({}), ImageFormat::kUnknown);
}

TEST(VisionDecode, PngRoundTripsExactlyInEveryLayout) {
  Image img = make_test_image(37, 23);
  Image rgb = decode_ok(encode_png(img, PngLayout::kRgb));
  EXPECT_EQ(rgb.width, 37);
  EXPECT_EQ(rgb.height, 23);
  EXPECT_EQ(rgb.rgb, img.rgb);
  Image rgba = decode_ok(encode_png(img, PngLayout::kRgba));
  EXPECT_EQ(rgba.rgb, img.rgb);
  Image grey = decode_ok(encode_png(img, PngLayout::kGrey));
  ASSERT_EQ(grey.rgb.size(), img.rgb.size());
  for (size_t i = 0; i < grey.rgb.size(); i += 3) {
    ASSERT_EQ(grey.rgb[i], img.rgb[i + 1]);  // grey replicated to R, G and B
    ASSERT_EQ(grey.rgb[i + 2], img.rgb[i + 1]);
  }
}

TEST(VisionDecode, JpegRoundTripsWithinCompressionError) {
  Image img = make_test_image(64, 48);
  for (bool progressive : {false, true}) {
    Image out = decode_ok(encode_jpeg(img, 95, progressive));
    EXPECT_EQ(out.width, 64);
    EXPECT_EQ(out.height, 48);
    // Measured 6.7 at quality 95 (4:2:0 chroma subsampling blurs the blue checkerboard); the
    // same picture with R and B swapped is off by far more (checked below).
    EXPECT_LT(mean_abs_error(out, img), 8.0) << "progressive=" << progressive;
    EXPECT_GT(mean_abs_error(out, swap_red_blue(img)), 40.0);
  }
  Image grey = decode_ok(encode_jpeg(img, 95, false, /*grey=*/true));
  ASSERT_EQ(grey.rgb.size(), img.rgb.size());
  EXPECT_EQ(grey.rgb[300], grey.rgb[301]);
  EXPECT_NEAR(grey.rgb[301], img.rgb[301], 6);
}

TEST(VisionDecode, WebpRoundTrips) {
  Image img = make_test_image(50, 30);
  Image lossless = decode_ok(encode_webp(img, true));
  EXPECT_EQ(lossless.width, 50);
  EXPECT_EQ(lossless.rgb, img.rgb);
  Image lossy = decode_ok(encode_webp(img, false));
  EXPECT_LT(mean_abs_error(lossy, img), 10.0);  // measured 8.1 at quality 90 (4:2:0 chroma)
  EXPECT_GT(mean_abs_error(lossy, swap_red_blue(img)), 40.0);
}

TEST(VisionDecode, GifFirstFrameRoundTripsExactly) {
  Image img = make_palette_image(41, 29, 200);
  for (bool interlaced : {false, true}) {
    Image out = decode_ok(encode_gif(img, interlaced));
    EXPECT_EQ(out.width, 41);
    EXPECT_EQ(out.height, 29);
    EXPECT_EQ(out.rgb, img.rgb) << "interlaced=" << interlaced;
  }
}

TEST(VisionDecode, SmallLimitsRejectEveryFormat) {
  Image img = make_test_image(64, 64);
  DecodeLimits pixels{.max_pixels = 64 * 63, .max_dimension = 1000};
  DecodeLimits side{.max_pixels = 1'000'000, .max_dimension = 63};
  for (const auto& bytes : {encode_png(img), encode_jpeg(img, 90), encode_webp(img, true),
                            encode_gif(make_palette_image(64, 64, 16))}) {
    auto a = decode_image(bytes, pixels);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.error().find("over the limit"), std::string::npos) << a.error();
    auto b = decode_image(bytes, side);
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.error().find("per side"), std::string::npos) << b.error();
    EXPECT_TRUE(decode_image(bytes, DecodeLimits{.max_pixels = 64 * 64, .max_dimension = 64}).ok());
  }
}

// Headers that claim a huge picture in a few hundred bytes: each must fail at the header with
// the limit's message (not by trying to allocate 1.2 GB, nor as "truncated").
void put_be32(std::vector<uint8_t>& v, size_t at, uint32_t x) {
  v[at] = static_cast<uint8_t>(x >> 24);
  v[at + 1] = static_cast<uint8_t>(x >> 16);
  v[at + 2] = static_cast<uint8_t>(x >> 8);
  v[at + 3] = static_cast<uint8_t>(x);
}

void expect_limit_error(const std::vector<uint8_t>& bytes, const char* format) {
  auto r = decode_image(bytes);
  ASSERT_FALSE(r.ok()) << format;
  EXPECT_NE(r.error().find(format), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("over the limit"), std::string::npos) << r.error();
}

TEST(VisionDecode, HugeHeadersAreRejectedBeforeDecoding) {
  Image small = make_palette_image(16, 16, 4);
  {  // PNG: IHDR width/height at bytes 16..23, its CRC at 29..32 over bytes 12..28.
    auto png = encode_png(small);
    put_be32(png, 16, 20000);
    put_be32(png, 20, 20000);
    put_be32(png, 29, static_cast<uint32_t>(crc32(0, png.data() + 12, 17)));
    expect_limit_error(png, "PNG");
  }
  {  // JPEG: the SOF0 segment (FF C0, length, precision) holds height then width, big-endian.
    auto jpg = encode_jpeg(make_test_image(16, 16), 90);
    size_t sof = 2;
    while (sof + 9 < jpg.size() && !(jpg[sof] == 0xFF && jpg[sof + 1] == 0xC0)) ++sof;
    ASSERT_LT(sof + 9, jpg.size());
    jpg[sof + 5] = 20000 >> 8; jpg[sof + 6] = 20000 & 0xFF;
    jpg[sof + 7] = 20000 >> 8; jpg[sof + 8] = 20000 & 0xFF;
    expect_limit_error(jpg, "JPEG");
  }
  {  // WebP lossless: after the VP8L signature byte, 14 bits width-1 and 14 bits height-1.
    auto webp = encode_webp(small, true);
    ASSERT_EQ(std::memcmp(webp.data() + 12, "VP8L", 4), 0);
    uint32_t bits;
    std::memcpy(&bits, webp.data() + 21, 4);
    bits = (bits & ~0x0FFFFFFFu) | 16383u | (16383u << 14);  // 16384 x 16384 = 268 M pixels
    std::memcpy(webp.data() + 21, &bits, 4);
    expect_limit_error(webp, "WebP");
  }
  {  // GIF: the logical screen is 20000 x 20000 (little-endian at bytes 6..9).
    auto gif = encode_gif(small);
    gif[6] = 20000 & 0xFF; gif[7] = 20000 >> 8;
    gif[8] = 20000 & 0xFF; gif[9] = 20000 >> 8;
    expect_limit_error(gif, "GIF");
  }
}

TEST(VisionDecode, TruncatedDataIsAnErrorInEveryFormat) {
  Image img = make_test_image(64, 64);
  Image pal = make_palette_image(64, 64, 100);
  struct Case { const char* name; std::vector<uint8_t> bytes; };
  for (auto& c : {Case{"PNG", encode_png(img)}, Case{"JPEG", encode_jpeg(img, 90)},
                  Case{"JPEG", encode_jpeg(img, 90, /*progressive=*/true)},
                  Case{"WebP", encode_webp(img, true)}, Case{"WebP", encode_webp(img, false)},
                  Case{"GIF", encode_gif(pal)}}) {
    for (double keep : {0.1, 0.5, 0.9}) {
      std::vector<uint8_t> cut(c.bytes.begin(), c.bytes.begin() + static_cast<long>(c.bytes.size() * keep));
      auto r = decode_image(cut);
      ASSERT_FALSE(r.ok()) << c.name << " cut to " << keep;
      EXPECT_NE(r.error().find(c.name), std::string::npos) << r.error();
    }
  }
}

TEST(VisionDecode, CorruptOrForeignDataIsAnError) {
  Image img = make_test_image(32, 32);
  // A valid magic followed by garbage.
  for (auto bytes : {encode_png(img), encode_jpeg(img, 90), encode_webp(img, true), encode_gif(make_palette_image(32, 32, 8))}) {
    for (size_t i = 16; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + 7);
    EXPECT_FALSE(decode_image(bytes).ok());
  }
  // PNG data chunk damaged: the CRC catches it.
  auto png = encode_png(img);
  png[png.size() / 2] ^= 0x55;
  EXPECT_FALSE(decode_image(png).ok());
  auto none = decode_image({});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().find("empty"), std::string::npos);
  const std::string text = "hello, not an image";
  auto foreign = decode_image({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.error().find("unsupported format"), std::string::npos);
}

TEST(VisionDecode, DecodesFilesAndNamesThePathInErrors) {
  cadenza::test::TempDir dir;
  Image img = make_test_image(10, 10);
  auto png = encode_png(img);
  std::string path = dir.file("a.png");
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(png.data(), 1, png.size(), f);
  std::fclose(f);
  auto ok = decode_image_file(path.c_str());
  ASSERT_TRUE(ok.ok()) << ok.error();
  EXPECT_EQ(ok->rgb, img.rgb);
  auto missing = decode_image_file(dir.file("none.png").c_str());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("none.png"), std::string::npos);
}

}  // namespace
}  // namespace cadenza::vision
