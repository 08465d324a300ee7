// The CPU backend: scalar reference kernels (portable C++, fixed reduction order), parallel over
// output rows on a persistent thread pool. Weights stay in their file type (quantized rows are
// decoded on the fly with tensor/quant.h); activations and the KV cache are f32.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/backend.h"

namespace cadenza::kernels {

struct CpuBackendOptions {
  // Threads that run kernels, the calling thread included; 0 = all hardware threads.
  int n_threads = 0;
};

// Thread-safety: like every Backend, one thread issues ops at a time; kernels fan out internally.
std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options = {});

namespace cpu {
// Process-wide debug counters of matmul_experts (all CPU backends together; relaxed atomics, one
// update per call): calls, expert matrices touched (each read once per call) and their bytes in
// the file type. Take differences around the region of interest.
struct ExpertCounters {
  uint64_t calls = 0, matrices = 0, bytes = 0;
};
ExpertCounters expert_counters();
}  // namespace cpu

}  // namespace cadenza::kernels
