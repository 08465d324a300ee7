// `cadenza perplexity -m MODEL -f TEXT`: the perplexity of a model on a text by the protocol of
// docs/perplexity.md (chunks of --ctx tokens, each starting with BOS, the loss over the second
// half of each chunk), and with --kl-divergence-base / --kl-divergence the KL divergence of a
// model against a base model's saved predictions (eval/kl_base_file.h).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "eval/chunk_runner.h"
#include "eval/kl_base_file.h"
#include "eval/scoring.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "cli/eval_inputs.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace cadenza::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct PerplexityArgs {
  std::string model;
  std::string text;                 // -f
  int32_t ctx = 128;
  int32_t chunks = 200;             // 0: every whole chunk of the text
  int32_t batch = 512;              // tokens per forward step
  BackendArgs backend;
  DType kv_cache_type = DType::F16;
  bool json = false;
  std::string kl_base;              // --kl-divergence-base FILE
  bool kl = false;                  // --kl-divergence: compare against FILE instead of writing it
  int32_t kl_top_k = 128;
  int32_t kl_tail_samples = 64;
  bool ctx_given = false, chunks_given = false;
};

// The first scored row of a chunk of `ctx` tokens: rows first .. ctx-2 predict the tokens
// ctx/2+1 .. ctx-1 (the reference's choice; docs/perplexity.md).
int32_t first_scored_row(int32_t ctx) { return ctx / 2; }

// Perplexity with its standard error from the per-token negative log-likelihoods: exp(mean),
// and the standard error of the mean propagated through exp (first order).
struct Ppl {
  double value = 0, error = 0;
};
Ppl perplexity_of(const eval::Summary& nll) {
  const double v = std::exp(nll.mean);
  return {v, v * nll.std_error};
}

int fail(const std::string& message) {
  fmt::print(stderr, "perplexity: {}\n", message);
  return 1;
}

int run_perplexity(const PerplexityArgs& a) {
  if (a.kl && a.kl_base.empty()) {
    return fail("--kl-divergence needs --kl-divergence-base FILE (a file written by a run "
                "without --kl-divergence)");
  }
  if (!a.kl && a.text.empty()) return fail("-f/--file TEXT is required");

  // With --kl-divergence the base file fixes the chunks; it is read before the model loads, so
  // that a wrong file fails fast.
  std::unique_ptr<eval::KlBaseReader> base;
  if (a.kl) {
    auto opened = eval::KlBaseReader::open(a.kl_base);
    if (!opened) return fail(opened.error());
    base = std::move(*opened);
    const eval::KlBaseHeader& h = base->header();
    if (a.ctx_given && static_cast<uint32_t>(a.ctx) != h.ctx) {
      return fail(fmt::format("--ctx {} differs from the base file's {} ({})", a.ctx, h.ctx, a.kl_base));
    }
    if (a.chunks_given && a.chunks != 0 && static_cast<uint32_t>(a.chunks) != h.n_chunks) {
      return fail(fmt::format("--chunks {} differs from the base file's {} ({})", a.chunks,
                              h.n_chunks, a.kl_base));
    }
  }

  auto file = gguf::GgufFile::open(a.model);
  if (!file) return fail(file.error());
  std::shared_ptr<const gguf::GgufFile> shared = std::move(*file);
  auto tokenizer = Tokenizer::from_gguf(*shared);
  if (!tokenizer) return fail(tokenizer.error());

  // The tokens: BOS and the text's, or the base file's.
  std::vector<int32_t> tokens;
  if (!a.text.empty()) {
    auto text = read_text_file(a.text);
    if (!text) return fail(text.error());
    const auto t0 = Clock::now();
    auto sequence = bos_then_text_tokens(**tokenizer, *text, a.model);
    if (!sequence) return fail(sequence.error());
    tokens = std::move(*sequence);
    fmt::print(stderr, "perplexity: {}: {} bytes, {} tokens ({:.2f} s to tokenize)\n", a.text,
               text->size(), tokens.size(),
               std::chrono::duration<double>(Clock::now() - t0).count());
  }
  eval::ChunkOptions opt;
  opt.batch_tokens = a.batch;
  opt.bos_id = (*tokenizer)->bos_id();
  opt.kv_type = a.kv_cache_type;
  if (base) {
    const eval::KlBaseHeader& h = base->header();
    if (static_cast<int64_t>(h.n_vocab) != (*tokenizer)->n_vocab()) {
      return fail(fmt::format("{}: made with a vocabulary of {} tokens, {} has {}: the base file "
                              "comes from another model family", a.kl_base, h.n_vocab, a.model,
                              (*tokenizer)->n_vocab()));
    }
    if (h.bos_id != opt.bos_id) {
      return fail(fmt::format("{}: BOS token {}, {} uses {}: another tokenizer", a.kl_base,
                              h.bos_id, a.model, opt.bos_id));
    }
    if (!tokens.empty()) {
      if (tokens.size() < h.tokens.size() ||
          !std::equal(h.tokens.begin(), h.tokens.end(), tokens.begin())) {
        return fail(fmt::format("{}: the base file was made from another text (or tokenizer) "
                                "than {} as {} tokenizes it", a.kl_base, a.text, a.model));
      }
    }
    tokens = h.tokens;
    opt.ctx = static_cast<int32_t>(h.ctx);
    opt.first = static_cast<int32_t>(h.first);
    opt.n_chunks = static_cast<int32_t>(h.n_chunks);
  } else {
    opt.ctx = a.ctx;
    opt.first = first_scored_row(a.ctx);
  }

  auto created = create_backends(a.backend);
  if (!created) return fail(created.error());
  Backends backends = std::move(*created);
  const auto load_start = Clock::now();
  auto model = model::Model::load(shared, *backends.main,
                                  {.expert_offload = backends.expert_offload()});
  if (!model) return fail(model.error());
  model::Model& m = **model;
  if (Status ok = check_eval_model(m.config(), **tokenizer, opt.ctx, a.model); !ok) return fail(ok.error());
  if (!base) {
    if (a.ctx < 4) return fail(fmt::format("--ctx {} is below 4", a.ctx));
    const int64_t available = static_cast<int64_t>(tokens.size()) / a.ctx;
    if (available < 1) {
      return fail(fmt::format("{}: {} tokens, fewer than one chunk of {} (--ctx)", a.text,
                              tokens.size(), a.ctx));
    }
    opt.n_chunks = a.chunks == 0 ? static_cast<int32_t>(available) : a.chunks;
    if (opt.n_chunks > available) {
      fmt::print(stderr, "perplexity: the text holds {} chunks of {} tokens, not {}: using {}\n",
                 available, a.ctx, opt.n_chunks, available);
      opt.n_chunks = static_cast<int32_t>(available);
    }
  }

  const int32_t n_vocab = static_cast<int32_t>(m.config().n_vocab);
  fmt::print(stderr, "perplexity: {} loaded in {:.2f} s; {} chunks of {} tokens, {} scored per "
             "chunk, {} tokens per step, {} threads\n", a.model,
             std::chrono::duration<double>(Clock::now() - load_start).count(), opt.n_chunks,
             opt.ctx, eval::scored_rows(opt), std::min(opt.n_chunks, std::max(1, a.batch / opt.ctx)) * opt.ctx,
             resolve_threads(a.backend.threads));

  std::unique_ptr<eval::KlBaseWriter> writer;
  size_t writer_tail_samples = 0;
  if (!a.kl_base.empty() && !a.kl) {
    if (a.kl_top_k < 1 || a.kl_top_k > n_vocab) {
      return fail(fmt::format("--kl-top-k {} outside [1, {}]", a.kl_top_k, n_vocab));
    }
    eval::KlBaseHeader h;
    h.n_vocab = static_cast<uint32_t>(n_vocab);
    h.ctx = static_cast<uint32_t>(opt.ctx);
    h.n_chunks = static_cast<uint32_t>(opt.n_chunks);
    h.first = static_cast<uint32_t>(opt.first);
    h.top_k = static_cast<uint32_t>(a.kl_top_k);
    h.bos_id = opt.bos_id;
    h.tail_samples = static_cast<uint32_t>(a.kl_top_k >= n_vocab ? 0 : a.kl_tail_samples);
    h.tokens.assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(opt.n_chunks) * opt.ctx);
    const double mib = static_cast<double>(h.file_bytes()) / 1048576.0;
    fmt::print(stderr, "perplexity: writing the KL-divergence base {} (top {} log-probs and {} "
               "tail samples per position, {:.1f} MiB)\n", a.kl_base, a.kl_top_k, h.tail_samples,
               mib);
    if (mib > 1024) {
      fmt::print(stderr, "perplexity: warning: the base file will take {:.1f} GiB (--kl-top-k {})\n",
                 mib / 1024, a.kl_top_k);
    }
    writer_tail_samples = h.tail_samples;
    auto w = eval::KlBaseWriter::create(a.kl_base, h);
    if (!w) return fail(w.error());
    writer = std::move(*w);
  }

  std::vector<double> nll, base_nll, kld, kld_bound;
  int64_t same_top = 0;
  double nll_sum = 0;
  const int32_t n_scored = eval::scored_rows(opt);
  // The rows of a chunk are scored in parallel (each row's result computed inside its index,
  // so the numbers do not depend on the threads), then appended / compared in row order.
  const int scoring_threads = resolve_threads(a.backend.threads);
  ThreadPool pool(scoring_threads);
  std::vector<std::vector<double>> lp(static_cast<size_t>(scoring_threads));
  struct Row {
    double nll = 0;
    eval::KlBaseRecord out;      // writing a base
    eval::KlBaseRecord in;       // comparing against one
    eval::KlEstimate kl;
    bool same_top = false;
  };
  std::vector<Row> rows(static_cast<size_t>(n_scored));
  const auto start = Clock::now();
  Status st = eval::run_chunks(m, tokens, opt, [&](int32_t chunk, std::span<const float> logits) -> Status {
    if (base) {
      for (Row& row : rows) {
        auto rec = base->next();
        if (!rec) return rec.error_value();
        row.in = std::move(*rec);
      }
    }
    pool.parallel_for(n_scored, [&](int64_t r, int thread) {
      std::vector<double>& l = lp[static_cast<size_t>(thread)];
      Row& row = rows[static_cast<size_t>(r)];
      eval::log_softmax(logits.subspan(static_cast<size_t>(r) * static_cast<size_t>(n_vocab),
                                       static_cast<size_t>(n_vocab)),
                        l);
      const int32_t target = tokens[static_cast<size_t>(chunk) * static_cast<size_t>(opt.ctx) +
                                    static_cast<size_t>(opt.first + r + 1)];
      row.nll = -l[static_cast<size_t>(target)];
      if (writer) {
        eval::TopK top = eval::top_k(l, a.kl_top_k);
        const uint64_t position = static_cast<uint64_t>(chunk) * static_cast<uint64_t>(n_scored) +
                                  static_cast<uint64_t>(r);
        std::vector<eval::TopEntry> tail = eval::sample_tail(
            l, top.top, static_cast<int32_t>(writer_tail_samples), position);
        if (tail.size() < writer_tail_samples) {  // nothing outside the top: repeat the last id
          tail.resize(writer_tail_samples, top.top.back());
        }
        row.out = {.target_logprob = static_cast<float>(l[static_cast<size_t>(target)]),
                   .rest_logmass = static_cast<float>(top.rest_logmass),
                   .top = std::move(top.top),
                   .tail = std::move(tail)};
      }
      if (base) {
        row.kl = eval::kl_divergence(row.in.top, row.in.rest_logmass, row.in.tail, l);
        row.same_top = eval::argmax(l) == row.in.top.front().id;
      }
    });
    for (const Row& row : rows) {
      nll.push_back(row.nll);
      nll_sum += row.nll;
      if (writer) {
        if (Status ws = writer->append(row.out); !ws) return ws;
      }
      if (base) {
        base_nll.push_back(-static_cast<double>(row.in.target_logprob));
        kld.push_back(row.kl.estimate);
        kld_bound.push_back(row.kl.lower_bound);
        same_top += row.same_top;
      }
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    fmt::print(stderr, "perplexity: [{}/{}] ppl {:.4f}{}, {:.1f} s\n", chunk + 1, opt.n_chunks,
               std::exp(nll_sum / static_cast<double>(nll.size())),
               kld.empty() ? "" : fmt::format(", mean KL {:.6f}", [&] {
                 double s = 0;
                 for (double v : kld) s += v;
                 return s / static_cast<double>(kld.size());
               }()),
               elapsed);
    return {};
  });
  if (!st) return fail(st.error());
  if (writer) {
    if (Status fs = writer->finish(); !fs) return fail(fs.error());
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const eval::Summary nll_stats = eval::summarize(nll);
  const Ppl ppl = perplexity_of(nll_stats);
  fmt::print(stderr, "perplexity: {} chunks in {:.2f} s ({:.3f} s per chunk)\n", opt.n_chunks,
             seconds, seconds / opt.n_chunks);

  eval::Summary kl_stats, bound_stats, base_stats;
  bool exact_kl = false;  // the base file holds every log-prob: bound == estimate == exact
  double agree = 0, agree_err = 0;
  if (base) {
    kl_stats = eval::summarize(kld);
    bound_stats = eval::summarize(kld_bound);
    exact_kl = base->header().top_k >= base->header().n_vocab;
    base_stats = eval::summarize(base_nll);
    const double n = static_cast<double>(kld.size());
    agree = static_cast<double>(same_top) / n;
    agree_err = n > 1 ? std::sqrt(agree * (1 - agree) / (n - 1)) : 0.0;
  }
  if (a.json) {
    nlohmann::json j = {{"model", a.model},
                        {"ctx", opt.ctx},
                        {"chunks", opt.n_chunks},
                        {"scored_tokens", nll_stats.count},
                        {"ppl", ppl.value},
                        {"ppl_error", ppl.error},
                        {"mean_nll", nll_stats.mean},
                        {"seconds", seconds}};
    if (!a.text.empty()) j["text"] = a.text;
    if (writer) j["kl_base_written"] = a.kl_base;
    if (base) {
      const Ppl bp = perplexity_of(base_stats);
      j["kl_divergence"] = {{"base", a.kl_base},
                            {"base_top_k", base->header().top_k},
                            {"base_tail_samples", base->header().tail_samples},
                            {"lower_bound_mean", bound_stats.mean},
                            {"base_ppl", bp.value},
                            {"base_ppl_error", bp.error},
                            {"mean", kl_stats.mean},
                            {"mean_error", kl_stats.std_error},
                            {"quantiles_of", exact_kl ? "exact" : "lower_bound"},
                            {"median", bound_stats.median},
                            {"p99", bound_stats.p99},
                            {"max", bound_stats.max},
                            {"same_top", agree},
                            {"same_top_error", agree_err}};
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("chunks: {} of {} tokens, {} scored tokens\n", opt.n_chunks, opt.ctx, nll_stats.count);
  if (!base) {
    fmt::print("PPL = {:.4f} +/- {:.5f}\n", ppl.value, ppl.error);
    return 0;
  }
  const Ppl bp = perplexity_of(base_stats);
  fmt::print("PPL(model) = {:.4f} +/- {:.5f}\n", ppl.value, ppl.error);
  fmt::print("PPL(base)  = {:.4f} +/- {:.5f}\n", bp.value, bp.error);
  const eval::KlBaseHeader& bh = base->header();
  if (bh.tail_samples > 0) {
    fmt::print("KL divergence (base || model): the base's top {} tokens exactly, the rest "
               "estimated from {} samples per position:\n", bh.top_k, bh.tail_samples);
  } else {
    fmt::print("KL divergence (base || model), over the base's top {} tokens{}:\n", bh.top_k,
               bh.top_k >= bh.n_vocab ? " (the whole vocabulary: exact)" : " and the rest merged");
  }
  fmt::print("  mean   {:.8f} +/- {:.8f}\n", kl_stats.mean, kl_stats.std_error);
  if (bh.tail_samples > 0 || bh.top_k < bh.n_vocab) {
    fmt::print("  mean lower bound (the rest merged into one outcome) {:.8f}\n", bound_stats.mean);
  }
  // Quantiles of per-position lower bounds bound the true quantiles from below (order
  // statistics are monotone); the sampled estimates are too noisy per position for quantiles.
  const char* of = exact_kl ? "" : " (lower bound)";
  fmt::print("  median {:.8f}{}\n", bound_stats.median, of);
  fmt::print("  p99    {:.8f}{}\n", bound_stats.p99, of);
  fmt::print("  max    {:.8f}{}\n", bound_stats.max, of);
  fmt::print("same top token: {:.3f} +/- {:.3f} %\n", 100 * agree, 100 * agree_err);
  return 0;
}

}  // namespace

Command perplexity_command() {
  auto args = std::make_shared<PerplexityArgs>();
  Command c;
  c.name = "perplexity";
  c.add = [args](CLI::App& app) {
    auto* sub = app.add_subcommand(
        "perplexity", "Perplexity of a model on a text; KL divergence against a saved base model");
    sub->add_option("-m,--model", args->model, "GGUF model file")->required();
    sub->add_option("-f,--file", args->text,
                    "Text file (tokenized once, after one BOS; optional with --kl-divergence, "
                    "where the base file holds the tokens)");
    auto* ctx = sub->add_option("-c,--ctx", args->ctx, "Tokens per chunk")
                    ->capture_default_str()
                    ->check(CLI::Range(4, 1 << 20));
    auto* chunks = sub->add_option("--chunks", args->chunks, "Chunks to score (0: all the text holds)")
                       ->capture_default_str()
                       ->check(CLI::Range(0, 1 << 24));
    sub->add_option("-b,--batch", args->batch,
                    "Tokens per forward step (batch / ctx chunks per step when >= ctx)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 16));
    add_backend_options(*sub, args->backend);
    add_kv_cache_type_option(*sub, args->kv_cache_type);
    sub->add_flag("--json", args->json, "Print the summary as JSON");
    sub->add_option("--kl-divergence-base", args->kl_base,
                    "Without --kl-divergence: save this model's predictions to FILE; with it: "
                    "the base file to compare against");
    sub->add_flag("--kl-divergence", args->kl,
                  "Compare the model against --kl-divergence-base FILE (KL divergence, same top "
                  "token)");
    sub->add_option("--kl-top-k", args->kl_top_k,
                    "Log-probs saved per position in the base file (the rest merged into one)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 24));
    sub->add_option("--kl-tail-samples", args->kl_tail_samples,
                    "Ids sampled per position from outside the top k, for an unbiased KL estimate "
                    "(0: only the merged lower bound)")
        ->capture_default_str()
        ->check(CLI::Range(0, 1 << 16));
    sub->callback([args, ctx, chunks] {
      args->ctx_given = ctx->count() > 0;
      args->chunks_given = chunks->count() > 0;
    });
  };
  c.run = [args] { return run_perplexity(*args); };
  return c;
}

}  // namespace cadenza::cli
