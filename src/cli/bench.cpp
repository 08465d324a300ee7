// `cadenza bench`: single-request prompt (pp) and generation (tg) speed, like llama-bench, plus
// decode bandwidth against a read-bandwidth probe and prefill multiply-adds against the compute
// peaks (kernels/simd/peak_probe.h), both measured in the same run.
#include <algorithm>
#include <optional>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/bench_prompt.h"
#include "cli/bench_verify.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/parallel.h"
#include "util/resident_memory.h"
#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/backend_factory.h"
#include "kernels/simd/isa.h"
#include "kernels/simd/peak_probe.h"
#include "loadgen/bench_serve_cli.h"
#include "loadgen/stats.h"
#include "model/model.h"
#include "model/session.h"
#include "util/bandwidth.h"
#include "util/thread_pool.h"

namespace cadenza::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
  ParallelArgs parallel;
  std::string model;
  int32_t n_prompt = 512;
  int32_t n_gen = 128;
  // -d/--n-depth: tokens already in the context (KV cache) when the pp and tg tests start, as
  // llama-bench's -d: filled once, untimed; each test rewinds to it.
  int32_t n_depth = 0;
  int repetitions = 5;
  BackendArgs backend;  // -t, --device, --no-repack
  bool json = false;
  bool no_probe = false;
  bool no_peak = false;  // --no-peak: skip the compute-peak probes
  int64_t experts_per_token = 0;  // 0: the file's
  int32_t batch = 0;  // --batch N: also decode N sequences per step (tgN); 0: skip
  DType kv_cache_type = DType::F16;
  std::string prompt_file;               // --prompt-file: tg through the engine (bench_prompt.h)
  engine::SpeculativeConfig speculative;  // ... with these speculative options
  // --verify-curve (bench_verify.h): instead of pp/tg, the step time of P positions per sequence.
  bool verify_curve = false;
  std::string verify_positions = "1-8", verify_batch = "1,8";
  int32_t verify_depth = 512;
  VerifyCurveArgs verify;  // parsed from the four above by the command's run
  std::function<std::optional<int>()> serve;  // `bench serve` / `bench compare` (loadgen)
};

// Median, min, max and sample standard deviation of the repetitions (one summary for every bench
// mode and `bench serve`).
using Stats = loadgen::Distribution;
using loadgen::summarize;

// Bytes of weights one decode step reads: every tensor once, except the embedding table of which
// only one row is read (unless it doubles as the output projection) and expert tensors (*_exps),
// of which one token reads experts_used of n_experts matrices.
uint64_t decode_weight_bytes(const gguf::GgufFile& file, const model::ModelConfig& cfg) {
  const bool tied = file.find_tensor("output.weight") == nullptr;
  uint64_t total = 0;
  for (const auto& t : file.tensors()) {
    if (t.name == "token_embd.weight" && !tied) {
      total += t.shape.empty() || t.rows() == 0 ? 0 : t.nbytes / static_cast<uint64_t>(t.rows());
    } else if (cfg.n_experts > 0 && t.name.ends_with("_exps.weight")) {
      total += t.nbytes / static_cast<uint64_t>(cfg.n_experts) *
               static_cast<uint64_t>(cfg.n_experts_used);
    } else {
      total += t.nbytes;
    }
  }
  return total;
}

// Multiply-adds per token from the weight shapes: every matmul weight (a ".weight" tensor of two or
// more dimensions) once, rows * cols, except the embedding table (a lookup) and expert tensors
// (*_exps), of which a token uses experts_used of n_experts matrices; the output head (output.weight,
// or the embedding table when tied) apart, since a prompt computes it for its last token only.
// Attention (scores and the weighted sum over the context) is not in these: see attention_macs.
struct TokenMacs {
  uint64_t matmul = 0;  // per token, without the output head
  uint64_t head = 0;    // the output head, per logit row
};
TokenMacs token_macs(const gguf::GgufFile& file, const model::ModelConfig& cfg) {
  const bool tied = file.find_tensor("output.weight") == nullptr;
  TokenMacs m;
  for (const auto& t : file.tensors()) {
    if (t.shape.size() < 2 || !t.name.ends_with(".weight")) continue;
    const auto elements = static_cast<uint64_t>(t.num_elements());
    if (t.name == "token_embd.weight") {
      if (tied) m.head += elements;
    } else if (t.name == "output.weight") {
      m.head += elements;
    } else if (cfg.n_experts > 0 && t.name.ends_with("_exps.weight")) {
      m.matmul += elements / static_cast<uint64_t>(cfg.n_experts) *
                  static_cast<uint64_t>(cfg.n_experts_used);
    } else {
      m.matmul += elements;
    }
  }
  return m;
}

// Multiply-adds of attention per prompt token, averaged over a causal prompt of n tokens after
// `depth` tokens already in the cache: token t (depth <= t < depth + n) scores t+1 positions (at most the window on sliding-window layers) with
// head_dim_k and sums as many values of head_dim_v, per head and layer. An estimate from the
// configuration (the kernels' exact work differs in padding and, for latent attention, in form).
double attention_macs(const model::ModelConfig& cfg, int64_t n, int64_t depth = 0) {
  if (n <= 0) return 0.0;
  double total = 0.0;
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    const int64_t w = cfg.attention_window(l);
    double positions = 0.0;  // sum over t of the positions token t attends to
    for (int64_t t = depth; t < depth + n; ++t) positions += static_cast<double>(w > 0 ? std::min(t + 1, w) : t + 1);
    total += positions * static_cast<double>(cfg.n_heads) *
             static_cast<double>(cfg.head_dim_k + cfg.head_dim_v);
  }
  return total / static_cast<double>(n);
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

struct MoeStep {
  uint64_t matrices = 0, bytes = 0;  // expert matrices matmul_experts read in the step
};

// One decode step of `n_seqs` sequences (one token each, after a 1-token prefill each), counting
// the expert matrices the CPU backend reads (kernels::cpu::expert_counters). Runs after the
// routing counters were snapshotted, so they cover the pp/tg runs only.
Result<MoeStep> measure_moe_step(model::Model& m, int n_seqs) {
  const int32_t block = 16;
  auto kv = m.create_kv_cache({.num_blocks = n_seqs, .block_size = block, .num_state_slots = n_seqs});
  if (!kv) return kv.error_value();
  const int32_t n_vocab = static_cast<int32_t>(m.config().n_vocab);
  const auto ids = bench_tokens(2 * n_seqs, n_vocab);
  std::vector<int32_t> tables(static_cast<size_t>(n_seqs));
  std::vector<std::span<const int32_t>> table_spans;
  for (int i = 0; i < n_seqs; ++i) tables[static_cast<size_t>(i)] = i;
  for (int i = 0; i < n_seqs; ++i) table_spans.emplace_back(&tables[static_cast<size_t>(i)], 1);
  std::vector<int32_t> seq(static_cast<size_t>(n_seqs)), rows(static_cast<size_t>(n_seqs));
  for (int i = 0; i < n_seqs; ++i) seq[static_cast<size_t>(i)] = rows[static_cast<size_t>(i)] = i;
  std::vector<float> logits(static_cast<size_t>(n_seqs) * static_cast<size_t>(n_vocab));
  kernels::cpu::ExpertCounters before{};
  for (int32_t pos = 0; pos < 2; ++pos) {
    const std::vector<int32_t> tokens(ids.begin() + pos * n_seqs, ids.begin() + (pos + 1) * n_seqs);
    const std::vector<int32_t> positions(static_cast<size_t>(n_seqs), pos);
    model::Batch b{tokens, positions, seq, table_spans, rows};
    if (pos == 1) before = kernels::cpu::expert_counters();
    if (Status st = m.forward(b, **kv, logits); !st) return st.error_value();
  }
  const kernels::cpu::ExpertCounters after = kernels::cpu::expert_counters();
  return MoeStep{after.matrices - before.matrices, after.bytes - before.bytes};
}

// Decode of `n_seqs` sequences in lock-step: a 1-token prefill each, then `steps` steps of one
// token per sequence. Returns generated tokens per second (all sequences) over the steps.
Result<double> measure_batched_decode(model::Model& m, int n_seqs, int steps) {
  const int32_t block = 16;
  const int32_t blocks_per_seq = (steps + 1 + block - 1) / block;
  auto kv = m.create_kv_cache(
      {.num_blocks = n_seqs * blocks_per_seq, .block_size = block, .num_state_slots = n_seqs});
  if (!kv) return kv.error_value();
  if (Status st = m.reserve({.max_tokens = n_seqs, .max_logit_rows = n_seqs,
                             .max_sequences = n_seqs, .max_blocks_per_sequence = blocks_per_seq});
      !st) {
    return st.error_value();
  }
  const int32_t n_vocab = static_cast<int32_t>(m.config().n_vocab);
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(n_seqs));
  std::vector<std::span<const int32_t>> spans;
  for (int i = 0; i < n_seqs; ++i) {
    for (int b = 0; b < blocks_per_seq; ++b) tables[static_cast<size_t>(i)].push_back(i * blocks_per_seq + b);
    spans.emplace_back(tables[static_cast<size_t>(i)]);
  }
  std::vector<int32_t> seq(static_cast<size_t>(n_seqs)), rows(static_cast<size_t>(n_seqs));
  for (int i = 0; i < n_seqs; ++i) seq[static_cast<size_t>(i)] = rows[static_cast<size_t>(i)] = i;
  std::vector<float> logits(static_cast<size_t>(n_seqs) * static_cast<size_t>(n_vocab));
  std::vector<int32_t> tokens = bench_tokens(n_seqs, n_vocab);
  Clock::time_point t0;
  for (int32_t pos = 0; pos <= steps; ++pos) {
    if (pos == 1) t0 = Clock::now();  // the prefill step is not timed
    const std::vector<int32_t> positions(static_cast<size_t>(n_seqs), pos);
    if (Status st = m.forward({tokens, positions, seq, spans, rows}, **kv, logits); !st) {
      return st.error_value();
    }
    for (auto& t : tokens) t = 3 + (t * 7919 + pos) % std::max(1, n_vocab - 3);
  }
  return n_seqs * steps / std::chrono::duration<double>(Clock::now() - t0).count();
}

// Seconds the driver spent communicating so far (0 in one process).
double comm_seconds(const model::Model& m) {
  const model::Distributed* d = m.distributed();
  if (!d) return 0;
  const dist::CommStats s = d->comm_stats();
  double sum = 0;
  for (const dist::OpStats& op : s.ops) sum += op.seconds;
  return sum;
}

// Per layer: tokens routed and the min / mean / max share of one expert (percent of the layer's
// routed tokens; uniform routing gives 100 / n_experts each).
void print_routing(const model::ModelConfig& cfg, const std::vector<uint64_t>& counts,
                   const MoeStep& step) {
  fmt::print("experts: {} per token of {} (routing over the pp/tg runs)\n", cfg.n_experts_used,
             cfg.n_experts);
  fmt::print("| layer | tokens routed | min share | mean share | max share |\n");
  fmt::print("|-------|---------------|-----------|------------|-----------|\n");
  uint64_t all = 0;
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    const auto first = counts.begin() + l * cfg.n_experts;
    uint64_t total = 0, lo = UINT64_MAX, hi = 0;
    for (auto it = first; it != first + cfg.n_experts; ++it) {
      total += *it;
      lo = std::min(lo, *it);
      hi = std::max(hi, *it);
    }
    all += total;
    const double t = total > 0 ? static_cast<double>(total) : 1.0;
    fmt::print("| {:5} | {:13} | {:8.2f}% | {:9.2f}% | {:8.2f}% |\n", l, total, 100.0 * lo / t,
               100.0 / static_cast<double>(cfg.n_experts), 100.0 * hi / t);
  }
  fmt::print("total:   {} (token, expert) routings\n", all);
  fmt::print("decode step at 16 sequences: {} expert matrices read once each, {:.1f} MiB of "
             "expert weights\n", step.matrices, static_cast<double>(step.bytes) / 1048576.0);
}

int run_bench(const BenchArgs& a) {
  auto opened = gguf::GgufFile::open(a.model);
  if (!opened) {
    fmt::print(stderr, "bench: {}\n", opened.error());
    return 1;
  }
  std::shared_ptr<const gguf::GgufFile> file = std::move(*opened);
  const int threads = resolve_threads(a.backend.threads);
  auto created = create_backends(a.backend);
  if (!created) {
    fmt::print(stderr, "bench: {}\n", created.error());
    return 1;
  }
  Backends backends = std::move(*created);
  kernels::Backend* backend = backends.main.get();
  auto job = start_job(a.parallel);
  if (!job) {
    fmt::print(stderr, "bench: {}\n", job.error());
    return 1;
  }
  auto model = model::Model::load(file, *backend, {.experts_per_token = a.experts_per_token,
                                                   .world = job->world.get(),
                                                   .parallel = job->config,
                                                   .expert_offload = backends.expert_offload()});
  if (!model) {
    fmt::print(stderr, "bench: {}\n", model.error());
    return 1;
  }
  if (std::optional<int> code = serve_if_worker(**model)) return *code;
  if (a.verify_curve) {
    VerifyCurveArgs v = a.verify;
    v.model_path = a.model;
    v.threads = threads;
    return run_verify_curve(**model, v);
  }
  if (!a.prompt_file.empty()) {
    auto tokenizer = Tokenizer::from_gguf(*file);
    if (!tokenizer) {
      fmt::print(stderr, "bench: {}\n", tokenizer.error());
      return 1;
    }
    return run_prompt_bench(**model, **tokenizer,
                            {.prompt_file = a.prompt_file,
                             .n_gen = a.n_gen,
                             .repetitions = a.repetitions,
                             .concurrency = std::max(a.batch, 1),
                             .kv_type = a.kv_cache_type,
                             .speculative = a.speculative,
                             .json = a.json});
  }
  if (a.speculative.enabled() || !a.speculative.draft_model.empty()) {
    fmt::print(stderr, "bench: --speculative-method needs --prompt-file (the tg test feeds random "
                       "tokens to a session, not the engine)\n");
    return 2;
  }
  const int32_t n_vocab = static_cast<int32_t>((*model)->config().n_vocab);
  const int64_t context = (*model)->config().context_length;
  int64_t needed = int64_t{a.n_depth} + std::max(a.n_prompt, a.n_gen);
  if (context > 0 && needed > context) {
    fmt::print(stderr, "bench: -d {} + max(-p, -n) = {} tokens exceeds the model's context of {}\n",
               a.n_depth, needed, context);
    return 2;
  }
  needed = context > 0 ? std::min(needed + 16, context) : needed + 16;
  auto session = model::Session::create(**model, {.max_tokens = static_cast<int32_t>(needed),
                                                        .kv_type = a.kv_cache_type});
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
  (*model)->reset_expert_token_counts();

  std::vector<double> pp, tg, tgb, pp_comm, tg_comm, tgb_comm;
  const auto prompt = bench_tokens(a.n_prompt, n_vocab);
  // The context of -d tokens (other ids than the prompt's), filled untimed; to_depth() brings the
  // session back to it: a rewind, or (a hybrid model, which cannot rewind into the middle) a refill.
  std::vector<int32_t> depth_tokens = bench_tokens(a.n_depth, n_vocab);
  for (int32_t& id : depth_tokens) id = 3 + (id * 31 + 17) % std::max(1, n_vocab - 3);
  auto to_depth = [&]() -> Status {
    if (a.n_depth == 0) {
      s.reset();
      return {};
    }
    if (s.n_past() >= a.n_depth && s.rewind(a.n_depth)) return {};
    s.reset();
    if (auto r = s.eval(depth_tokens); !r) return r.error_value();
    return {};
  };
  if (a.n_depth > 0) fmt::print(stderr, "bench: filling a context of {} tokens (untimed)\n", a.n_depth);
  // The share of each test's wall time the driver spent in communication (split models).
  auto comm_share = [&](double comm_before, Clock::time_point t0) {
    return (comm_seconds(**model) - comm_before) /
           std::chrono::duration<double>(Clock::now() - t0).count();
  };
  for (int r = 0; r < a.repetitions; ++r) {
    if (a.n_prompt > 0) {
      if (Status st = to_depth(); !st) {
        fmt::print(stderr, "bench: {}\n", st.error());
        return 1;
      }
      const double c0 = comm_seconds(**model);
      const auto t0 = Clock::now();
      if (auto res = s.eval(prompt); !res) {
        fmt::print(stderr, "bench: {}\n", res.error());
        return 1;
      }
      pp.push_back(a.n_prompt / std::chrono::duration<double>(Clock::now() - t0).count());
      pp_comm.push_back(comm_share(c0, t0));
    }
    if (a.n_gen > 0) {
      if (Status st = to_depth(); !st) {
        fmt::print(stderr, "bench: {}\n", st.error());
        return 1;
      }
      int32_t token = prompt.empty() ? 3 : prompt[0];
      const double c0 = comm_seconds(**model);
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
      tg_comm.push_back(comm_share(c0, t0));
    }
    if (a.batch > 0 && a.n_gen > 0) {
      const double c0 = comm_seconds(**model);
      const auto t0 = Clock::now();
      Result<double> tps = measure_batched_decode(**model, a.batch, a.n_gen);
      if (!tps) {
        fmt::print(stderr, "bench: {}\n", tps.error());
        return 1;
      }
      tgb.push_back(*tps);
      tgb_comm.push_back(comm_share(c0, t0));
    }
  }
  const Stats tgbs = summarize(tgb);
  const double pp_comm_share = summarize(pp_comm).median, tg_comm_share = summarize(tg_comm).median,
               tgb_comm_share = summarize(tgb_comm).median;
  const double peak_rss = static_cast<double>(peak_resident_bytes());
  const double rss_over_file = peak_rss / static_cast<double>(std::max<uint64_t>(file->file_size(), 1));
  const Stats pps = summarize(pp), tgs = summarize(tg);
  const std::vector<uint64_t> routing = (*model)->expert_token_counts();
  Result<MoeStep> moe_step = MoeStep{};
  if ((*model)->config().n_experts > 0) moe_step = measure_moe_step(**model, 16);
  if (!moe_step) {
    fmt::print(stderr, "bench: {}\n", moe_step.error());
    return 1;
  }
  const uint64_t step_bytes = decode_weight_bytes(*file, (*model)->config());
  const double decode_gbs = tgs.median * static_cast<double>(step_bytes) / 1e9;
  BandwidthResult probe;
  if (!a.no_probe) probe = measure_read_bandwidth(size_t{1} << 30, threads, 5);
  // The compute peaks for the same number of threads, each probe on every thread of a ThreadPool
  // (the pool class the CPU backend runs its kernels on) at once; CPU backend only.
  const bool cpu = std::string(backend->name()) == "cpu";
  const bool want_peaks = cpu && !a.no_peak;
  std::vector<simd::PeakResult> peaks;
  if (want_peaks) {
    ThreadPool pool(threads);
    peaks = simd::measure_peaks(pool);
  }
  const simd::Isa isa = simd::active_isa();
  const std::optional<simd::Peak> pp_peak_kind = simd::prefill_peak(isa);
  const simd::PeakResult* pp_peak = nullptr;
  if (pp_peak_kind && want_peaks && peaks[static_cast<size_t>(*pp_peak_kind)].available)
    pp_peak = &peaks[static_cast<size_t>(*pp_peak_kind)];
  const TokenMacs macs = token_macs(*file, (*model)->config());
  // A pp test computes the output head once, for its last token.
  const double pp_macs_per_token =
      a.n_prompt > 0 ? static_cast<double>(macs.matmul) +
                           static_cast<double>(macs.head) / static_cast<double>(a.n_prompt)
                     : 0.0;
  const double pp_gmacs = pps.median * pp_macs_per_token / 1e9;
  const double pp_attention = attention_macs((*model)->config(), a.n_prompt, a.n_depth);
  auto fraction_of = [&](const simd::PeakResult& p) {
    return p.gmac_per_s > 0 ? pp_gmacs / p.gmac_per_s : 0.0;
  };
  auto is_int8 = [](simd::Peak p) {
    return p == simd::Peak::int8_vnni512 || p == simd::Peak::int8_maddubs512 ||
           p == simd::Peak::int8_maddubs256 || p == simd::Peak::amx_int8;
  };

  const auto& cfg = (*model)->config();
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = a.model;
    j["architecture"] = cfg.architecture;
    j["file_bytes"] = file->file_size();
    j["decode_weight_bytes"] = step_bytes;
    j["backend"] = std::string(backend->name());
    j["threads"] = threads;
    j["kv_cache_type"] = kv_cache_type_name(a.kv_cache_type);
    j["repetitions"] = a.repetitions;
    auto stats = [](const Stats& st) {
      return nlohmann::ordered_json{{"median", st.median}, {"min", st.min}, {"max", st.max},
                                    {"stddev", st.stddev}};
    };
    if (a.n_prompt > 0)
      j["pp"] = {{"tokens", a.n_prompt}, {"depth", a.n_depth}, {"tokens_per_s", stats(pps)}};
    if (a.n_gen > 0) j["tg"] = {{"tokens", a.n_gen}, {"depth", a.n_depth}, {"tokens_per_s", stats(tgs)}};
    if (!tgb.empty()) {
      j["tg_batch"] = {{"sequences", a.batch}, {"steps", a.n_gen}, {"tokens_per_s", stats(tgbs)}};
    }
    j["peak_rss_bytes"] = peak_rss;
    j["peak_rss_over_file"] = rss_over_file;
    if (const model::Distributed* d = (*model)->distributed()) {
      j["distributed"] = {{"world_size", d->topology().world_size},
                          {"tensor_parallel", d->topology().config.tensor},
                          {"pipeline_parallel", d->topology().config.pipeline},
                          {"comm_share_pp", pp_comm_share}, {"comm_share_tg", tg_comm_share},
                          {"comm_share_tg_batch", tgb_comm_share}};
    }
    j["decode_gb_per_s"] = decode_gbs;
    if (!a.no_probe) {
      j["probe_gb_per_s"] = probe.gb_per_s;
      j["decode_fraction_of_probe"] = probe.gb_per_s > 0 ? decode_gbs / probe.gb_per_s : 0.0;
    }
    j["macs_per_token"] = {{"matmul", macs.matmul},
                           {"output_head", macs.head},
                           {"decode", macs.matmul + macs.head},
                           {"prefill", pp_macs_per_token},
                           {"attention_included", false},
                           {"attention_prefill_estimate", pp_attention}};
    if (a.n_prompt > 0) j["prefill_gmac_per_s"] = pp_gmacs;
    j["isa"] = std::string(simd::isa_name(isa));
    if (want_peaks) {
      nlohmann::ordered_json pj, unavailable;
      pj["threads"] = threads;
      pj["unit"] = "GMAC/s (1e9 multiply-adds per second; 1 MAC = 2 ops)";
      nlohmann::ordered_json rates = nlohmann::ordered_json::object();
      for (const simd::PeakResult& p : peaks) {
        if (p.available)
          rates[std::string(simd::peak_name(p.peak))] = p.gmac_per_s;
        else
          unavailable[std::string(simd::peak_name(p.peak))] = p.unavailable;
      }
      pj["gmac_per_s"] = rates;
      // Threads that ran each probe's best repetition (fewer than `threads`: a worker joined too
      // late on a loaded machine and the caller ran its share).
      nlohmann::ordered_json ran = nlohmann::ordered_json::object();
      for (const simd::PeakResult& p : peaks)
        if (p.available) ran[std::string(simd::peak_name(p.peak))] = p.threads_ran;
      pj["threads_ran"] = ran;
      if (!unavailable.empty()) pj["unavailable"] = unavailable;
      j["peaks"] = pj;
      if (pp_peak && a.n_prompt > 0) {
        j["prefill_peak"] = std::string(simd::peak_name(pp_peak->peak));
        j["prefill_fraction_of_peak"] = fraction_of(*pp_peak);
        nlohmann::ordered_json fr = nlohmann::ordered_json::object();
        for (const simd::PeakResult& p : peaks)
          if (p.available && is_int8(p.peak)) fr[std::string(simd::peak_name(p.peak))] = fraction_of(p);
        j["prefill_fraction_of"] = fr;
      }
    }
    if (cfg.n_experts > 0) {
      j["experts"] = {{"count", cfg.n_experts}, {"used", cfg.n_experts_used},
                      {"tokens_per_layer_expert", routing},
                      {"step16_expert_matrices", moe_step->matrices},
                      {"step16_expert_bytes", moe_step->bytes}};
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("model:   {} ({}, {:.1f} MiB, {:.1f} MiB read per decode step)\n", a.model,
             cfg.architecture, file->file_size() / 1048576.0, step_bytes / 1048576.0);
  fmt::print("backend: {}, {} threads, {} repetitions, KV cache {}\n", backend->name(), threads,
             a.repetitions, kv_cache_type_name(a.kv_cache_type));
  fmt::print("| test   |     t/s (median) |   min  |   max  | stddev |\n");
  fmt::print("|--------|------------------|--------|--------|--------|\n");
  // llama-bench's labels: "pp512 @ d8192" when a depth is set.
  const std::string at_depth = a.n_depth > 0 ? fmt::format(" @ d{}", a.n_depth) : "";
  if (a.n_prompt > 0)
    fmt::print("| {:<6} | {:16.2f} | {:6.2f} | {:6.2f} | {:6.2f} |\n",
               fmt::format("pp{}{}", a.n_prompt, at_depth), pps.median, pps.min, pps.max, pps.stddev);
  if (a.n_gen > 0)
    fmt::print("| {:<6} | {:16.2f} | {:6.2f} | {:6.2f} | {:6.2f} |\n",
               fmt::format("tg{}{}", a.n_gen, at_depth), tgs.median, tgs.min, tgs.max, tgs.stddev);
  if (!tgb.empty())
    fmt::print("| tg x{:<2} | {:16.2f} | {:6.2f} | {:6.2f} | {:6.2f} |  ({} sequences per step)\n",
               a.batch, tgbs.median, tgbs.min, tgbs.max, tgbs.stddev, a.batch);
  if (const model::Distributed* d = (*model)->distributed()) {
    fmt::print("split:   tp {} x pp {}; the driver's communication share of wall time: pp {:.1f}%, "
               "tg {:.1f}%{}\n", d->topology().config.tensor, d->topology().config.pipeline,
               100 * pp_comm_share, 100 * tg_comm_share,
               tgb.empty() ? "" : fmt::format(", tg x{} {:.1f}%", a.batch, 100 * tgb_comm_share));
  }
  fmt::print("memory:  peak resident {:.1f} MiB (this process), {:.2f}x the {:.1f} MiB file\n",
             peak_rss / 1048576.0, rss_over_file,
             file->file_size() / 1048576.0);
  if (a.n_gen > 0) {
    fmt::print("decode:  {:.2f} GB/s of weights", decode_gbs);
    if (!a.no_probe)
      fmt::print(" = {:.0f}% of the {:.2f} GB/s read-bandwidth probe ({} threads)",
                 100.0 * decode_gbs / probe.gb_per_s, probe.gb_per_s, threads);
    fmt::print("\n");
  }
  if (want_peaks) {
    fmt::print("peaks:   GMAC/s (1e9 multiply-adds/s) on {} threads at once:", threads);
    const char* sep = " ";
    for (const simd::PeakResult& p : peaks) {
      if (!p.available) continue;
      fmt::print("{}{} {:.1f}", sep, simd::peak_name(p.peak), p.gmac_per_s);
      if (p.threads_ran < p.threads) fmt::print(" (ran on {} thread)", p.threads_ran);
      sep = ", ";
    }
    fmt::print("\n");
  }
  if (a.n_prompt > 0) {
    fmt::print("prefill: {:.1f} GMAC/s ({:.1f} M multiply-adds per token from the weight shapes, "
               "the output head once per prompt; attention not included, about {:.1f} M more per "
               "token at {} tokens)",
               pp_gmacs, pp_macs_per_token / 1e6, pp_attention / 1e6, a.n_prompt);
    if (pp_peak) {
      fmt::print(" = {:.1f}% of the {} peak {:.1f} GMAC/s (the int8 path at ISA {})",
                 100.0 * fraction_of(*pp_peak), simd::peak_name(pp_peak->peak),
                 pp_peak->gmac_per_s, simd::isa_name(isa));
      // At amx the GEMV kernels (and the matmuls without an AMX path) are the VNNI ones.
      const simd::PeakResult& vnni = peaks[static_cast<size_t>(simd::Peak::int8_vnni512)];
      if (isa == simd::Isa::amx && vnni.available)
        fmt::print("; {:.1f}% of the int8_vnni512 peak {:.1f}", 100.0 * fraction_of(vnni),
                   vnni.gmac_per_s);
    } else if (want_peaks) {
      fmt::print(" (no int8 SIMD path at ISA {}: no peak to compare)", simd::isa_name(isa));
    }
    fmt::print("\n");
  }
  if (cfg.n_experts > 0) print_routing(cfg, routing, *moe_step);
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
    sub->add_option("-d,--n-depth", args->n_depth,
                    "Tokens of context already in the KV cache when pp and tg start (filled once, "
                    "untimed; as llama-bench -d; not the -b test)")
        ->capture_default_str()
        ->check(CLI::Range(0, 1 << 24));
    sub->add_option("-r,--repetitions", args->repetitions, "Repetitions per test")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    add_backend_options(*sub, args->backend);
    add_parallel_options(*sub, args->parallel);
    sub->add_flag("--json", args->json, "Print the results as JSON");
    sub->add_option("-b,--batch", args->batch,
                    "Also decode this many sequences per step (tgN; -n steps each)")
        ->check(CLI::Range(1, 4096));
    sub->add_flag("--no-probe", args->no_probe, "Skip the memory-bandwidth probe");
    sub->add_flag("--no-peak", args->no_peak,
                  "Skip the compute-peak probes (int8, bf16, f32, AMX multiply-add rates)");
    add_kv_cache_type_option(*sub, args->kv_cache_type);
    sub->add_option("--prompt-file", args->prompt_file,
                    "Instead of pp/tg: greedy generation through the engine with this file's text "
                    "as the prompt (-n tokens, -r rounds, -b concurrent requests); for "
                    "--speculative-method")
        ->check(CLI::ExistingFile);
    add_speculative_options(*sub, args->speculative);
    auto* verify = sub->add_flag(
        "--verify-curve", args->verify_curve,
        "Instead of pp/tg: the time of one forward step in which each of c sequences computes P "
        "positions with logits for all (the cost of verifying P-1 drafts); -r steps per point");
    sub->add_option("--verify-positions", args->verify_positions,
                    "--verify-curve: positions per sequence, e.g. 1-8 or 1,2,4 (each in [1, 32]; "
                    "P=1 is always measured, the ratios are to it)")
        ->capture_default_str()
        ->needs(verify);
    sub->add_option("--verify-batch", args->verify_batch,
                    "--verify-curve: sequences per step, e.g. 1,8 or 1-4 (each in [1, 256])")
        ->capture_default_str()
        ->needs(verify);
    sub->add_option("--depth", args->verify_depth,
                    "--verify-curve: tokens of context already in each sequence's KV cache")
        ->capture_default_str()
        ->needs(verify);
    sub->add_option("--experts-per-token", args->experts_per_token,
                    "MoE: experts used per token (default: the model's; changes quality)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    args->serve = loadgen::add_bench_serve(*sub);
  };
  c.run = [args] {
    if (auto rc = args->serve()) return *rc;
    if (args->model.empty()) {
      fmt::print(stderr, "bench: --model is required\n");
      return 2;
    }
    if (args->verify_curve) {
      if (!args->prompt_file.empty() || args->speculative.enabled()) {
        fmt::print(stderr, "bench: --verify-curve measures the model alone: not with --prompt-file "
                           "or --speculative-method\n");
        return 2;
      }
      args->verify.repetitions = args->repetitions;
      args->verify.kv_type = args->kv_cache_type;
      args->verify.kv_type_name = kv_cache_type_name(args->kv_cache_type);
      args->verify.json = args->json;
      if (Status st = parse_verify_options(args->verify_positions, args->verify_batch,
                                           args->verify_depth, args->verify);
          !st) {
        fmt::print(stderr, "bench: {}\n", st.error());
        return 2;
      }
    }
    return run_bench(*args);
  };
  return c;
}

}  // namespace cadenza::cli
