#include "cli/run_image.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "model/session.h"
#include "tokenizer/tokenizer.h"
#include "vision/clip_encoder.h"
#include "vision/decode.h"

namespace cadenza::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

int run_with_image(const ImageRunArgs& a) {
  auto fail = [](const std::string& msg) {
    fmt::print(stderr, "run: {}\n", msg);
    return 1;
  };
  const auto t_load = Clock::now();
  auto image = vision::decode_image_file(a.image.c_str());
  if (!image) return fail(image.error());
  auto opened = gguf::GgufFile::open(a.model);
  if (!opened) return fail(opened.error());
  std::shared_ptr<const gguf::GgufFile> file = std::move(*opened);
  auto tokenizer = Tokenizer::from_gguf(*file);
  if (!tokenizer) return fail(tokenizer.error());
  auto backends = create_backends(a.backend);
  if (!backends) return fail(backends.error());
  kernels::Backend& backend = *backends->main;
  auto model = model::Model::load(file, backend);
  if (!model) return fail(model.error());
  auto encoder = vision::VisionEncoder::open(a.mmproj, backend);
  if (!encoder) return fail(encoder.error());
  const vision::VisionConfig& vc = (*encoder)->config();
  if (vc.n_out != (*model)->config().n_embd) {
    return fail(fmt::format("{}: the projector's output width {} is not the model's embedding "
                            "width {} (an mmproj for another model)", a.mmproj, vc.n_out,
                            (*model)->config().n_embd));
  }
  const int32_t n_image = static_cast<int32_t>(vc.n_image_tokens);

  // Prompt: text before the marker (with BOS), the image's placeholder tokens, text after it;
  // the projector's text around the image (Gemma 3: <start_of_image>, <end_of_image>) joins
  // the text beside it.
  const size_t at = a.prompt.find(kImageMarker);
  const std::string before = (at == std::string::npos ? "" : a.prompt.substr(0, at)) + vc.image_begin;
  const std::string after = vc.image_end + (at == std::string::npos ? a.prompt : a.prompt.substr(at + std::string(kImageMarker).size()));
  std::vector<int32_t> tokens = (*tokenizer)->encode(before, true, !a.no_parse_special);
  const int32_t first = static_cast<int32_t>(tokens.size());
  tokens.insert(tokens.end(), static_cast<size_t>(n_image), 0);  // ids ignored: replaced
  if (!after.empty()) {
    std::vector<int32_t> rest = (*tokenizer)->encode(after, false, !a.no_parse_special);
    tokens.insert(tokens.end(), rest.begin(), rest.end());
  }
  // --ctx 0: the model's context, at most 4096 (SessionOptions).
  auto session = model::Session::create(**model, {.max_tokens = std::max(a.ctx, 0)});
  if (!session) return fail(session.error());
  if (static_cast<int64_t>(tokens.size()) >= (*session)->capacity())
    return fail(fmt::format("the prompt with the image is {} tokens but the context holds {} (raise --ctx)",
                            tokens.size(), (*session)->capacity()));
  const double load_s = seconds_since(t_load);

  const auto t_encode = Clock::now();
  auto embd = (*encoder)->encode((*encoder)->preprocess(*image));
  if (!embd) return fail(embd.error());
  const double encode_s = seconds_since(t_encode);
  fmt::print(stderr, "run: image {} ({}x{}) -> {} tokens of {} (encoder {}x{}), prompt {} tokens; greedy decoding\n",
             a.image, image->width, image->height, n_image, vc.n_out, vc.image_size, vc.image_size, tokens.size());

  if (!a.no_echo) {
    fmt::print("{}", a.prompt);
    std::fflush(stdout);
  }
  const auto t_prompt = Clock::now();
  auto logits = (*session)->eval(tokens, model::InputEmbeddings{first, n_image, *embd, vc.bidirectional_image});
  if (!logits) return fail(logits.error());
  const double prompt_s = seconds_since(t_prompt);
  const auto t_gen = Clock::now();
  std::vector<int32_t> generated;
  std::string shown;
  std::string reason = "length";
  while (static_cast<int32_t>(generated.size()) < a.n_predict) {
    const int32_t next = static_cast<int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin());
    if (!a.ignore_eos && (*tokenizer)->is_end_of_generation(next)) {
      reason = "end of generation token";
      break;
    }
    generated.push_back(next);
    const std::string text = (*tokenizer)->decode(generated);
    // Print what is new; a multi-byte character split across tokens waits for its end.
    if (text.size() > shown.size() && text.compare(0, shown.size(), shown) == 0) {
      fmt::print("{}", text.substr(shown.size()));
      std::fflush(stdout);
      shown = text;
    }
    if ((*session)->n_past() >= (*session)->capacity()) {
      reason = "context full";
      break;
    }
    if (static_cast<int32_t>(generated.size()) == a.n_predict) break;
    logits = (*session)->eval(std::span<const int32_t>(&generated.back(), 1));
    if (!logits) return fail(logits.error());
  }
  fmt::print("\n");
  const double gen_s = seconds_since(t_gen);
  fmt::print(stderr, "run: stopped: {}\n", reason);
  fmt::print(stderr, "run: load    {:8.1f} ms\n", load_s * 1e3);
  fmt::print(stderr, "run: encode  {:8.1f} ms for the image ({} tokens)\n", encode_s * 1e3, n_image);
  fmt::print(stderr, "run: prompt  {:8.1f} ms for {:4} tokens\n", prompt_s * 1e3, tokens.size());
  fmt::print(stderr, "run: generate{:8.1f} ms for {:4} tokens\n", gen_s * 1e3, generated.size());
  return 0;
}

}  // namespace cadenza::cli
