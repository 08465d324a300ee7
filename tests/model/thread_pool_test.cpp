#include "util/thread_pool.h"

#include <atomic>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

namespace cadenza {
namespace {

TEST(ThreadPool, VisitsEveryIndexOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t i, int thread) {
        EXPECT_GE(thread, 0);
        EXPECT_LT(thread, threads);
        hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadPool, ManySmallLoopsAndNesting) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int round = 0; round < 2000; ++round) {
    pool.parallel_for(5, [&](int64_t i, int) {
      // Nested loops run serially on the calling thread.
      pool.parallel_for(3, [&](int64_t j, int) { total.fetch_add(i * 3 + j); });
    });
  }
  EXPECT_EQ(total.load(), 2000 * (14 * 15 / 2));
}

TEST(ThreadPool, SleepsAndWakesUp) {
  ThreadPool pool(2);
  std::atomic<int> count{0};
  pool.parallel_for(4, [&](int64_t, int) { count.fetch_add(1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // workers go to sleep
  pool.parallel_for(4, [&](int64_t, int) { count.fetch_add(1); });
  EXPECT_EQ(count.load(), 8);
}

}  // namespace
}  // namespace cadenza
