// `cadenza synth`: writes a random-weight GGUF with a real model's shapes (src/synth).
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "synth/mmproj.h"
#include "synth/synth.h"

namespace cadenza::cli {
namespace {

struct SynthArgs {
  std::string preset;
  std::string output;
  std::string type = "f16";
  std::string vocab_from;
  uint64_t seed = 1;
  int threads = 0;
  int64_t layers = 0;
  int64_t ctx = 0;
  int64_t sliding_window = 0;
  bool list = false;
  std::string mmproj;       // an mmproj preset: write a vision projector file instead of a model
  int64_t mmproj_embd = 0;  // the language model's embedding width (the projector's output)
};

// `--mmproj PRESET`: a random-weight CLIP + LLaVA MLP or SigLIP + Gemma 3 projector file
// (src/synth/mmproj.h).
int run_synth_mmproj(const SynthArgs& a) {
  const synth::MmprojShape* preset = synth::find_mmproj_preset(a.mmproj);
  if (preset == nullptr) {
    fmt::print(stderr, "synth: unknown mmproj preset '{}'; available:", a.mmproj);
    for (const auto& p : synth::mmproj_presets()) fmt::print(stderr, " {}", p.name);
    fmt::print(stderr, "\n");
    return 2;
  }
  synth::MmprojShape shape = *preset;
  if (a.mmproj_embd > 0) {
    shape.n_out = a.mmproj_embd;
    if (shape.projector == "mlp") shape.proj_hidden = a.mmproj_embd;
  }
  if (a.layers > 0) shape.n_layers = a.layers;
  fmt::print(stderr, "synth: mmproj {} ({} projector, image {}, patch {}, width {}, {} layers -> {}), RANDOM values -> {}\n",
             shape.name, shape.projector, shape.image_size, shape.patch_size, shape.n_embd,
             shape.n_layers, shape.n_out, a.output);
  if (Status st = synth::write_synthetic_mmproj(shape, a.seed, a.output); !st) {
    fmt::print(stderr, "synth: {}\n", st.error());
    return 1;
  }
  return 0;
}

void print_presets() {
  fmt::print("{:<16} {:<9} {:>6} {:>6} {:>5} {:>4} {:>6} {:>8}  {}\n", "preset", "arch", "embd",
             "layers", "heads", "kv", "ffn", "vocab", "experts");
  for (const auto& p : synth::presets()) {
    std::string experts = p.n_expert > 0
                              ? fmt::format("{} ({} used, ffn {})", p.n_expert, p.n_expert_used,
                                            p.n_ff_expert)
                              : "-";
    fmt::print("{:<16} {:<9} {:>6} {:>6} {:>5} {:>4} {:>6} {:>8}  {}\n", p.preset, p.arch,
               p.n_embd, p.n_layer, p.n_head, p.n_head_kv, p.n_ff,
               p.n_vocab > 0 ? fmt::format("{}", p.n_vocab) : std::string("258"), experts);
  }
}

int run_synth(const SynthArgs& a) {
  if (a.list) {
    print_presets();
    return 0;
  }
  if (!a.mmproj.empty() && !a.output.empty()) return run_synth_mmproj(a);
  if (a.preset.empty() || a.output.empty()) {
    fmt::print(stderr, "synth: --preset and --output are required (see --list)\n");
    return 2;
  }
  auto shape = synth::find_preset(a.preset);
  if (!shape) {
    fmt::print(stderr, "synth: unknown preset '{}'; available:\n", a.preset);
    print_presets();
    return 2;
  }
  if (a.layers > 0) shape->n_layer = a.layers;
  if (a.ctx > 0) shape->n_ctx = a.ctx;
  if (a.sliding_window > 0) {
    if (shape->sliding_window <= 0) {
      fmt::print(stderr, "synth: preset '{}' has no sliding window to override\n", a.preset);
      return 2;
    }
    shape->sliding_window = a.sliding_window;
  }
  synth::SynthOptions opts;
  opts.shape = *shape;
  opts.weight_type = a.type;
  opts.vocab_from = a.vocab_from;
  opts.seed = a.seed;
  opts.threads = resolve_threads(a.threads);
  fmt::print(stderr, "synth: {} shape, {} weights, RANDOM values -> {}\n", shape->display_name,
             a.type, a.output);
  const auto start = std::chrono::steady_clock::now();
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  auto result = synth::write_synthetic_model(opts, a.output, [tty](size_t done, size_t total) {
    if (tty) fmt::print(stderr, "\rsynth: tensor {}/{}", done, total);
    if (tty && done == total) fmt::print(stderr, "\n");
  });
  if (!result) {
    fmt::print(stderr, "\nsynth: {}\n", result.error());
    return 1;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print(stderr, "synth: wrote {} ({:.1f} M parameters, {:.1f} MiB, vocabulary {}) in {:.1f} s\n",
             a.output, result->n_params / 1e6, result->file_bytes / (1024.0 * 1024.0),
             result->n_vocab, secs);
  return 0;
}

}  // namespace

Command synth_command() {
  auto args = std::make_shared<SynthArgs>();
  Command c;
  c.name = "synth";
  c.add = [args](CLI::App& app) {
    auto* sub = app.add_subcommand(
        "synth", "Write a random-weight GGUF model with a real architecture's shapes");
    sub->add_option("--preset", args->preset, "Architecture preset (see --list)");
    sub->add_option("-o,--output", args->output, "Output GGUF file");
    sub->add_option("--type", args->type,
                    "Weight type: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k, the "
                    "low-bit q2_k q3_k iq4_nl iq4_xs mxfp4 iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s "
                    "iq1_s iq1_m (every matrix), or a mixture: q4_k_m (the reference tool's), "
                    "mxfp4_moe (MXFP4 experts, Q8_0 elsewhere, as gpt-oss is released), mxfp4_moe_f16 "
                    "(F16 elsewhere)")
        ->capture_default_str();
    sub->add_option("--vocab-from", args->vocab_from,
                    "Copy the tokenizer from this GGUF (default: built-in byte-level)");
    sub->add_option("--seed", args->seed, "Random seed")->capture_default_str();
    sub->add_option("-t,--threads", args->threads, "Threads (default: all cores)");
    sub->add_option("--layers", args->layers, "Override the preset's layer count");
    sub->add_option("--ctx", args->ctx, "Override the preset's context length");
    sub->add_option("--sliding-window", args->sliding_window,
                    "Override the preset's attention window (presets with one: gemma3, gpt-oss)");
    sub->add_flag("--list", args->list, "List the presets and exit");
    sub->add_option("--mmproj", args->mmproj,
                    "Write a vision projector (mmproj) file of this preset instead of a model: "
                    "clip-tiny, clip-vit-l-336 (CLIP + the LLaVA-1.5 MLP projector), gemma3-tiny, "
                    "siglip-gemma3-896 (SigLIP + Gemma 3's average-pool projector)");
    sub->add_option("--mmproj-embd", args->mmproj_embd,
                    "The projector's output width: the language model's embedding width");
  };
  c.run = [args] { return run_synth(*args); };
  return c;
}

}  // namespace cadenza::cli
