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
  // Memory for repacked weight copies (the VNNI GEMM's interleaved layout, kernels/simd/repack.h),
  // made on a weight's first matmul while the total stays within this budget; the weights past it
  // run from their file layout (row-major kernels, the same results at a lower speed). -1: half of
  // the memory available when the backend is created (MemAvailable); 0: no copies (--no-repack,
  // for a model near the size of RAM whose pages should stay the file's).
  int64_t repack_budget_bytes = -1;
  // Once a weight that points into a memory-mapped file (WeightDesc::file_mapped) is repacked,
  // drop this process's pages of its file bytes, chunk by chunk as the repacking proceeds, so
  // resident memory holds one copy of each matrix instead of two. What still reads the original
  // rows (get_rows on a tied embedding, another ISA level, the budget's row-major fallback) pages
  // them in again from the page cache, with the same bytes. false keeps them (tests compare).
  bool release_repacked_pages = true;
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
// Bytes of repacked weight copies made so far (all CPU backends together).
uint64_t repacked_bytes();
// Bytes of memory-mapped file ranges whose pages were dropped after repacking (all CPU backends
// together; whole pages inside each weight's range, counted once per weight).
uint64_t released_mapped_bytes();
}  // namespace cpu

}  // namespace cadenza::kernels
