// Preprocessing: resize filters against hand-computed values, padding, cropping, normalization.
#include "vision/preprocess.h"

#include <gtest/gtest.h>

#include "image_encode.h"

namespace cadenza::vision {
namespace {

Image solid(int w, int h, std::array<uint8_t, 3> c) {
  Image img;
  img.width = w;
  img.height = h;
  img.rgb.resize(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = c[i % 3];
  return img;
}

TEST(VisionPreprocess, SameSizeResizeIsIdentity) {
  Image img = testing::make_test_image(17, 9);
  for (auto f : {ResizeFilter::kBilinear, ResizeFilter::kBicubic}) {
    EXPECT_EQ(resize(img, 17, 9, f).rgb, img.rgb);
  }
}

TEST(VisionPreprocess, SolidColourStaysSolidUnderBothFilters) {
  Image img = solid(13, 7, {10, 128, 250});
  for (auto f : {ResizeFilter::kBilinear, ResizeFilter::kBicubic}) {
    Image out = resize(img, 29, 5, f);
    ASSERT_EQ(out.width, 29);
    ASSERT_EQ(out.height, 5);
    for (size_t i = 0; i < out.rgb.size(); i += 3) {
      ASSERT_EQ(out.rgb[i], 10);
      ASSERT_EQ(out.rgb[i + 1], 128);
      ASSERT_EQ(out.rgb[i + 2], 250);
    }
  }
}

TEST(VisionPreprocess, BilinearUpscaleMatchesHalfPixelCentres) {
  // A 2x1 image [0, 200] to 4x1: samples at -0.25, 0.25, 0.75, 1.25 of the source -> clamped
  // 0, 0.25 * 200, 0.75 * 200, 200.
  Image img;
  img.width = 2;
  img.height = 1;
  img.rgb = {0, 0, 0, 200, 200, 200};
  Image out = resize(img, 4, 1, ResizeFilter::kBilinear);
  EXPECT_EQ(out.pixel(0, 0)[0], 0);
  EXPECT_EQ(out.pixel(1, 0)[0], 50);
  EXPECT_EQ(out.pixel(2, 0)[0], 150);
  EXPECT_EQ(out.pixel(3, 0)[0], 200);
}

TEST(VisionPreprocess, BicubicDownscaleOfALinearRampStaysLinear) {
  // The Keys kernel reproduces linear functions exactly away from the clamped edges.
  Image img;
  img.width = 16;
  img.height = 1;
  img.rgb.resize(16 * 3);
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<uint8_t>((i / 3) * 10);
  Image out = resize(img, 8, 1, ResizeFilter::kBicubic);
  // Output x samples source 2x + 0.5, i.e. the value 10 * (2x + 0.5).
  for (int x = 1; x < 7; ++x) EXPECT_EQ(out.pixel(x, 0)[0], 20 * x + 5) << x;
}

TEST(VisionPreprocess, PadToSquareCentresTheImage) {
  Image img = solid(4, 2, {255, 255, 255});
  Image sq = pad_to_square(img, {1, 2, 3});
  ASSERT_EQ(sq.width, 4);
  ASSERT_EQ(sq.height, 4);
  EXPECT_EQ(sq.pixel(0, 0)[0], 1);   // top band: fill
  EXPECT_EQ(sq.pixel(3, 1)[0], 255); // rows 1..2: the image
  EXPECT_EQ(sq.pixel(3, 2)[2], 255);
  EXPECT_EQ(sq.pixel(2, 3)[2], 3);   // bottom band: fill
}

TEST(VisionPreprocess, CenterCropTakesTheMiddle) {
  Image img = testing::make_test_image(10, 6);
  Image c = center_crop(img, 4, 2);
  ASSERT_EQ(c.width, 4);
  ASSERT_EQ(c.height, 2);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 4; ++x)
      for (int k = 0; k < 3; ++k) ASSERT_EQ(c.pixel(x, y)[k], img.pixel(x + 3, y + 2)[k]);
  Image padded = center_crop(solid(2, 2, {9, 9, 9}), 4, 4, {7, 7, 7});
  EXPECT_EQ(padded.pixel(0, 0)[0], 7);
  EXPECT_EQ(padded.pixel(1, 1)[0], 9);
  EXPECT_EQ(padded.pixel(3, 3)[0], 7);
}

TEST(VisionPreprocess, NormalizeIsChannelMajorWithMeanAndStd) {
  Image img;
  img.width = 2;
  img.height = 1;
  img.rgb = {255, 0, 51, 0, 255, 102};
  NormalizedImage n = normalize(img, {0.5f, 0.25f, 0.0f}, {0.5f, 0.25f, 2.0f});
  ASSERT_EQ(n.chw.size(), 6u);
  EXPECT_FLOAT_EQ(n.at(0, 0, 0), 1.0f);   // (1 - 0.5) / 0.5
  EXPECT_FLOAT_EQ(n.at(0, 0, 1), -1.0f);  // (0 - 0.5) / 0.5
  EXPECT_FLOAT_EQ(n.at(1, 0, 1), 3.0f);   // (1 - 0.25) / 0.25
  EXPECT_FLOAT_EQ(n.at(2, 0, 0), 0.1f);   // 0.2 / 2
  EXPECT_FLOAT_EQ(n.at(2, 0, 1), 0.2f);
}

}  // namespace
}  // namespace cadenza::vision
