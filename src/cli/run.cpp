// `cadenza run`: load a GGUF model, generate text for one prompt, stream it, report speeds.
// The prompt runs as one request of an engine::EngineCore (sampling, stops and detokenization are
// the server's); stdout carries the prompt and the text only, everything else goes to stderr.
#include <algorithm>
#include <optional>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/parallel.h"
#include "cli/run_image.h"
#include "engine/engine_core.h"
#include "gguf/gguf.h"
#include "kernels/backend_factory.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace cadenza::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Random-weight models emit arbitrary bytes; on a terminal, control characters (escape sequences)
// could garble it, so they are shown as U+FFFD there. Pipes and files get the text unchanged.
std::string for_terminal(std::string text, bool is_tty) {
  if (!is_tty) return text;
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      out += "\xEF\xBF\xBD";
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

struct RunArgs {
  ParallelArgs parallel;
  std::string model;
  std::string prompt = "Once upon a time";
  int32_t n_predict = 128;
  float temperature = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  int64_t seed = -1;
  BackendArgs backend;  // -t, --device, --no-repack
  int64_t experts_per_token = 0;  // 0: the model's
  int32_t ctx = 0;
  DType kv_cache_type = DType::F16;
  engine::SpeculativeConfig speculative;  // --speculative-method etc.
  bool no_parse_special = false;
  bool ignore_eos = false;
  bool no_echo = false;
  std::vector<std::string> stop;  // --stop: stop strings (cut from the output)
  std::string mmproj;  // --mmproj: a vision projector; with --image, run_image.h
  std::string image;
};

// Why the request ended, in words. `last_token`: the last generated id (-1: none).
std::string stop_reason(const engine::RequestOutput& out, const Tokenizer& tokenizer,
                        int32_t last_token, int32_t max_tokens, int32_t n_predict) {
  switch (out.finish_reason) {
    case engine::FinishReason::kStop:
      return last_token >= 0 && tokenizer.is_end_of_generation(last_token)
                 ? "end of generation token"
                 : "stop string";
    case engine::FinishReason::kLength:
      return max_tokens < n_predict ? "context full" : "length";
    default:
      return engine::to_string(out.finish_reason);
  }
}

int run_generate(const RunArgs& a) {
  if (!a.mmproj.empty() || !a.image.empty()) {
    if (a.mmproj.empty() || a.image.empty()) {
      fmt::print(stderr, "run: --mmproj and --image go together\n");
      return 2;
    }
    if (a.temperature != 0.0f || a.speculative.enabled() || !a.stop.empty())
      fmt::print(stderr, "run: with --image decoding is greedy; --temp/--top-*/--stop/speculative options are ignored\n");
    return run_with_image({.model = a.model, .mmproj = a.mmproj, .image = a.image,
                           .prompt = a.prompt, .n_predict = a.n_predict, .ctx = a.ctx,
                           .backend = a.backend, .no_parse_special = a.no_parse_special,
                           .ignore_eos = a.ignore_eos, .no_echo = a.no_echo});
  }
  const auto t_load = Clock::now();
  auto opened = gguf::GgufFile::open(a.model);
  if (!opened) {
    fmt::print(stderr, "run: {}\n", opened.error());
    return 1;
  }
  std::shared_ptr<const gguf::GgufFile> file = std::move(*opened);
  auto tokenizer = Tokenizer::from_gguf(*file);
  if (!tokenizer) {
    fmt::print(stderr, "run: {}\n", tokenizer.error());
    return 1;
  }
  const int threads = resolve_threads(a.backend.threads);
  auto created = create_backends(a.backend);
  if (!created) {
    fmt::print(stderr, "run: {}\n", created.error());
    return 1;
  }
  Backends backends = std::move(*created);
  kernels::Backend* backend = backends.main.get();
  auto job = start_job(a.parallel);
  if (!job) {
    fmt::print(stderr, "run: {}\n", job.error());
    return 1;
  }
  auto model = model::Model::load(file, *backend, {.experts_per_token = a.experts_per_token,
                                                   .world = job->world.get(),
                                                   .parallel = job->config,
                                                   .expert_offload = backends.expert_offload()});
  if (!model) {
    fmt::print(stderr, "run: {}\n", model.error());
    return 1;
  }
  if (std::optional<int> code = serve_if_worker(**model)) return *code;
  // One request: room for one sequence of the context size, no prefix cache to fill.
  engine::EngineConfig ec;
  ec.max_num_seqs = 1;
  ec.max_model_len = a.ctx;
  ec.enable_prefix_caching = false;
  ec.kv_type = a.kv_cache_type;
  ec.speculative = a.speculative;
  auto engine = engine::EngineCore::create(**model, **tokenizer, ec);
  if (!engine) {
    fmt::print(stderr, "run: {}\n", engine.error());
    return 1;
  }
  const int32_t context = (*engine)->config().max_model_len;
  const double load_s = seconds_since(t_load);

  std::vector<int32_t> prompt = (*tokenizer)->encode(a.prompt, /*add_special=*/true,
                                                     /*parse_special=*/!a.no_parse_special);
  if (prompt.empty()) {
    fmt::print(stderr, "run: the prompt has no tokens\n");
    return 1;
  }
  const int64_t room = int64_t{context} - static_cast<int64_t>(prompt.size());
  if (room < 1) {
    fmt::print(stderr, "run: the prompt has {} tokens but the context holds {} (raise --ctx)\n",
               prompt.size(), context);
    return 1;
  }
  auto general_name = file->get_string_or("general.name", "");
  const std::string name = general_name ? *general_name : std::string();
  fmt::print(stderr, "run: {} ({}), {} threads, context {}, prompt {} tokens\n",
             name.empty() ? a.model : name, (*model)->config().architecture, threads, context,
             prompt.size());

  SamplingParams sp;
  sp.temperature = a.temperature;
  sp.top_k = a.top_k;
  sp.top_p = a.top_p;
  sp.min_p = a.min_p;
  sp.seed = a.seed >= 0 ? static_cast<uint64_t>(a.seed) : std::random_device{}();
  sp.ignore_eos = a.ignore_eos;
  sp.stop = a.stop;
  // Generation stops at the end of the context as before: max_tokens is what still fits.
  sp.max_tokens = static_cast<int32_t>(std::min<int64_t>(a.n_predict, room));
  const size_t n_prompt = prompt.size();
  auto id = (*engine)->add_request(std::move(prompt), sp);
  if (!id) {
    fmt::print(stderr, "run: {}\n", id.error());
    return 1;
  }

  if (!a.no_echo) {
    fmt::print("{}", a.prompt);
    std::fflush(stdout);
  }
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  // Prompt time: start -> first token (the prompt's forward passes and the first sample).
  // Generation time: first token -> last token, over the tokens after the first.
  const auto t_prompt = Clock::now();
  Clock::time_point t_first{}, t_last{};
  int32_t generated = 0, last_token = -1;
  engine::RequestOutput last;
  while ((*engine)->has_work()) {
    for (engine::RequestOutput& out : (*engine)->step()) {
      if (!out.new_token_ids.empty()) {
        t_last = Clock::now();
        if (generated == 0) t_first = t_last;
        generated += static_cast<int32_t>(out.new_token_ids.size());
        last_token = out.new_token_ids.back();
      }
      fmt::print("{}", for_terminal(out.text, tty));
      std::fflush(stdout);
      if (out.finished) last = std::move(out);
    }
  }
  fmt::print("\n");
  std::fflush(stdout);
  if (last.finish_reason == engine::FinishReason::kError) {
    fmt::print(stderr, "run: {}\n", last.error);
    return 1;
  }
  const double prompt_s = generated > 0 ? std::chrono::duration<double>(t_first - t_prompt).count()
                                        : seconds_since(t_prompt);
  const double gen_s = generated > 0 ? std::chrono::duration<double>(t_last - t_first).count() : 0;
  const int32_t decoded = std::max(generated - 1, 0);

  fmt::print(stderr, "run: stopped: {}\n",
             stop_reason(last, **tokenizer, last_token, sp.max_tokens, a.n_predict));
  fmt::print(stderr, "run: load    {:8.1f} ms\n", load_s * 1e3);
  fmt::print(stderr, "run: prompt  {:8.1f} ms for {:4} tokens = {:8.2f} tokens/s\n", prompt_s * 1e3,
             n_prompt, static_cast<double>(n_prompt) / prompt_s);
  fmt::print(stderr, "run: generate{:8.1f} ms for {:4} tokens = {:8.2f} tokens/s\n", gen_s * 1e3,
             decoded, gen_s > 0 ? decoded / gen_s : 0.0);
  if (a.speculative.enabled())
    fmt::print(stderr, "run: {}\n", speculative_summary((*engine)->stats()));
  return 0;
}

}  // namespace

Command run_command() {
  auto args = std::make_shared<RunArgs>();
  Command c;
  c.name = "run";
  c.add = [args](CLI::App& app) {
    auto* sub = app.add_subcommand("run", "Generate text for one prompt and report speeds");
    sub->add_option("-m,--model", args->model, "GGUF model file")->required();
    sub->add_option("-p,--prompt", args->prompt, "Prompt text")->capture_default_str();
    sub->add_option("-n,--n-predict", args->n_predict, "Tokens to generate")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 30));
    sub->add_option("--temp", args->temperature, "Temperature (0 = greedy)")
        ->capture_default_str();
    sub->add_option("--top-k", args->top_k, "Top-k (0 = off)")->capture_default_str();
    sub->add_option("--top-p", args->top_p, "Top-p (1 = off)")->capture_default_str();
    sub->add_option("--min-p", args->min_p, "Min-p (0 = off)")->capture_default_str();
    sub->add_option("--seed", args->seed, "Random seed (default: random)");
    add_backend_options(*sub, args->backend);
    add_parallel_options(*sub, args->parallel);
    sub->add_option("--experts-per-token", args->experts_per_token,
                    "MoE: experts used per token (default: the model's; changes quality)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    sub->add_option("-c,--ctx", args->ctx,
                    "Context size in tokens (default: the model's, at most 4096)");
    add_kv_cache_type_option(*sub, args->kv_cache_type);
    add_speculative_options(*sub, args->speculative);
    sub->add_flag("--no-parse-special", args->no_parse_special,
                  "Treat special-token text in the prompt as plain text");
    sub->add_flag("--ignore-eos", args->ignore_eos, "Keep generating after end-of-generation");
    sub->add_flag("--no-echo", args->no_echo, "Do not print the prompt");
    sub->add_option("--stop", args->stop, "Stop when the text contains this string (repeatable)")
        ->allow_extra_args(false);  // one string per --stop, so `--stop x file` is no surprise
    sub->add_option("--mmproj", args->mmproj,
                    "Vision projector (mmproj GGUF: CLIP + LLaVA MLP) for --image");
    sub->add_option("--image", args->image,
                    "Image (JPEG, PNG, WebP, GIF) whose embeddings replace `<image>` in the prompt "
                    "(or go before it); greedy decoding");
  };
  c.run = [args] { return run_generate(*args); };
  return c;
}

}  // namespace cadenza::cli
