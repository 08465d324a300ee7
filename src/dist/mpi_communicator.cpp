#include "dist/mpi_communicator.h"

#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace cadenza::dist {

namespace {

using Clock = std::chrono::steady_clock;

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<size_t>(len));
}

// MPI counts are ints: larger payloads are split by the callers below into int-sized pieces.
constexpr size_t kMaxChunk = size_t{1} << 30;

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, std::string name, bool owned)
      : comm_(comm), name_(std::move(name)), owned_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~MpiCommunicator() override {
    if (owned_ && !broken_) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  // All-gather, then a sum in rank order on every rank: each element's sum is
  // ((x0 + x1) + x2) + ... whatever the payload size, so a token's result does not depend on how
  // many rows the step had (batch invariance) nor on the algorithm MPI picks for that size. It
  // moves (size-1) x count floats into every rank, as much as a ring all-reduce at size 2 and
  // more beyond (docs/distributed.md).
  Status all_reduce_sum(float* data, size_t count) override {
    Timer t(stats_[Op::AllReduce], count * sizeof(float));
    if (size_ == 1) return {};
    const size_t bytes = count * sizeof(float);
    if (bytes > kMaxChunk) return fail("all_reduce: payload too large for one call");
    gathered_.resize(count * static_cast<size_t>(size_));
    MPI_Request req;
    if (Status st = check(MPI_Iallgather(data, static_cast<int>(bytes), MPI_BYTE, gathered_.data(),
                                         static_cast<int>(bytes), MPI_BYTE, comm_, &req),
                          "all_reduce"); !st) {
      return st;
    }
    if (Status st = wait(req, "all_reduce", -1, Wait::Bounded); !st) return st;
    const float* first = gathered_.data();
    for (size_t i = 0; i < count; ++i) data[i] = first[i];
    for (int r = 1; r < size_; ++r) {
      const float* part = gathered_.data() + static_cast<size_t>(r) * count;
      for (size_t i = 0; i < count; ++i) data[i] += part[i];
    }
    return {};
  }

  Status broadcast(void* data, size_t bytes, int root, Wait w) override {
    // An unbounded wait is a worker idle until the driver's next command: not communication
    // time (its call and bytes still count).
    Timer t(stats_[Op::Broadcast], rank_ == root ? bytes : 0, w == Wait::Bounded);
    auto* p = static_cast<uint8_t*>(data);
    return in_chunks(bytes, [&](size_t done, int n, MPI_Request* req) {
      return check(MPI_Ibcast(p + done, n, MPI_BYTE, root, comm_, req), "broadcast");
    }, "broadcast", root, w);
  }

  Status gather(const void* send, std::span<const size_t> send_bytes, void* recv,
                int root) override {
    Timer t(stats_[Op::Gather], send_bytes[static_cast<size_t>(rank_)]);
    std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
    size_t offset = 0;
    for (int r = 0; r < size_; ++r) {
      if (send_bytes[static_cast<size_t>(r)] > kMaxChunk || offset > kMaxChunk) {
        return fail(fmt::format("gather: {} bytes is more than one call moves", offset));
      }
      counts[static_cast<size_t>(r)] = static_cast<int>(send_bytes[static_cast<size_t>(r)]);
      displs[static_cast<size_t>(r)] = static_cast<int>(offset);
      offset += send_bytes[static_cast<size_t>(r)];
    }
    MPI_Request req;
    if (Status st = check(MPI_Igatherv(send, counts[static_cast<size_t>(rank_)], MPI_BYTE, recv,
                                       counts.data(), displs.data(), MPI_BYTE, root, comm_, &req),
                          "gather"); !st) {
      return st;
    }
    return wait(req, "gather", -1, Wait::Bounded);
  }

  Status all_gather(const void* send, size_t bytes, void* recv) override {
    Timer t(stats_[Op::AllGather], bytes);
    if (bytes > kMaxChunk) return fail("all_gather: payload too large for one call");
    MPI_Request req;
    if (Status st = check(MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, recv,
                                         static_cast<int>(bytes), MPI_BYTE, comm_, &req),
                          "all_gather"); !st) {
      return st;
    }
    return wait(req, "all_gather", -1, Wait::Bounded);
  }

  Status all_to_all(const void* send, size_t bytes_per_rank, void* recv) override {
    Timer t(stats_[Op::AllToAll], bytes_per_rank * static_cast<size_t>(size_));
    if (bytes_per_rank > kMaxChunk) return fail("all_to_all: payload too large for one call");
    MPI_Request req;
    if (Status st = check(MPI_Ialltoall(send, static_cast<int>(bytes_per_rank), MPI_BYTE, recv,
                                        static_cast<int>(bytes_per_rank), MPI_BYTE, comm_, &req),
                          "all_to_all"); !st) {
      return st;
    }
    return wait(req, "all_to_all", -1, Wait::Bounded);
  }

  Status send(const void* data, size_t bytes, int peer) override {
    Timer t(stats_[Op::Send], bytes);
    const auto* p = static_cast<const uint8_t*>(data);
    return in_chunks(bytes, [&](size_t done, int n, MPI_Request* req) {
      return check(MPI_Isend(p + done, n, MPI_BYTE, peer, kTag, comm_, req), "send");
    }, "send", peer, Wait::Bounded);
  }

  Status recv(void* data, size_t bytes, int peer, Wait w) override {
    Timer t(stats_[Op::Recv], 0, w == Wait::Bounded);
    auto* p = static_cast<uint8_t*>(data);
    return in_chunks(bytes, [&](size_t done, int n, MPI_Request* req) {
      return check(MPI_Irecv(p + done, n, MPI_BYTE, peer, kTag, comm_, req), "recv");
    }, "recv", peer, w);
  }

  Result<std::unique_ptr<Communicator>> split(int color, int key, std::string name) override {
    if (broken_) return Error(broken_message_);
    MPI_Comm sub;
    if (Status st = check(MPI_Comm_split(comm_, color, key, &sub), "split"); !st) {
      return st.error_value();
    }
    return std::unique_ptr<Communicator>(new MpiCommunicator(sub, std::move(name), true));
  }

 private:
  static constexpr int kTag = 7;

  struct Timer {
    Timer(OpStats& s, size_t bytes, bool timed = true)
        : stats(s), start(Clock::now()), timed(timed) {
      ++stats.calls;
      stats.bytes += bytes;
    }
    ~Timer() {
      if (timed) stats.seconds += std::chrono::duration<double>(Clock::now() - start).count();
    }
    OpStats& stats;
    Clock::time_point start;
    bool timed;
  };

  Status fail(std::string message) {
    if (!broken_) {
      broken_ = true;
      broken_message_ = fmt::format("{} communicator: {}", name_, message);
    }
    return Error(broken_message_);
  }

  // Runs a transfer of `bytes` as pieces of at most kMaxChunk (MPI counts are ints), one at a
  // time: `start(offset, count, &request)` posts a piece, which is then waited for. A transfer
  // of 0 bytes still posts one (empty) piece: the peers match it.
  template <typename Start>
  Status in_chunks(size_t bytes, Start start, const char* what, int peer, Wait w) {
    size_t done = 0;
    do {
      const size_t n = std::min(bytes - done, kMaxChunk);
      MPI_Request req;
      if (Status st = start(done, static_cast<int>(n), &req); !st) return st;
      if (Status st = wait(req, what, peer, w); !st) return st;
      done += n;
    } while (done < bytes);
    return {};
  }

  Status check(int rc, const char* what) {
    if (broken_) return Error(broken_message_);
    if (rc == MPI_SUCCESS) return {};
    return fail(fmt::format("{} failed on rank {}: {}", what, rank_, mpi_error_string(rc)));
  }

  // Polls `req` until it completes: spins briefly (a collective in the middle of a forward pass
  // usually completes within microseconds), then yields, then sleeps with a growing pause (up
  // to 1 ms) so that a waiting rank leaves its core to the others.
  Status wait(MPI_Request& req, const char* what, int peer, Wait w) {
    const Clock::time_point start = Clock::now();
    int flag = 0;
    for (uint64_t polls = 0;; ++polls) {
      MPI_Status status;
      const int rc = MPI_Test(&req, &flag, &status);
      if (rc != MPI_SUCCESS) {
        return fail(fmt::format("{} failed on rank {}{}: {}", what, rank_,
                                peer >= 0 ? fmt::format(" (peer rank {})", peer) : "",
                                mpi_error_string(rc)));
      }
      if (flag) return {};
      if (polls < 2000) continue;
      if (polls < 4000) {
        std::this_thread::yield();
        continue;
      }
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      if (w == Wait::Bounded && timeout_s_ > 0 && waited > timeout_s_) {
        // The request cannot be completed or freed safely while a peer may still write into
        // it; the communicator is broken from here on and the process is expected to exit.
        return fail(fmt::format("{} on rank {} got no answer from {} within {:.1f} s", what, rank_,
                                peer >= 0 ? fmt::format("rank {}", peer) : "every peer",
                                timeout_s_));
      }
      const auto pause = std::chrono::microseconds(waited < 0.01 ? 20 : waited < 0.1 ? 200 : 1000);
      std::this_thread::sleep_for(pause);
    }
  }

  MPI_Comm comm_;
  std::string name_;
  bool owned_;
  int rank_ = 0, size_ = 1;
  bool broken_ = false;
  std::string broken_message_;
  std::vector<float> gathered_;  // all_reduce_sum's [size][count] (grows, reused)
};

bool g_initialized = false;

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::AllReduce: return "all_reduce";
    case Op::Broadcast: return "broadcast";
    case Op::Gather: return "gather";
    case Op::AllGather: return "all_gather";
    case Op::Send: return "send";
    case Op::Recv: return "recv";
    case Op::AllToAll: return "all_to_all";
    case Op::kCount: break;
  }
  return "?";
}

bool MpiRuntime::launched() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return std::getenv("SLURM_PROCID") != nullptr && std::getenv("SLURM_NTASKS") != nullptr &&
         std::getenv("SLURM_STEP_ID") != nullptr;
}

bool MpiRuntime::initialized() { return g_initialized; }

Status MpiRuntime::init(int* argc, char*** argv) {
  if (g_initialized) return {};
  int provided = 0;
  const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  if (rc != MPI_SUCCESS) return make_error("MPI_Init_thread failed: {}", mpi_error_string(rc));
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return Error("the MPI library does not support MPI_THREAD_SERIALIZED");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  g_initialized = true;
  std::atexit(&MpiRuntime::finalize);
  return {};
}

Result<std::unique_ptr<Communicator>> MpiRuntime::world() {
  if (!g_initialized) return Error("MPI is not initialised");
  return std::unique_ptr<Communicator>(new MpiCommunicator(MPI_COMM_WORLD, "world", false));
}

void MpiRuntime::abort(int code) {
  if (g_initialized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void MpiRuntime::finalize() {
  if (!g_initialized) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
  g_initialized = false;
}

std::string MpiRuntime::host_name() {
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  if (!g_initialized || MPI_Get_processor_name(name, &len) != MPI_SUCCESS) return "?";
  return std::string(name, static_cast<size_t>(len));
}

}  // namespace cadenza::dist
