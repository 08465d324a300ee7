#include "util/thread_pool.h"

namespace cadenza {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  std::this_thread::yield();
#endif
}

// Spin iterations before a waiting thread sleeps on a futex: long enough to bridge the host-side
// work between two kernels of a forward pass, short enough not to burn a core when the pool is
// idle. Every kYieldEvery-th iteration yields the core, so that a pool with more threads than free
// cores (other processes, oversubscription) still hands work over in microseconds, not time slices.
constexpr int kSpinIterations = 1 << 13;
constexpr int kYieldEvery = 64;

// One iteration of a wait loop.
inline void spin_pause(int iteration) {
  if (iteration % kYieldEvery == kYieldEvery - 1) {
    std::this_thread::yield();
  } else {
    cpu_relax();
  }
}

// Set while a thread runs loop bodies, so that a nested parallel_for runs serially.
thread_local bool t_inside_loop = false;
thread_local int t_thread_index = 0;

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads == 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (n_threads < 1) n_threads = 1;
  workers_.reserve(static_cast<size_t>(n_threads - 1));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(caller_mutex_);
    stopping_ = true;
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
  }
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run(int64_t n, Body body, void* ctx) {
  if (n <= 0) return;
  if (t_inside_loop || workers_.empty() || n == 1) {
    const bool was_inside = t_inside_loop;
    t_inside_loop = true;
    for (int64_t i = 0; i < n; ++i) body(ctx, i, t_thread_index);
    t_inside_loop = was_inside;
    return;
  }

  std::lock_guard<std::mutex> lock(caller_mutex_);
  body_ = body;
  ctx_ = ctx;
  n_ = n;
  next_index_.store(0, std::memory_order_relaxed);
  finished_workers_.store(0, std::memory_order_relaxed);
  const uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
  job_state_.store(static_cast<uint64_t>(generation) << 32, std::memory_order_release);
  generation_.store(generation, std::memory_order_release);
  generation_.notify_all();

  t_thread_index = 0;
  drain(0);

  // Close the job to latecomers; wait only for the workers that joined it.
  const uint64_t state = job_state_.fetch_or(kJobClosed, std::memory_order_acq_rel);
  const uint32_t joined = static_cast<uint32_t>(state & (kJobClosed - 1));
  for (int spin = 0;; ++spin) {
    const uint32_t finished = finished_workers_.load(std::memory_order_acquire);
    if (finished == joined) break;
    if (spin < kSpinIterations) {
      spin_pause(spin);
    } else {
      finished_workers_.wait(finished, std::memory_order_acquire);
    }
  }
}

// Joins job `generation` unless it is closed or already replaced. Returns whether it joined.
bool ThreadPool::join(uint32_t generation) {
  uint64_t state = job_state_.load(std::memory_order_acquire);
  for (;;) {
    if ((state >> 32) != generation || (state & kJobClosed) != 0) return false;
    if (job_state_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel,
                                         std::memory_order_acquire))
      return true;
  }
}

void ThreadPool::drain(int thread_index) {
  t_inside_loop = true;
  for (;;) {
    const int64_t i = next_index_.fetch_add(1, std::memory_order_relaxed);
    if (i >= n_) break;
    body_(ctx_, i, thread_index);
  }
  t_inside_loop = false;
}

void ThreadPool::worker_main(int thread_index) {
  t_thread_index = thread_index;
  uint32_t seen = 0;
  for (;;) {
    uint32_t generation = seen;
    for (int spin = 0;; ++spin) {
      generation = generation_.load(std::memory_order_acquire);
      if (generation != seen) break;
      if (spin < kSpinIterations) {
        spin_pause(spin);
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
    }
    seen = generation;
    if (stopping_) return;
    if (!join(generation)) continue;  // the caller finished (or moved on) without us
    drain(thread_index);
    // After this increment the caller may post the next job: touch no job field past this point.
    finished_workers_.fetch_add(1, std::memory_order_acq_rel);
    finished_workers_.notify_one();
  }
}

}  // namespace cadenza
