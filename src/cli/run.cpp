// `cadenza run`: load a GGUF model, generate text for one prompt, stream it, report speeds.
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "engine/sampler.h"
#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/backend_factory.h"
#include "model/model.h"
#include "model/session.h"
#include "tokenizer/streaming_detokenizer.h"
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
  std::string model;
  std::string prompt = "Once upon a time";
  int32_t n_predict = 128;
  float temperature = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  int64_t seed = -1;
  int threads = 0;
  std::string device = "cpu";  // --device: cpu, cuda, cuda:N (kernels/backend_factory.h)
  int64_t experts_per_token = 0;  // 0: the model's
  int32_t ctx = 0;
  DType kv_cache_type = DType::F16;
  bool no_parse_special = false;
  bool ignore_eos = false;
  bool no_echo = false;
};

int run_generate(const RunArgs& a) {
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
  const int threads = resolve_threads(a.threads);
  auto created = kernels::create_backend(a.device, {.n_threads = threads});
  if (!created) {
    fmt::print(stderr, "run: {}\n", created.error());
    return 1;
  }
  std::unique_ptr<kernels::Backend> backend = std::move(*created);
  auto model = model::Model::load(file, *backend, {.experts_per_token = a.experts_per_token});
  if (!model) {
    fmt::print(stderr, "run: {}\n", model.error());
    return 1;
  }
  auto session = model::Session::create(**model, {.max_tokens = a.ctx, .kv_type = a.kv_cache_type});
  if (!session) {
    fmt::print(stderr, "run: {}\n", session.error());
    return 1;
  }
  const double load_s = seconds_since(t_load);

  std::vector<int32_t> prompt = (*tokenizer)->encode(a.prompt, /*add_special=*/true,
                                                     /*parse_special=*/!a.no_parse_special);
  if (prompt.empty()) {
    fmt::print(stderr, "run: the prompt has no tokens\n");
    return 1;
  }
  if (static_cast<int64_t>(prompt.size()) >= (*session)->capacity()) {
    fmt::print(stderr, "run: the prompt has {} tokens but the context holds {} (raise --ctx)\n",
               prompt.size(), (*session)->capacity());
    return 1;
  }
  auto general_name = file->get_string_or("general.name", "");
  const std::string name = general_name ? *general_name : std::string();
  fmt::print(stderr, "run: {} ({}), {} threads, context {}, prompt {} tokens\n",
             name.empty() ? a.model : name, (*model)->config().architecture, threads,
             (*session)->capacity(), prompt.size());

  SamplingParams sp;
  sp.temperature = a.temperature;
  sp.top_k = a.top_k;
  sp.top_p = a.top_p;
  sp.min_p = a.min_p;
  sp.seed = a.seed >= 0 ? static_cast<uint64_t>(a.seed) : std::random_device{}();
  Sampler sampler(sp);

  if (!a.no_echo) {
    fmt::print("{}", a.prompt);
    std::fflush(stdout);
  }
  const auto t_prompt = Clock::now();
  auto logits = (*session)->eval(prompt);
  if (!logits) {
    fmt::print(stderr, "\nrun: {}\n", logits.error());
    return 1;
  }
  const double prompt_s = seconds_since(t_prompt);

  StreamingDetokenizer detok(**tokenizer);
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  const auto t_gen = Clock::now();
  int32_t generated = 0;
  std::string stop_reason = "length";
  while (generated < a.n_predict) {
    const int32_t next = sampler.sample(*logits);
    ++generated;
    if (!a.ignore_eos && (*tokenizer)->is_end_of_generation(next)) {
      stop_reason = "end of generation token";
      break;
    }
    fmt::print("{}", for_terminal(detok.push(next), tty));
    std::fflush(stdout);
    if (generated == a.n_predict) break;
    if ((*session)->n_past() >= (*session)->capacity()) {
      stop_reason = "context full";
      break;
    }
    logits = (*session)->eval({&next, 1});
    if (!logits) {
      fmt::print(stderr, "\nrun: {}\n", logits.error());
      return 1;
    }
  }
  fmt::print("{}\n", for_terminal(detok.finish(), tty));
  const double gen_s = seconds_since(t_gen);

  fmt::print(stderr, "\nrun: stopped: {}\n", stop_reason);
  fmt::print(stderr, "run: load    {:8.1f} ms\n", load_s * 1e3);
  fmt::print(stderr, "run: prompt  {:8.1f} ms for {:4} tokens = {:8.2f} tokens/s\n", prompt_s * 1e3,
             prompt.size(), prompt.size() / prompt_s);
  fmt::print(stderr, "run: generate{:8.1f} ms for {:4} tokens = {:8.2f} tokens/s\n", gen_s * 1e3,
             generated, generated / gen_s);
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
        ->capture_default_str();
    sub->add_option("--temp", args->temperature, "Temperature (0 = greedy)")
        ->capture_default_str();
    sub->add_option("--top-k", args->top_k, "Top-k (0 = off)")->capture_default_str();
    sub->add_option("--top-p", args->top_p, "Top-p (1 = off)")->capture_default_str();
    sub->add_option("--min-p", args->min_p, "Min-p (0 = off)")->capture_default_str();
    sub->add_option("--seed", args->seed, "Random seed (default: random)");
    sub->add_option("-t,--threads", args->threads, "Threads (default: all cores)");
    add_device_option(*sub, args->device);
    sub->add_option("--experts-per-token", args->experts_per_token,
                    "MoE: experts used per token (default: the model's; changes quality)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    sub->add_option("-c,--ctx", args->ctx,
                    "Context size in tokens (default: the model's, at most 4096)");
    add_kv_cache_type_option(*sub, args->kv_cache_type);
    sub->add_flag("--no-parse-special", args->no_parse_special,
                  "Treat special-token text in the prompt as plain text");
    sub->add_flag("--ignore-eos", args->ignore_eos, "Keep generating after end-of-generation");
    sub->add_flag("--no-echo", args->no_echo, "Do not print the prompt");
  };
  c.run = [args] { return run_generate(*args); };
  return c;
}

}  // namespace cadenza::cli
