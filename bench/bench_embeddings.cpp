// bench_embeddings: embeddings per second of a GGUF embedding model on the CPU backend, for inputs
// of n tokens at several batch sizes, with wall and process CPU time per repetition (so that runs
// on a shared machine can be judged, as bench_model does).
//
//   bench_embeddings MODEL.gguf [n_tokens=512] [batches=1,32] [reps=3] [threads=2]
//
// A bert encoder (model/encoder.h) takes a batch as one forward pass (attention within each
// sequence); a decoder with a pooling type embeds the batch's inputs one after another through a
// Session (what `cadenza serve` does: server/embedder.h). Token ids are deterministic and valid
// (not text), the first one the vocabulary's [CLS]/BOS position by convention.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/encoder.h"
#include "model/model.h"
#include "model/pooling.h"
#include "model/session.h"

namespace {

using cadenza::bench::cpu_seconds;
using cadenza::bench::median;
using cadenza::bench::wall_seconds;

}  // namespace

int main(int argc, char** argv) {
  using namespace cadenza;
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_embeddings MODEL.gguf [n_tokens] [batches] [reps] [threads]\n");
    return 2;
  }
  const std::string path = argv[1];
  const int n_tokens = argc > 2 ? std::atoi(argv[2]) : 512;
  std::vector<int> batches;
  {
    std::stringstream ss(argc > 3 ? argv[3] : "1,32");
    std::string b;
    while (std::getline(ss, b, ',')) batches.push_back(std::atoi(b.c_str()));
  }
  const int reps = argc > 4 ? std::atoi(argv[4]) : 3;
  const int threads = argc > 5 ? std::atoi(argv[5]) : 2;
  if (n_tokens < 1 || reps < 1 || threads < 1 || batches.empty()) {
    std::fprintf(stderr, "bench_embeddings: bad arguments\n");
    return 2;
  }
  auto backend = kernels::make_cpu_backend({.n_threads = threads});
  auto file = gguf::GgufFile::open(path);
  if (!file) {
    std::fprintf(stderr, "%s\n", file.error().c_str());
    return 1;
  }
  std::shared_ptr<const gguf::GgufFile> shared(std::move(*file));
  std::unique_ptr<model::Encoder> encoder;
  std::unique_ptr<model::Model> decoder;
  std::unique_ptr<model::Session> session;
  model::Pooling pooling = model::Pooling::kMean;
  int64_t n_vocab = 0;
  if (model::Encoder::is_encoder(*shared)) {
    auto e = model::Encoder::load(shared, *backend);
    if (!e) {
      std::fprintf(stderr, "%s\n", e.error().c_str());
      return 1;
    }
    encoder = std::move(*e);
    n_vocab = encoder->config().n_vocab;
  } else {
    auto m = model::Model::load(shared, *backend);
    if (!m) {
      std::fprintf(stderr, "%s\n", m.error().c_str());
      return 1;
    }
    decoder = std::move(*m);
    auto p = model::pooling_of(*shared);
    if (p && p->has_value() && **p != model::Pooling::kRank && **p != model::Pooling::kNone)
      pooling = **p;
    auto s = model::Session::create(*decoder, {.max_tokens = n_tokens, .max_batch_tokens = 128});
    if (!s) {
      std::fprintf(stderr, "%s\n", s.error().c_str());
      return 1;
    }
    session = std::move(*s);
    n_vocab = decoder->config().n_vocab;
  }
  std::printf("model %s (%s), %d tokens per input, %d threads, %d reps (median)\n", path.c_str(),
              encoder ? "bert encoder" : "decoder", n_tokens, threads, reps);
  std::printf("%6s %12s %12s %14s %12s\n", "batch", "wall s", "cpu s", "embeddings/s", "tokens/s");
  for (int batch : batches) {
    std::vector<std::vector<int32_t>> inputs(static_cast<size_t>(batch));
    for (int b = 0; b < batch; ++b)
      for (int i = 0; i < n_tokens; ++i)
        inputs[b].push_back(static_cast<int32_t>((7 + i * 31 + b * 101) % n_vocab));
    std::vector<double> walls, cpus;
    for (int r = 0; r <= reps; ++r) {  // repetition 0 warms up
      const double w0 = wall_seconds(), c0 = cpu_seconds();
      if (encoder) {
        std::vector<model::EncoderInput> in;
        for (const auto& t : inputs) in.push_back({t});
        auto v = encoder->embed(in);
        if (!v) {
          std::fprintf(stderr, "%s\n", v.error().c_str());
          return 1;
        }
      } else {
        for (const auto& t : inputs) {
          session->reset();
          auto h = session->hidden_all(t);
          if (!h) {
            std::fprintf(stderr, "%s\n", h.error().c_str());
            return 1;
          }
          auto v = model::pool(*h, n_tokens, decoder->config().n_embd, pooling);
          model::l2_normalize(v);
        }
      }
      if (r > 0) {
        walls.push_back(wall_seconds() - w0);
        cpus.push_back(cpu_seconds() - c0);
      }
    }
    const double w = median(walls);
    std::printf("%6d %12.3f %12.3f %14.2f %12.0f\n", batch, w, median(cpus), batch / w,
                batch * static_cast<double>(n_tokens) / w);
  }
  return 0;
}
