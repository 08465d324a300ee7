// `cadenza imatrix -m MODEL -f CALIB.txt -o imatrix.gguf`: runs the model over a calibration text
// in chunks (each chunk its own sequence, starting with BOS, as `cadenza perplexity` does) and
// saves every weight matmul's mean squared input activations per channel (quantize/imatrix.h),
// which `cadenza quantize --imatrix` uses to weight the rounding error. docs/quantize.md.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "eval/activation_recorder.h"
#include "eval/chunk_runner.h"
#include "eval/scoring.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "quantize/imatrix.h"
#include "cli/eval_inputs.h"
#include "tokenizer/tokenizer.h"

namespace cadenza::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct ImatrixArgs {
  std::string model, text, output = "imatrix.gguf";
  int32_t ctx = 512;
  int32_t chunks = 0;      // 0: every whole chunk after --from-chunk
  int32_t from_chunk = 0;  // chunks of the text skipped first
  int32_t batch = 512;
  bool process_output = false;
  BackendArgs backend;
};

int fail(const std::string& message) {
  fmt::print(stderr, "imatrix: {}\n", message);
  return 1;
}

int run_imatrix(const ImatrixArgs& a) {
  auto text = read_text_file(a.text);
  if (!text) return fail(text.error());
  auto file = gguf::GgufFile::open(a.model);
  if (!file) return fail(file.error());
  std::shared_ptr<const gguf::GgufFile> shared = std::move(*file);
  auto tokenizer = Tokenizer::from_gguf(*shared);
  if (!tokenizer) return fail(tokenizer.error());
  auto sequence = bos_then_text_tokens(**tokenizer, *text, a.model);
  if (!sequence) return fail(sequence.error());
  const std::vector<int32_t>& tokens = *sequence;
  const int64_t available = static_cast<int64_t>(tokens.size()) / a.ctx - a.from_chunk;
  if (available < 1) {
    return fail(fmt::format("{}: {} tokens hold {} chunks of {} (--ctx), none after --from-chunk {}",
                            a.text, tokens.size(), tokens.size() / static_cast<size_t>(a.ctx), a.ctx,
                            a.from_chunk));
  }
  int32_t n_chunks = a.chunks == 0 ? static_cast<int32_t>(available) : a.chunks;
  if (n_chunks > available) {
    fmt::print(stderr, "imatrix: the text holds {} chunks of {} tokens after --from-chunk {}, not {}: using {}\n",
               available, a.ctx, a.from_chunk, n_chunks, available);
    n_chunks = static_cast<int32_t>(available);
  }
  const std::span<const int32_t> used(tokens.data() + static_cast<size_t>(a.from_chunk) * static_cast<size_t>(a.ctx),
                                      static_cast<size_t>(n_chunks) * static_cast<size_t>(a.ctx));

  auto created = create_backends(a.backend);
  if (!created) return fail(created.error());
  Backends backends = std::move(*created);
  if (!backends.main->host_memory() || (backends.experts && !backends.experts->host_memory())) {
    return fail("the imatrix is recorded on the CPU backend only (--device cpu)");
  }
  quantize::Imatrix imatrix;
  eval::ActivationRecorder recorder(*backends.main, imatrix, a.process_output);
  std::unique_ptr<eval::ActivationRecorder> expert_recorder;
  model::ModelConfig::ExpertOffload offload = backends.expert_offload();
  if (backends.experts) {
    expert_recorder = std::make_unique<eval::ActivationRecorder>(*backends.experts, imatrix, a.process_output);
    offload.backend = expert_recorder.get();
  }
  auto model = model::Model::load(shared, recorder, {.expert_offload = offload});
  if (!model) return fail(model.error());
  model::Model& m = **model;
  if (Status ok = check_eval_model(m.config(), **tokenizer, a.ctx, a.model); !ok) return fail(ok.error());

  eval::ChunkOptions opt;
  opt.ctx = a.ctx;
  opt.first = a.ctx / 2;
  opt.n_chunks = n_chunks;
  opt.batch_tokens = a.batch;
  opt.bos_id = (*tokenizer)->bos_id();
  fmt::print(stderr, "imatrix: {}: {} chunks of {} tokens (from chunk {}) of {}, {} threads\n",
             a.model, n_chunks, a.ctx, a.from_chunk, a.text, resolve_threads(a.backend.threads));
  // The perplexity of the chunks' second halves, as a check that the model reads the text.
  const int64_t n_vocab = m.config().n_vocab;
  double nll_sum = 0;
  int64_t nll_count = 0;
  std::vector<double> lp;
  const auto start = Clock::now();
  Status st = eval::run_chunks(m, used, opt, [&](int32_t chunk, std::span<const float> logits) -> Status {
    const int32_t n_scored = eval::scored_rows(opt);
    for (int32_t r = 0; r < n_scored; ++r) {
      eval::log_softmax(logits.subspan(static_cast<size_t>(r) * static_cast<size_t>(n_vocab),
                                       static_cast<size_t>(n_vocab)), lp);
      const int32_t target = used[static_cast<size_t>(chunk) * static_cast<size_t>(opt.ctx) +
                                  static_cast<size_t>(opt.first + r + 1)];
      nll_sum -= lp[static_cast<size_t>(target)];
      ++nll_count;
    }
    fmt::print(stderr, "imatrix: [{}/{}] ppl {:.4f}, {:.1f} s\n", chunk + 1, n_chunks,
               std::exp(nll_sum / static_cast<double>(nll_count)),
               std::chrono::duration<double>(Clock::now() - start).count());
    return {};
  });
  if (!st) return fail(st.error());
  imatrix.datasets = {a.text};
  imatrix.chunk_count = n_chunks;
  imatrix.chunk_size = a.ctx;
  if (Status ws = quantize::write_imatrix(imatrix, a.output); !ws) return fail(ws.error());
  fmt::print("imatrix: {} tensors from {} chunks of {} tokens written to {} ({:.1f} s)\n",
             imatrix.entries.size(), n_chunks, a.ctx, a.output,
             std::chrono::duration<double>(Clock::now() - start).count());
  return 0;
}

}  // namespace

Command imatrix_command() {
  auto args = std::make_shared<ImatrixArgs>();
  Command c;
  c.name = "imatrix";
  c.add = [args](CLI::App& app) {
    auto* sub = app.add_subcommand(
        "imatrix", "Per-channel activation statistics of a model on a calibration text, for quantize --imatrix");
    sub->add_option("-m,--model", args->model, "GGUF model file (full precision, ideally)")->required();
    sub->add_option("-f,--file", args->text, "Calibration text")->required();
    sub->add_option("-o,--output", args->output, "The imatrix file to write")->capture_default_str();
    sub->add_option("-c,--ctx", args->ctx, "Tokens per chunk")
        ->capture_default_str()
        ->check(CLI::Range(2, 1 << 20));
    sub->add_option("--chunks", args->chunks, "Chunks to run (0: all the text holds)")
        ->capture_default_str()
        ->check(CLI::Range(0, 1 << 24));
    sub->add_option("--from-chunk", args->from_chunk,
                    "Skip the text's first N chunks (to keep evaluation text out of the calibration)")
        ->capture_default_str()
        ->check(CLI::Range(0, 1 << 24));
    sub->add_option("-b,--batch", args->batch, "Tokens per forward step")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 16));
    sub->add_flag("--process-output", args->process_output,
                  "Also record output.weight (the LM head), skipped by default");
    add_backend_options(*sub, args->backend);
  };
  c.run = [args] { return run_imatrix(*args); };
  return c;
}

}  // namespace cadenza::cli
