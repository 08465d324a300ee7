// `cadenza generate`: offline batch generation through the engine. Reads one JSON request per
// line, submits them all to one EngineCore (continuous batching) or one at a time (--sequential),
// and writes one JSON result per line in input order. Format and options: docs/generate.md.
//
// A bad line never stops the run: it gets an error record naming its line number, and the summary
// counts it. Only problems with the run as a whole (files, model, engine config) are fatal.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/parallel.h"
#include "engine/engine_core.h"
#include "kernels/backend_factory.h"
#include "kv/kv_sizing.h"
#include "model/model.h"
#include "request/sampling_json.h"
#include "tokenizer/tokenizer.h"

namespace cadenza::cli {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct GenerateArgs {
  ParallelArgs parallel;
  std::string model;
  BackendArgs backend;  // -t, --device, --no-repack
  std::string input;
  std::string output;
  int32_t max_num_seqs = 16;
  int32_t max_num_batched_tokens = 512;
  std::string kv_cache_memory;  // empty: the engine's default pool
  KvTierArgs kv_tiers;          // --kv-offload-memory, --kv-disk-dir, --kv-disk-size
  DType kv_cache_type = DType::F16;
  engine::SpeculativeConfig speculative;  // --speculative-method etc.
  int32_t block_size = 16;
  int32_t max_model_len = 0;
  bool no_prefix_caching = false;
  KvLayoutArgs kv_layout;
  int32_t max_tokens = 128;
  float temperature = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  int64_t seed = -1;
  bool ignore_eos = false;
  bool sequential = false;
};

// One input line, parsed, and later its result.
struct Job {
  size_t index = 0;     // record number (0-based, blank lines skipped)
  int64_t line_no = 0;  // 1-based line in the input file
  json id;              // as given; null when absent
  std::vector<int32_t> prompt;
  SamplingParams params;
  int32_t priority = 0;
  std::string error;    // set: this line produces an error record
  // Filled while generating.
  engine::RequestId request = 0;
  Clock::time_point submitted{};
  std::vector<int32_t> output;
  std::string text;
  engine::FinishReason finish_reason = engine::FinishReason::kNone;
  double ttft_s = 0;
  double e2e_s = 0;
  int32_t cached_prompt_tokens = 0;
  bool done = false;
};

// Parses one line into `job` (prompt tokenized, parameters defaulted from the command line).
// Sets job.error on any problem. The sampling fields are the server's (request/sampling_json.h:
// the same names, types and ranges); whether the request can run is the engine's
// validate_request at submit. Unknown fields are errors so that a misspelt "max_token" does not
// silently run with the default.
void parse_line(const std::string& line, const GenerateArgs& a, const Tokenizer& tokenizer,
                int32_t max_model_len, Job& job) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    job.error = "invalid JSON";
    return;
  }
  if (!j.is_object()) {
    job.error = "the line must be a JSON object";
    return;
  }
  if (auto it = j.find("id"); it != j.end()) job.id = *it;
  std::string& err = job.error;
  for (const auto& [key, v] : j.items()) {
    if (key != "id" && key != "prompt" && key != "prompt_token_ids" && key != "priority" &&
        !is_sampling_field(key)) {
      err = fmt::format("unknown field '{}'", key);
      return;
    }
  }

  SamplingParams& p = job.params;
  p.temperature = a.temperature;
  p.top_k = a.top_k;
  p.top_p = a.top_p;
  p.min_p = a.min_p;
  // Each request gets its own stream, derived from its position, so runs are reproducible and
  // batched and sequential runs draw the same tokens.
  p.seed = static_cast<uint64_t>(a.seed) + job.index;
  p.ignore_eos = a.ignore_eos;
  SamplingFieldsGiven given;
  if (auto e = read_sampling_params(j, p, &given)) {
    err = e->message;
    return;
  }
  std::optional<int64_t> priority;
  if (auto e = read_integer(j, "priority", std::numeric_limits<int32_t>::min(),
                            std::numeric_limits<int32_t>::max(), priority)) {
    err = e->message;
    return;
  }
  if (priority) job.priority = static_cast<int32_t>(*priority);

  const bool has_text = json_present(j, "prompt");
  const bool has_ids = json_present(j, "prompt_token_ids");
  if (has_text && has_ids) {
    err = "give either 'prompt' or 'prompt_token_ids', not both";
    return;
  }
  if (has_text) {
    if (!j.at("prompt").is_string()) {
      err = "'prompt' must be a string";
      return;
    }
    job.prompt = tokenizer.encode(j.at("prompt").get<std::string>(), /*add_special=*/true,
                                  /*parse_special=*/true);
  } else if (has_ids) {
    if (auto e = read_token_ids(j.at("prompt_token_ids"), "prompt_token_ids", job.prompt, true)) {
      err = e->message;
      return;
    }
  } else {
    err = "missing 'prompt' or 'prompt_token_ids'";
    return;
  }
  // The command-line default shrinks to what the context leaves; an explicit max_tokens that does
  // not fit is the engine's validation error at submit, as the user asked for something
  // impossible (so is a prompt that leaves no room at all).
  if (!given.max_tokens) {
    const int64_t room = std::max<int64_t>(max_model_len - static_cast<int64_t>(job.prompt.size()), 0);
    p.max_tokens = static_cast<int32_t>(std::min<int64_t>(a.max_tokens, room));
  }
}

// Serializes results in input order as they complete: a result is written once every earlier
// line's result has been.
class OrderedWriter {
 public:
  OrderedWriter(std::ostream& out, std::vector<Job>& jobs) : out_(out), jobs_(jobs) {}

  void flush_ready() {
    while (next_ < jobs_.size() && jobs_[next_].done) write(jobs_[next_++]);
    out_.flush();
  }
  bool ok() const { return static_cast<bool>(out_); }

 private:
  void write(const Job& j) {
    ojson o;
    o["id"] = j.id;
    o["index"] = j.index;
    if (!j.error.empty()) {
      o["error"] = j.error;
    } else {
      o["text"] = j.text;
      o["token_ids"] = j.output;
      o["prompt_tokens"] = j.prompt.size();
      o["completion_tokens"] = j.output.size();
      o["cached_prompt_tokens"] = j.cached_prompt_tokens;
      o["finish_reason"] = engine::to_string(j.finish_reason);
      o["ttft_s"] = j.ttft_s;
      o["e2e_s"] = j.e2e_s;
    }
    // Generated text is valid UTF-8 (the detokenizer replaces bad bytes), but the id and error
    // echo user input, which may not be: replace rather than throw.
    out_ << o.dump(-1, ' ', false, ojson::error_handler_t::replace) << '\n';
  }

  std::ostream& out_;
  std::vector<Job>& jobs_;
  size_t next_ = 0;
};

// Progress on stderr: a bar redrawn in place on a terminal, a plain line every 10 s otherwise.
class Progress {
 public:
  Progress(size_t total, bool tty)
      : total_(total), tty_(tty), start_(Clock::now()), last_(start_) {}

  void update(size_t done, int64_t generated, const engine::EngineStats& s, bool force = false) {
    const auto now = Clock::now();
    const double since_draw = seconds_between(last_, now);
    if (!force && since_draw < (tty_ ? 0.2 : 10.0)) return;
    last_ = now;
    const double t = seconds_between(start_, now);
    const std::string stats =
        fmt::format("{}/{} done, {:.1f} s, {:.1f} tok/s, running {}, waiting {}, KV {:.0f}%", done,
                    total_, t, t > 0 ? static_cast<double>(generated) / t : 0.0, s.num_running,
                    s.num_waiting, s.kv_usage * 100);
    if (tty_) {
      constexpr size_t kWidth = 30;
      const size_t filled = total_ ? done * kWidth / total_ : kWidth;
      fmt::print(stderr, "\r[{}{}] {}\x1b[K", std::string(filled, '#'),
                 std::string(kWidth - filled, '.'), stats);
    } else {
      fmt::print(stderr, "generate: {}\n", stats);
    }
  }
  void finish() {
    if (tty_) fmt::print(stderr, "\n");
  }

 private:
  size_t total_;
  bool tty_;
  Clock::time_point start_;
  Clock::time_point last_{};
};

// Totals for the summary.
struct RunTotals {
  size_t completed = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t peak_kv_used_bytes = 0;  // EngineStats::kv_used_bytes after a step, at most
};

// Applies one step's outputs to the jobs; returns how many finished.
size_t apply_outputs(std::vector<engine::RequestOutput>& outputs,
                     std::unordered_map<engine::RequestId, Job*>& live, RunTotals& totals,
                     Clock::time_point now) {
  size_t finished = 0;
  for (engine::RequestOutput& out : outputs) {
    auto it = live.find(out.id);
    if (it == live.end()) continue;
    Job& j = *it->second;
    j.output.insert(j.output.end(), out.new_token_ids.begin(), out.new_token_ids.end());
    j.text += out.text;
    totals.generated_tokens += static_cast<int64_t>(out.new_token_ids.size());
    if (!out.finished) continue;
    j.finish_reason = out.finish_reason;
    if (out.finish_reason == engine::FinishReason::kError)
      j.error = fmt::format("line {}: generation failed: {}", j.line_no, out.error);
    j.ttft_s = out.metrics.ttft_s;
    j.e2e_s = seconds_between(j.submitted, now);
    j.cached_prompt_tokens = out.metrics.num_cached_prompt_tokens;
    j.done = true;
    if (j.error.empty()) {
      ++totals.completed;
      totals.prompt_tokens += static_cast<int64_t>(j.prompt.size());
      totals.cached_prompt_tokens += j.cached_prompt_tokens;
    }
    live.erase(it);
    ++finished;
  }
  return finished;
}

// Submits `job` to the engine; a validation error becomes the job's error record.
bool submit(engine::EngineCore& engine, Job& job,
            std::unordered_map<engine::RequestId, Job*>& live) {
  job.submitted = Clock::now();
  auto id = engine.add_request(job.prompt, job.params, job.priority);
  if (!id) {
    job.error = fmt::format("line {}: {}", job.line_no, id.error());
    job.done = true;
    return false;
  }
  job.request = *id;
  live.emplace(*id, &job);
  return true;
}

// Steps the engine until it is idle, writing results as they complete.
Status drain(engine::EngineCore& engine, std::unordered_map<engine::RequestId, Job*>& live,
             RunTotals& totals, size_t& done, OrderedWriter& writer, Progress& progress) {
  while (engine.has_work()) {
    std::vector<engine::RequestOutput> outputs = engine.step();
    const size_t finished = apply_outputs(outputs, live, totals, Clock::now());
    if (finished > 0) {
      done += finished;
      writer.flush_ready();
      if (!writer.ok()) return make_error("cannot write the output");
    }
    const engine::EngineStats st = engine.stats();
    totals.peak_kv_used_bytes = std::max(totals.peak_kv_used_bytes, st.kv_used_bytes);
    progress.update(done, totals.generated_tokens, st);
  }
  return {};
}

int fail(const std::string& message) {
  fmt::print(stderr, "generate: {}\n", message);
  return 1;
}

int run_generate(GenerateArgs a) {
  // Inputs and outputs first, so that a wrong path fails before the model loads.
  std::ifstream in_file;
  if (a.input != "-") {
    in_file.open(a.input);
    if (!in_file) return fail(fmt::format("cannot open the input '{}'", a.input));
  }
  std::istream& in = a.input == "-" ? std::cin : in_file;
  std::ofstream out_file;
  if (a.output != "-") {
    out_file.open(a.output, std::ios::out | std::ios::trunc);
    if (!out_file) return fail(fmt::format("cannot open the output '{}'", a.output));
  }
  std::ostream& out = a.output == "-" ? std::cout : out_file;
  if (a.seed < 0) {
    a.seed = static_cast<int64_t>(std::random_device{}() & 0x7fffffff);
    fmt::print(stderr, "generate: base seed {} (request i uses seed {} + i; pass --seed to fix)\n",
               a.seed, a.seed);
  }

  const auto t_load = Clock::now();
  const int threads = resolve_threads(a.backend.threads);
  auto created = create_backends(a.backend);
  if (!created) return fail(created.error());
  Backends backends = std::move(*created);
  kernels::Backend* backend = backends.main.get();
  auto job = start_job(a.parallel);
  if (!job) return fail(job.error());
  auto model = model::Model::open(a.model, *backend,
                                  {.world = job->world.get(), .parallel = job->config,
                                   .expert_offload = backends.expert_offload()});
  if (!model) return fail(model.error());
  if (std::optional<int> code = serve_if_worker(**model)) return *code;
  auto tokenizer = Tokenizer::from_gguf((*model)->file());
  if (!tokenizer) return fail(tokenizer.error());
  const model::ModelConfig& mc = (*model)->config();

  engine::EngineConfig ec;
  ec.enable_prefix_caching = !a.no_prefix_caching;
  if (Status st = apply_kv_layout_options(a.kv_layout, ec); !st) return fail(st.error());
  ec.max_num_batched_tokens = a.max_num_batched_tokens;
  ec.max_num_seqs = a.max_num_seqs;
  ec.max_model_len = a.max_model_len;
  if (a.block_size < 1) return fail("--block-size must be >= 1");
  ec.block_size = a.block_size;
  ec.kv_type = a.kv_cache_type;
  ec.speculative = a.speculative;
  auto block_bytes = kv_block_bytes(mc, ec);
  if (!block_bytes) return fail(block_bytes.error());
  auto tiers = kv_tier_config(a.kv_tiers);  // before sizing: tiers turn the window group off
  if (!tiers) return fail(tiers.error());
  ec.kv_tiers = *tiers;
  if (!a.kv_cache_memory.empty()) {
    auto blocks = kv_blocks_for_memory(mc, ec, a.kv_cache_memory);
    if (!blocks) return fail(blocks.error());
    ec.num_kv_blocks = *blocks;
  }
  auto engine = engine::EngineCore::create(**model, **tokenizer, ec);
  if (!engine) return fail(engine.error());
  const engine::EngineConfig& cfg = (*engine)->config();
  const double load_s = seconds_between(t_load, Clock::now());

  const int64_t blocks_per_seq = (cfg.max_model_len + cfg.block_size - 1) / cfg.block_size;
  fmt::print(stderr, "generate: {} ({}), {} threads, loaded in {:.1f} s\n",
             mc.name.empty() ? a.model : mc.name, mc.architecture, threads, load_s);
  fmt::print(stderr,
             "generate: KV cache {} blocks x {} tokens ({:.1f} MiB, {}): {} sequences of the maximum "
             "length {} fit; max {} sequences, {} tokens per step, prefix caching {}\n",
             cfg.num_kv_blocks, cfg.block_size,
             static_cast<double>((*engine)->kv_cache_bytes()) / (1024.0 * 1024.0),
             kv_cache_type_name(cfg.kv_type), cfg.num_kv_blocks / blocks_per_seq, cfg.max_model_len, cfg.max_num_seqs,
             cfg.max_num_batched_tokens, cfg.enable_prefix_caching ? "on" : "off");

  // Read and parse every line up front: parsing errors are known before any work starts.
  std::vector<Job> jobs;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines: no record
    Job& j = jobs.emplace_back();
    j.index = jobs.size() - 1;
    j.line_no = line_no;
    parse_line(line, a, **tokenizer, cfg.max_model_len, j);
    if (!j.error.empty()) {
      j.error = fmt::format("line {}: {}", line_no, j.error);
      j.done = true;
    }
  }
  if (in.bad()) return fail(fmt::format("cannot read the input '{}'", a.input));

  OrderedWriter writer(out, jobs);
  Progress progress(jobs.size(), ::isatty(STDERR_FILENO) != 0);
  std::unordered_map<engine::RequestId, Job*> live;
  RunTotals totals;
  size_t done = 0;
  for (const Job& j : jobs) done += j.done ? 1 : 0;

  const auto t_start = Clock::now();
  if (a.sequential) {
    for (Job& j : jobs) {
      if (j.done) continue;
      if (!submit(**engine, j, live)) {
        ++done;
      } else if (Status s = drain(**engine, live, totals, done, writer, progress); !s) {
        return fail(s.error());
      }
    }
  } else {
    for (Job& j : jobs)
      if (!j.done && !submit(**engine, j, live)) ++done;
  }
  if (Status s = drain(**engine, live, totals, done, writer, progress); !s) return fail(s.error());
  const double wall_s = seconds_between(t_start, Clock::now());
  writer.flush_ready();
  progress.update(done, totals.generated_tokens, (*engine)->stats(), /*force=*/true);
  progress.finish();
  if (!writer.ok()) return fail("cannot write the output");

  const size_t errors = jobs.size() - totals.completed;
  const engine::EngineStats st = (*engine)->stats();
  const auto per_s = [wall_s](double x) { return wall_s > 0 ? x / wall_s : 0.0; };
  fmt::print(stderr, "generate: {} mode, {} requests: {} completed, {} errors\n",
             a.sequential ? "sequential" : "batched", jobs.size(), totals.completed, errors);
  fmt::print(stderr, "generate: wall {:.2f} s, {:.2f} requests/s\n", wall_s,
             per_s(static_cast<double>(totals.completed)));
  fmt::print(stderr, "generate: prompt    {:8} tokens, {:10.1f} tokens/s\n", totals.prompt_tokens,
             per_s(static_cast<double>(totals.prompt_tokens)));
  fmt::print(stderr, "generate: generated {:8} tokens, {:10.1f} tokens/s\n",
             totals.generated_tokens, per_s(static_cast<double>(totals.generated_tokens)));
  // Per-request first-admission hits: the engine's query counters also count the re-queries of
  // requests that wait for room, which would understate the rate.
  fmt::print(stderr, "generate: prefix cache hit {:.1f}% of prompt tokens ({} of {})\n",
             totals.prompt_tokens
                 ? 100.0 * static_cast<double>(totals.cached_prompt_tokens) /
                       static_cast<double>(totals.prompt_tokens)
                 : 0.0,
             totals.cached_prompt_tokens, totals.prompt_tokens);
  if (a.speculative.enabled()) fmt::print(stderr, "generate: {}\n", speculative_summary(st));
  fmt::print(stderr, "generate: preemptions {}, steps {}, mean TTFT {:.3f} s\n",
             st.num_preemptions, st.num_steps, st.ttft.mean_s());
  fmt::print(stderr, "generate: KV in use at peak {:.2f} MiB (blocks held by live requests, "
             "after each step)\n", static_cast<double>(totals.peak_kv_used_bytes) / (1024.0 * 1024.0));
  return 0;
}

}  // namespace

Command generate_command() {
  auto args = std::make_shared<GenerateArgs>();
  Command c;
  c.name = "generate";
  c.add = [args](CLI::App& app) {
    auto* sub = app.add_subcommand(
        "generate", "Offline batch generation: JSONL requests in, JSONL results out");
    sub->add_option("-m,--model", args->model, "GGUF model file")->required();
    add_backend_options(*sub, args->backend);
    add_parallel_options(*sub, args->parallel);
    sub->add_option("--input", args->input, "Requests, one JSON object per line ('-': stdin)")
        ->required();
    sub->add_option("--output", args->output, "Results, one JSON object per line ('-': stdout)")
        ->required();
    sub->add_option("--max-num-seqs", args->max_num_seqs, "Requests running at once at most")
        ->capture_default_str();
    sub->add_option("--max-num-batched-tokens", args->max_num_batched_tokens,
                    "Tokens per engine step at most")
        ->capture_default_str();
    sub->add_option("--kv-cache-memory", args->kv_cache_memory,
                    "KV cache size, e.g. 1GiB, 512MiB or bytes (default: room for "
                    "min(max-num-seqs, 8) maximum-length sequences)");
    add_kv_cache_type_option(*sub, args->kv_cache_type);
    add_kv_tier_options(*sub, args->kv_tiers);
    add_speculative_options(*sub, args->speculative);
    sub->add_option("--block-size", args->block_size, "Tokens per KV block")
        ->capture_default_str();
    sub->add_option("--max-model-len", args->max_model_len,
                    "Prompt + output tokens at most (default: the model's context, at most 4096)");
    sub->add_flag("--no-prefix-caching", args->no_prefix_caching, "Disable prefix caching");
    add_kv_layout_options(*sub, args->kv_layout);
    sub->add_option("--max-tokens", args->max_tokens, "Default tokens to generate per request")
        ->capture_default_str();
    sub->add_option("--temp", args->temperature, "Default temperature (0 = greedy)")
        ->capture_default_str();
    sub->add_option("--top-k", args->top_k, "Default top-k (0 = off)")->capture_default_str();
    sub->add_option("--top-p", args->top_p, "Default top-p (1 = off)")->capture_default_str();
    sub->add_option("--min-p", args->min_p, "Default min-p (0 = off)")->capture_default_str();
    sub->add_option("--seed", args->seed,
                    "Base seed: request i uses seed + i unless it sets one (default: random)");
    sub->add_flag("--ignore-eos", args->ignore_eos,
                  "By default, keep generating after end-of-generation tokens");
    sub->add_flag("--sequential", args->sequential,
                  "Run the requests one at a time (same engine), for comparison");
  };
  c.run = [args] { return run_generate(*args); };
  return c;
}

}  // namespace cadenza::cli
