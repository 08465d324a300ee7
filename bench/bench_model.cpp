// bench_model: prompt (pp) and generation (tg) speed of a GGUF model on the CPU backend, like
// `cadenza bench`, but reporting per repetition both wall time and the process's CPU time, so that
// runs on a shared machine can be judged: with one thread (-t 1, no pool spinning) CPU time is the
// work itself, and tokens per CPU-second is what an idle core would deliver.
//
//   bench_model MODEL.gguf [n_prompt=512] [n_gen=128] [reps=3] [threads=2]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <vector>

#include "bench_timing.h"
#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/session.h"

namespace {

using cadenza::bench::cpu_seconds;
using cadenza::bench::median;
using cadenza::bench::wall_seconds;

}  // namespace

int main(int argc, char** argv) {
  using namespace cadenza;
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_model MODEL.gguf [n_prompt] [n_gen] [reps] [threads]\n");
    return 2;
  }
  const int n_prompt = argc > 2 ? std::atoi(argv[2]) : 512;
  const int n_gen = argc > 3 ? std::atoi(argv[3]) : 128;
  const int reps = argc > 4 ? std::max(1, std::atoi(argv[4])) : 3;
  const int threads = argc > 5 ? std::atoi(argv[5]) : 2;
  auto file = gguf::GgufFile::open(argv[1]);
  if (!file) {
    std::fprintf(stderr, "%s\n", file.error().c_str());
    return 1;
  }
  auto backend = kernels::make_cpu_backend({.n_threads = threads});
  auto model = model::Model::load(std::move(*file), *backend);
  if (!model) {
    std::fprintf(stderr, "%s\n", model.error().c_str());
    return 1;
  }
  const int32_t n_vocab = static_cast<int32_t>((*model)->config().n_vocab);
  auto session = model::Session::create(**model, {.max_tokens = std::max(n_prompt, n_gen) + 16});
  if (!session) {
    std::fprintf(stderr, "%s\n", session.error().c_str());
    return 1;
  }
  model::Session& s = **session;
  std::vector<int32_t> prompt(static_cast<size_t>(std::max(n_prompt, 32)));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = 3 + static_cast<int32_t>((i * 7919 + 13) % static_cast<size_t>(n_vocab - 3));
  // Warm-up: repacking, page faults, scratch sizes.
  if (!s.eval(std::span<const int32_t>(prompt.data(), 32))) return 1;
  std::vector<double> pp_wall, pp_cpu, tg_wall, tg_cpu;
  for (int r = 0; r < reps; ++r) {
    if (n_prompt > 0) {
      s.reset();
      const double w0 = wall_seconds(), c0 = cpu_seconds();
      if (!s.eval(std::span<const int32_t>(prompt.data(), static_cast<size_t>(n_prompt)))) return 1;
      pp_wall.push_back(n_prompt / (wall_seconds() - w0));
      pp_cpu.push_back(n_prompt / (cpu_seconds() - c0));
    }
    if (n_gen > 0) {
      s.reset();
      int32_t token = prompt[0];
      const double w0 = wall_seconds(), c0 = cpu_seconds();
      for (int i = 0; i < n_gen; ++i) {
        if (!s.eval({&token, 1})) return 1;
        token = 3 + (token * 7919 + i) % (n_vocab - 3);
      }
      tg_wall.push_back(n_gen / (wall_seconds() - w0));
      tg_cpu.push_back(n_gen / (cpu_seconds() - c0));
    }
  }
  std::printf("%s threads=%d reps=%d\n", argv[1], threads, reps);
  if (n_prompt > 0)
    std::printf("pp%d: %.2f t/s wall, %.2f t/s per CPU-second (medians)\n", n_prompt,
                median(pp_wall), median(pp_cpu));
  if (n_gen > 0)
    std::printf("tg%d: %.2f t/s wall, %.2f t/s per CPU-second (medians)\n", n_gen,
                median(tg_wall), median(tg_cpu));
  return 0;
}
