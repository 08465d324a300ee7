#include "cli/bench_verify.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loadgen/stats.h"

namespace cadenza::cli {
namespace {

using Clock = std::chrono::steady_clock;

// A decimal integer that is the whole of `s` (digits only, no sign), or an error.
Result<int64_t> parse_count(std::string_view option, std::string_view s, std::string_view text) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || s.front() == '-' || s.front() == '+' || ec != std::errc() ||
      end != s.data() + s.size()) {
    return make_error("{} '{}': '{}' is not a number (expected e.g. 1-8 or 1,2,4)", option, text, s);
  }
  return v;
}

// Deterministic pseudo-random token ids in [3, n_vocab) (ids 0..2 are often special).
struct TokenStream {
  uint64_t state;
  int32_t n_vocab;
  int32_t next() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return 3 + static_cast<int32_t>(state % static_cast<uint64_t>(std::max(1, n_vocab - 3)));
  }
};

// CPU time of this process (all its threads) in ms: what a step computed, whatever the waiting
// for a core on a shared machine.
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return 1e3 * static_cast<double>(ts.tv_sec) + 1e-6 * static_cast<double>(ts.tv_nsec);
}

struct Point {
  int32_t sequences = 0, positions = 0;
  double median_ms = 0, min_ms = 0, max_ms = 0;  // wall time of a step
  double cpu_median_ms = 0, cpu_min_ms = 0;      // process CPU time of a step
};

// Every point of one c: prefill, then the steps of each P.
Result<std::vector<Point>> measure_sequences(model::Model& m, const VerifyCurveArgs& a, int32_t c) {
  constexpr int32_t kBlock = 16;
  constexpr int32_t kPrefillChunk = 256;  // tokens per prefill step
  const int32_t p_max = a.positions.back();
  const int32_t n_vocab = static_cast<int32_t>(m.config().n_vocab);
  const int32_t blocks_per_seq = (a.depth + p_max + kBlock - 1) / kBlock;
  auto kv = m.create_kv_cache(
      {.num_blocks = c * blocks_per_seq, .block_size = kBlock, .type = a.kv_type, .num_state_slots = c});
  if (!kv) return kv.error_value();
  const int64_t step_tokens = int64_t{c} * p_max;
  if (Status st = m.reserve({.max_tokens = std::max<int64_t>(step_tokens, kPrefillChunk),
                             .max_logit_rows = step_tokens,
                             .max_sequences = c,
                             .max_blocks_per_sequence = blocks_per_seq});
      !st) {
    return st.error_value();
  }
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(c));
  std::vector<std::span<const int32_t>> spans;
  for (int32_t s = 0; s < c; ++s) {
    for (int32_t b = 0; b < blocks_per_seq; ++b) {
      tables[static_cast<size_t>(s)].push_back(s * blocks_per_seq + b);
    }
    spans.emplace_back(tables[static_cast<size_t>(s)]);
  }
  TokenStream rng{0x2545F4914F6CDD1DULL + static_cast<uint64_t>(c), n_vocab};

  // The context: `depth` tokens of each sequence, one sequence at a time, untimed.
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  for (int32_t s = 0; s < c; ++s) {
    const std::span<const std::span<const int32_t>> one(&spans[static_cast<size_t>(s)], 1);
    for (int32_t start = 0; start < a.depth; start += kPrefillChunk) {
      const int32_t n = std::min(kPrefillChunk, a.depth - start);
      std::vector<int32_t> tokens(static_cast<size_t>(n)), positions(static_cast<size_t>(n));
      for (int32_t i = 0; i < n; ++i) {
        tokens[static_cast<size_t>(i)] = rng.next();
        positions[static_cast<size_t>(i)] = start + i;
      }
      const std::vector<int32_t> seq(static_cast<size_t>(n), 0);
      const std::vector<int32_t> rows = {n - 1};
      if (Status st = m.forward({tokens, positions, seq, one, rows}, **kv, logits); !st) {
        return st.error_value();
      }
    }
  }

  // One batch per P: positions depth..depth+P-1 of every sequence, logits for all of them (as
  // verification needs). Every step rewrites the same KV slots, so the context stays `depth`.
  struct Step {
    std::vector<int32_t> tokens, positions, seq, rows;
    std::vector<double> ms, cpu_ms;
  };
  std::vector<Step> steps(a.positions.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    const int32_t p = a.positions[i];
    const size_t n = static_cast<size_t>(c) * static_cast<size_t>(p);
    Step& st = steps[i];
    st.tokens.resize(n);
    st.positions.resize(n);
    st.seq.resize(n);
    st.rows.resize(n);
    for (size_t t = 0; t < n; ++t) {
      st.tokens[t] = rng.next();
      st.seq[t] = static_cast<int32_t>(t / static_cast<size_t>(p));
      st.positions[t] = a.depth + static_cast<int32_t>(t % static_cast<size_t>(p));
      st.rows[t] = static_cast<int32_t>(t);
    }
  }
  logits.assign(static_cast<size_t>(step_tokens) * static_cast<size_t>(n_vocab), 0.0f);
  // The P values take turns within each repetition, so that a change of machine load (other
  // processes) hits every P alike instead of skewing the ratios.
  for (int r = 0; r < a.warmup + a.repetitions; ++r) {
    for (size_t i = 0; i < steps.size(); ++i) {
      Step& st = steps[i];
      const model::Batch batch{st.tokens, st.positions, st.seq, spans, st.rows};
      const std::span<float> out(logits.data(), st.rows.size() * static_cast<size_t>(n_vocab));
      const double cpu0 = process_cpu_ms();
      const auto t0 = Clock::now();
      if (Status s = m.forward(batch, **kv, out); !s) return s.error_value();
      const double elapsed = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      const double cpu = process_cpu_ms() - cpu0;
      if (r >= a.warmup) {
        st.ms.push_back(elapsed);
        st.cpu_ms.push_back(cpu);
      }
    }
  }
  std::vector<Point> points;
  for (size_t i = 0; i < steps.size(); ++i) {
    const loadgen::Distribution ms = loadgen::summarize(steps[i].ms);
    const loadgen::Distribution cpu = loadgen::summarize(steps[i].cpu_ms);
    points.push_back({c, a.positions[i], ms.median, ms.min, ms.max, cpu.median, cpu.min});
  }
  return points;
}

}  // namespace

Result<std::vector<int32_t>> parse_int_list(std::string_view option, std::string_view text,
                                            int32_t lo, int32_t hi) {
  if (text.empty()) return make_error("{} is empty (expected e.g. 1-8 or 1,2,4)", option);
  std::vector<int32_t> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    const std::string_view item = text.substr(begin, comma - begin);
    if (item.empty()) return make_error("{} '{}' has an empty item", option, text);
    const size_t dash = item.find('-', 1);
    auto first = parse_count(option, item.substr(0, dash), text);
    if (!first) return first.error_value();
    int64_t last_value = *first;
    if (dash != std::string_view::npos) {
      auto last = parse_count(option, item.substr(dash + 1), text);
      if (!last) return last.error_value();
      last_value = *last;
      if (last_value < *first) {
        return make_error("{} '{}': the range {} ends below its start", option, text, item);
      }
    }
    for (const int64_t v : {*first, last_value}) {
      if (v < lo || v > hi) {
        return make_error("{} '{}': {} is out of range, each value must be in [{}, {}]", option,
                          text, v, lo, hi);
      }
    }
    for (int64_t v = *first; v <= last_value; ++v) out.push_back(static_cast<int32_t>(v));
    begin = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Status parse_verify_options(std::string_view positions, std::string_view sequences, int32_t depth,
                            VerifyCurveArgs& args) {
  auto p = parse_int_list("--verify-positions", positions, 1, kMaxVerifyPositions);
  if (!p) return p.error_value();
  auto c = parse_int_list("--verify-batch", sequences, 1, kMaxVerifySequences);
  if (!c) return c.error_value();
  if (depth < 0) return make_error("--depth {} must be >= 0", depth);
  if (p->front() != 1) p->insert(p->begin(), 1);
  args.positions = std::move(*p);
  args.sequences = std::move(*c);
  args.depth = depth;
  return {};
}

int run_verify_curve(model::Model& model, const VerifyCurveArgs& a) {
  const auto& cfg = model.config();
  const int32_t p_max = a.positions.back();
  if (cfg.context_length > 0 && int64_t{a.depth} + p_max > cfg.context_length) {
    fmt::print(stderr,
               "bench: --depth {} + {} positions exceeds the model's context of {} tokens "
               "(--depth at most {} with these positions)\n",
               a.depth, p_max, cfg.context_length, cfg.context_length - p_max);
    return 2;
  }
  const int64_t logit_bytes = int64_t{a.sequences.back()} * p_max * cfg.n_vocab *
                              static_cast<int64_t>(sizeof(float));
  if (logit_bytes > a.max_logit_bytes) {
    fmt::print(stderr,
               "bench: --verify-batch {} x {} positions: the logits of a step ({} rows of {}) take "
               "{:.1f} MiB, more than the {:.0f} MiB allowed; use fewer sequences or positions\n",
               a.sequences.back(), p_max, int64_t{a.sequences.back()} * p_max, cfg.n_vocab,
               static_cast<double>(logit_bytes) / 1048576.0,
               static_cast<double>(a.max_logit_bytes) / 1048576.0);
    return 2;
  }
  std::vector<Point> points;
  for (const int32_t c : a.sequences) {
    auto measured = measure_sequences(model, a, c);
    if (!measured) {
      fmt::print(stderr, "bench: {}\n", measured.error());
      return 1;
    }
    points.insert(points.end(), measured->begin(), measured->end());
  }
  // Each point's P = 1 point at the same c (positions always holds 1, first).
  auto baseline = [&](const Point& pt) -> const Point& {
    for (const Point& q : points) {
      if (q.sequences == pt.sequences && q.positions == 1) return q;
    }
    return pt;  // not reached: every c has its P = 1 point
  };
  auto ratio = [&](const Point& pt) {
    const double b = baseline(pt).median_ms;
    return b > 0 ? pt.median_ms / b : 0.0;
  };
  auto cpu_ratio = [&](const Point& pt) {
    const double b = baseline(pt).cpu_median_ms;
    return b > 0 ? pt.cpu_median_ms / b : 0.0;
  };
  auto tokens_per_s = [](const Point& pt) {
    return pt.median_ms > 0 ? 1e3 * pt.sequences * pt.positions / pt.median_ms : 0.0;
  };
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = a.model_path;
    j["architecture"] = cfg.architecture;
    j["backend"] = std::string(model.backend().name());
    j["threads"] = a.threads;
    j["kv_cache_type"] = a.kv_type_name;
    j["depth"] = a.depth;
    j["repetitions"] = a.repetitions;
    j["warmup"] = a.warmup;
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const Point& pt : points) {
      rows.push_back({{"sequences", pt.sequences},
                      {"positions", pt.positions},
                      {"step_ms", {{"median", pt.median_ms}, {"min", pt.min_ms}, {"max", pt.max_ms}}},
                      {"ratio_to_p1", ratio(pt)},
                      {"cpu_ms", {{"median", pt.cpu_median_ms}, {"min", pt.cpu_min_ms}}},
                      {"cpu_ratio_to_p1", cpu_ratio(pt)},
                      {"tokens_per_s", tokens_per_s(pt)}});
    }
    j["verify_curve"] = std::move(rows);
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("model:   {} ({})\n", a.model_path, cfg.architecture);
  fmt::print("backend: {}, {} threads, KV cache {}; context depth {}; {} repetitions (+{} "
             "warm-up) per point\n",
             model.backend().name(), a.threads, a.kv_type_name, a.depth,
             a.repetitions, a.warmup);
  fmt::print("one step: c sequences x P positions, logits for all; cpu: the process's CPU time "
             "per step (all threads)\n");
  fmt::print("|   c |  P | step ms (median) |   min ms | x P=1 |   tokens/s | cpu ms (median) | "
             "cpu x P=1 |\n");
  fmt::print("|-----|----|------------------|----------|-------|------------|-----------------|"
             "-----------|\n");
  for (const Point& pt : points) {
    fmt::print("| {:3} | {:2} | {:16.3f} | {:8.3f} | {:5.2f} | {:10.1f} | {:15.3f} | {:9.2f} |\n",
               pt.sequences, pt.positions, pt.median_ms, pt.min_ms, ratio(pt), tokens_per_s(pt),
               pt.cpu_median_ms, cpu_ratio(pt));
  }
  return 0;
}

}  // namespace cadenza::cli
