// Writes the image target's seed corpus into the folder given as argv[1]: small pictures in every
// format and layout the decoders handle (tests/vision/image_encode.h), so that the fuzzer starts
// from valid files instead of guessing magic bytes and chunk structures.
#include <cstdio>
#include <string>
#include <vector>

#include "../tests/vision/image_encode.h"

using cadenza::vision::Image;
using namespace cadenza::vision::testing;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: image_fuzz_seed DIR\n");
    return 2;
  }
  const Image pic = make_test_image(12, 9);
  const Image pal = make_palette_image(11, 7, 20);
  const std::vector<std::pair<std::string, std::vector<uint8_t>>> seeds = {
      {"rgb.png", encode_png(pic)},
      {"grey.png", encode_png(pic, PngLayout::kGrey)},
      {"rgba.png", encode_png(pic, PngLayout::kRgba)},
      {"base.jpg", encode_jpeg(pic, 80)},
      {"progressive.jpg", encode_jpeg(pic, 80, true)},
      {"grey.jpg", encode_jpeg(pic, 80, false, true)},
      {"lossless.webp", encode_webp(pic, true)},
      {"lossy.webp", encode_webp(pic, false)},
      {"plain.gif", encode_gif(pal)},
      {"interlaced.gif", encode_gif(pal, true)},
  };
  for (const auto& [name, bytes] : seeds) {
    const std::string path = std::string(argv[1]) + "/" + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
      std::fprintf(stderr, "image_fuzz_seed: cannot write %s\n", path.c_str());
      return 1;
    }
    std::fclose(f);
  }
  return 0;
}
