// `cadenza run --mmproj FILE --image FILE`: one prompt with an image, through a model Session
// (the engine does not take image embeddings yet). The image's embeddings (src/vision) replace
// the placeholder tokens where the prompt says `<image>` (before the prompt when it does not).
// Greedy decoding. stdout: the prompt and the text; everything else stderr.
#pragma once

#include <cstdint>
#include <string>

#include "cli/options.h"

namespace cadenza::cli {

struct ImageRunArgs {
  std::string model;
  std::string mmproj;
  std::string image;
  std::string prompt;
  int32_t n_predict = 128;
  int32_t ctx = 0;
  BackendArgs backend;
  bool no_parse_special = false;
  bool ignore_eos = false;
  bool no_echo = false;
};

// The text marking the image's place in the prompt.
inline constexpr const char* kImageMarker = "<image>";

// Exit status: 0 done, 1 an error (printed to stderr: unreadable image or model, an mmproj whose
// output width is not the model's embedding width, a prompt that does not fit).
int run_with_image(const ImageRunArgs& a);

}  // namespace cadenza::cli
