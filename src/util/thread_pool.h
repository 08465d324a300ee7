// ThreadPool: a fixed set of worker threads, created once, that run data-parallel loops.
//
//   ThreadPool pool(4);                       // the caller + 3 workers
//   pool.parallel_for(rows, [&](int64_t i, int thread) { ... row i ... });
//
// parallel_for hands out the indices [0, n) one at a time from a shared counter (dynamic load
// balancing) to the calling thread and the workers, and returns when all of them are done. Which
// thread runs an index is unspecified, so a caller that wants reproducible results computes each
// index's result entirely inside fn(i) (no cross-index reductions whose order depends on threads).
//
// Latency: idle workers spin briefly on the job counter (yielding the core now and then, so an
// oversubscribed machine still hands work over quickly), then sleep on a futex (std::atomic::wait).
// A worker takes part in a job only if it joins before the caller has claimed the last index; the
// caller then waits only for the workers that joined. So a worker that the OS has not scheduled
// (other processes on the cores) never stalls a loop the caller could finish alone, which would
// otherwise cost a scheduler time slice per op. No thread is created or joined per call.
//
// Thread-safety: parallel_for may be called from any thread; calls from different threads are
// serialised (one loop at a time). A parallel_for called from inside fn (nested) runs serially on
// the calling worker. fn must not throw.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace cadenza {

class ThreadPool {
 public:
  // n_threads: total threads that run loop bodies, the caller included (so n_threads - 1 workers
  // are started). 0 means std::thread::hardware_concurrency(). Values < 1 are treated as 1.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads that run loop bodies (workers + the caller). Thread indices passed to fn are in
  // [0, size()).
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(i, thread_index) for every i in [0, n) and returns when all calls have finished.
  template <typename Fn>
  void parallel_for(int64_t n, Fn&& fn) {
    using FnType = std::remove_reference_t<Fn>;
    run(n, [](void* ctx, int64_t i, int thread) { (*static_cast<FnType*>(ctx))(i, thread); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using Body = void (*)(void* ctx, int64_t i, int thread);

  void run(int64_t n, Body body, void* ctx);
  void worker_main(int thread_index);
  void drain(int thread_index);  // claims and runs indices of the current job until none are left
  bool join(uint32_t generation);

  std::vector<std::thread> workers_;
  std::mutex caller_mutex_;  // one loop at a time

  // The current job. Written by the caller before `generation_` is bumped (release), read by
  // workers after they observe the bump (acquire).
  Body body_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  alignas(64) std::atomic<int64_t> next_index_{0};
  alignas(64) std::atomic<uint32_t> generation_{0};  // bumped once per job; also the stop signal
  // Admission to the current job: generation in the high 32 bits, kJobClosed once the caller has
  // claimed the last index, and the number of workers that joined in the low bits. A worker reads
  // the job fields only after joining, so late workers never touch a job that moved on.
  static constexpr uint64_t kJobClosed = uint64_t{1} << 31;
  alignas(64) std::atomic<uint64_t> job_state_{0};
  alignas(64) std::atomic<uint32_t> finished_workers_{0};  // joined workers done with the job
  bool stopping_ = false;  // written before the final generation bump
};

}  // namespace cadenza
