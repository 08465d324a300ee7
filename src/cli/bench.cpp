// `cadenza bench`: single-request prompt (pp) and generation (tg) speed, like llama-bench, plus
// decode bandwidth against a read-bandwidth probe measured in the same run.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "loadgen/bench_serve_cli.h"
#include "model/model.h"
#include "model/session.h"
#include "util/bandwidth.h"

namespace cadenza::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
  std::string model;
  int32_t n_prompt = 512;
  int32_t n_gen = 128;
  int repetitions = 5;
  int threads = 0;
  bool json = false;
  bool no_probe = false;
  std::function<std::optional<int>()> serve;  // `bench serve` / `bench compare` (loadgen)
};

struct Stats {
  double median = 0, min = 0, max = 0, stddev = 0;
};

Stats summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.max = v.back();
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(n);
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  s.stddev = n > 1 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0;
  return s;
}

// Bytes of weights one decode step reads: every tensor once, except the embedding table of which
// only one row is read (unless it doubles as the output projection).
uint64_t decode_weight_bytes(const gguf::GgufFile& file) {
  const bool tied = file.find_tensor("output.weight") == nullptr;
  uint64_t total = 0;
  for (const auto& t : file.tensors()) {
    if (t.name == "token_embd.weight" && !tied) {
      total += t.shape.empty() || t.rows() == 0 ? 0 : t.nbytes / static_cast<uint64_t>(t.rows());
    } else {
      total += t.nbytes;
    }
  }
  return total;
}

// Deterministic pseudo-random token ids (avoiding id 0..2, often special).
std::vector<int32_t> bench_tokens(int32_t n, int32_t n_vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t s = 0x2545F4914F6CDD1DULL;
  for (auto& id : ids) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    id = 3 + static_cast<int32_t>(s % static_cast<uint64_t>(std::max(1, n_vocab - 3)));
  }
  return ids;
}

int run_bench(const BenchArgs& a) {
  auto opened = gguf::GgufFile::open(a.model);
  if (!opened) {
    fmt::print(stderr, "bench: {}\n", opened.error());
    return 1;
  }
  std::shared_ptr<const gguf::GgufFile> file = std::move(*opened);
  const int threads =
      a.threads > 0 ? a.threads : static_cast<int>(std::thread::hardware_concurrency());
  auto backend = kernels::make_cpu_backend({.n_threads = threads});
  auto model = model::Model::load(file, *backend);
  if (!model) {
    fmt::print(stderr, "bench: {}\n", model.error());
    return 1;
  }
  const int32_t n_vocab = static_cast<int32_t>((*model)->config().n_vocab);
  auto session = model::Session::create(**model, {.max_tokens = std::max(a.n_prompt, a.n_gen) + 16});
  if (!session) {
    fmt::print(stderr, "bench: {}\n", session.error());
    return 1;
  }
  auto& s = **session;

  // Warm-up: faults in the weights and sizes the scratch buffers.
  {
    auto tokens = bench_tokens(std::clamp(a.n_prompt, 1, 32), n_vocab);
    if (auto r = s.eval(tokens); !r) {
      fmt::print(stderr, "bench: {}\n", r.error());
      return 1;
    }
    s.reset();
  }

  std::vector<double> pp, tg;
  const auto prompt = bench_tokens(a.n_prompt, n_vocab);
  for (int r = 0; r < a.repetitions; ++r) {
    if (a.n_prompt > 0) {
      s.reset();
      const auto t0 = Clock::now();
      if (auto res = s.eval(prompt); !res) {
        fmt::print(stderr, "bench: {}\n", res.error());
        return 1;
      }
      pp.push_back(a.n_prompt / std::chrono::duration<double>(Clock::now() - t0).count());
    }
    if (a.n_gen > 0) {
      s.reset();
      int32_t token = prompt.empty() ? 3 : prompt[0];
      const auto t0 = Clock::now();
      for (int32_t i = 0; i < a.n_gen; ++i) {
        auto res = s.eval({&token, 1});
        if (!res) {
          fmt::print(stderr, "bench: {}\n", res.error());
          return 1;
        }
        token = 3 + (token * 7919 + i) % std::max(1, n_vocab - 3);
      }
      tg.push_back(a.n_gen / std::chrono::duration<double>(Clock::now() - t0).count());
    }
  }
  const Stats pps = summarize(pp), tgs = summarize(tg);
  const uint64_t step_bytes = decode_weight_bytes(*file);
  const double decode_gbs = tgs.median * static_cast<double>(step_bytes) / 1e9;
  BandwidthResult probe;
  if (!a.no_probe) probe = measure_read_bandwidth(size_t{1} << 30, threads, 5);

  const auto& cfg = (*model)->config();
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = a.model;
    j["architecture"] = cfg.architecture;
    j["file_bytes"] = file->file_size();
    j["decode_weight_bytes"] = step_bytes;
    j["backend"] = std::string(backend->name());
    j["threads"] = threads;
    j["repetitions"] = a.repetitions;
    auto stats = [](const Stats& st) {
      return nlohmann::ordered_json{{"median", st.median}, {"min", st.min}, {"max", st.max},
                                    {"stddev", st.stddev}};
    };
    if (a.n_prompt > 0) j["pp"] = {{"tokens", a.n_prompt}, {"tokens_per_s", stats(pps)}};
    if (a.n_gen > 0) j["tg"] = {{"tokens", a.n_gen}, {"tokens_per_s", stats(tgs)}};
    j["decode_gb_per_s"] = decode_gbs;
    if (!a.no_probe) {
      j["probe_gb_per_s"] = probe.gb_per_s;
      j["decode_fraction_of_probe"] = probe.gb_per_s > 0 ? decode_gbs / probe.gb_per_s : 0.0;
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("model:   {} ({}, {:.1f} MiB, {:.1f} MiB read per decode step)\n", a.model,
             cfg.architecture, file->file_size() / 1048576.0, step_bytes / 1048576.0);
  fmt::print("backend: {}, {} threads, {} repetitions\n", backend->name(), threads,
             a.repetitions);
  fmt::print("| test   |     t/s (median) |   min  |   max  | stddev |\n");
  fmt::print("|--------|------------------|--------|--------|--------|\n");
  if (a.n_prompt > 0)
    fmt::print("| pp{:<4} | {:16.2f} | {:6.2f} | {:6.2f} | {:6.2f} |\n", a.n_prompt, pps.median,
               pps.min, pps.max, pps.stddev);
  if (a.n_gen > 0)
    fmt::print("| tg{:<4} | {:16.2f} | {:6.2f} | {:6.2f} | {:6.2f} |\n", a.n_gen, tgs.median,
               tgs.min, tgs.max, tgs.stddev);
  if (a.n_gen > 0) {
    fmt::print("decode:  {:.2f} GB/s of weights", decode_gbs);
    if (!a.no_probe)
      fmt::print(" = {:.0f}% of the {:.2f} GB/s read-bandwidth probe ({} threads)",
                 100.0 * decode_gbs / probe.gb_per_s, probe.gb_per_s, threads);
    fmt::print("\n");
  }
  return 0;
}

}  // namespace

Command bench_command() {
  auto args = std::make_shared<BenchArgs>();
  Command c;
  c.name = "bench";
  c.add = [args](CLI::App& app) {
    auto* sub = app.add_subcommand("bench", "Measure prompt and generation speed of a model");
    sub->add_option("-m,--model", args->model, "GGUF model file (required without a subcommand)");
    sub->add_option("-p,--n-prompt", args->n_prompt, "Prompt tokens (pp test; 0 = skip)")
        ->capture_default_str();
    sub->add_option("-n,--n-gen", args->n_gen, "Generated tokens (tg test; 0 = skip)")
        ->capture_default_str();
    sub->add_option("-r,--repetitions", args->repetitions, "Repetitions per test")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    sub->add_option("-t,--threads", args->threads, "Threads (default: all cores)");
    sub->add_flag("--json", args->json, "Print the results as JSON");
    sub->add_flag("--no-probe", args->no_probe, "Skip the memory-bandwidth probe");
    args->serve = loadgen::add_bench_serve(*sub);
  };
  c.run = [args] {
    if (auto rc = args->serve()) return *rc;
    if (args->model.empty()) {
      fmt::print(stderr, "bench: --model is required\n");
      return 2;
    }
    return run_bench(*args);
  };
  return c;
}

}  // namespace cadenza::cli
