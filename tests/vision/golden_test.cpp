// The vision encoder against the reference engine (llama-mtmd-cli, a black box) on a
// synthesized mmproj: golden/clip-tiny.json, made once by scripts/make_vision_golden.py. The test
// re-synthesizes the same file (same preset and seed) and draws the same pictures, checked by the
// CRC-32 of their RGB bytes.
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "image_encode.h"
#include "kernels/cpu/cpu_backend.h"
#include "synth/mmproj.h"
#include "temp_dir.h"
#include "vision/clip_encoder.h"

namespace cadenza::vision {
namespace {

TEST(VisionGolden, EmbeddingsMatchTheReferenceEngine) {
  std::ifstream in(std::string(CADENZA_SOURCE_DIR) + "/tests/vision/golden/clip-tiny.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json g = nlohmann::json::parse(in);
  cadenza::test::TempDir dir;
  const std::string path = dir.file("mmproj.gguf");
  const synth::MmprojShape* shape = synth::find_mmproj_preset(g["mmproj"]["preset"].get<std::string>());
  ASSERT_NE(shape, nullptr);
  ASSERT_TRUE(synth::write_synthetic_mmproj(*shape, g["mmproj"]["seed"].get<uint64_t>(), path).ok());
  auto backend = kernels::make_cpu_backend({.n_threads = 2});
  auto enc = VisionEncoder::open(path, *backend);
  ASSERT_TRUE(enc.ok()) << enc.error();
  const VisionConfig& c = (*enc)->config();
  for (const auto& im : g["images"]) {
    const int w = im["width"], h = im["height"];
    SCOPED_TRACE(::testing::Message() << w << "x" << h);
    Image img = testing::make_test_image(w, h, im["seed"].get<uint32_t>());
    ASSERT_EQ(crc32(0, img.rgb.data(), static_cast<uInt>(img.rgb.size())), im["rgb_crc32"].get<uint32_t>())
        << "make_test_image no longer draws the picture the golden file was made from";
    auto out = (*enc)->encode((*enc)->preprocess(img));
    ASSERT_TRUE(out.ok()) << out.error();
    ASSERT_EQ(c.n_out, im["n_embd"].get<int64_t>());
    ASSERT_EQ(c.n_patches, im["n_tokens"].get<int64_t>());
    const int64_t d = c.n_out;
    double max_err = 0;
    for (int i = 0; i < 16; ++i) {
      max_err = std::max(max_err, std::abs((*out)[static_cast<size_t>(i)] - im["token0_first16"][i].get<double>()));
      max_err = std::max(max_err, std::abs((*out)[static_cast<size_t>(d - 16 + i)] - im["token0_last16"][i].get<double>()));
    }
    double sum = 0, sq = 0, mn = 1e30, mx = -1e30;
    for (float v : *out) {
      sum += v;
      sq += static_cast<double>(v) * v;
      mn = std::min<double>(mn, v);
      mx = std::max<double>(mx, v);
    }
    const double n = static_cast<double>(out->size()), mean = sum / n;
    const double sd = std::sqrt(std::max(0.0, sq / n - mean * mean));
    std::fprintf(stderr, "%dx%d: max |err| of token 0's 32 logged values %.3g; mean %.6f (ref %.6f), std %.6f (ref %.6f), min %.6f (ref %.6f), max %.6f (ref %.6f)\n",
                 w, h, max_err, mean, im["mean"].get<double>(), sd, im["std"].get<double>(), mn,
                 im["min"].get<double>(), mx, im["max"].get<double>());
    if (w == c.image_size && h == c.image_size) {
      // The encoder alone (no resampling). Measured: max |err| 1.2e-3 on values of magnitude
      // ~1-3 (the reference rounds activations to F16 for its F16 matmuls), mean 1.6e-5, std
      // 2e-6, min 6e-4, max 4e-5, sum 0.016. Bounds about twice that.
      EXPECT_LT(max_err, 3e-3);
      EXPECT_NEAR(mean, im["mean"].get<double>(), 1e-4);
      EXPECT_NEAR(sd, im["std"].get<double>(), 1e-3);
      EXPECT_NEAR(mn, im["min"].get<double>(), 2e-3);
      EXPECT_NEAR(mx, im["max"].get<double>(), 2e-3);
      EXPECT_NEAR(sum, im["sum"].get<double>(), 0.1);
    } else {
      // Resized and padded: the reference's resampling filter is not reproduced exactly.
      // Measured: max |err| 0.106, mean 4e-4, std 4.3e-3 (a bicubic resize: 0.146; padding
      // before resizing: 0.74). Bounds: the measured gap plus a margin.
      EXPECT_LT(max_err, 0.2);
      EXPECT_NEAR(mean, im["mean"].get<double>(), 0.005);
      EXPECT_NEAR(sd, im["std"].get<double>(), 0.02);
    }
  }
}

}  // namespace
}  // namespace cadenza::vision
