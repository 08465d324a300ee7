#include "model/distributed.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "dist/mpi_communicator.h"

#include "gguf/gguf.h"
#include "model/config.h"

namespace cadenza::model {

namespace {

uint64_t fnv1a(std::span<const uint8_t> bytes, uint64_t h = 1469598103934665603ull) {
  for (const uint8_t b : bytes) {
    h ^= b;
    h *= 1099511628211ull;
  }
  return h;
}

// Identifies the binary: two ranks run the same build when version, compiler and this file's
// compile time agree (a package built once and installed on every host does).
uint64_t build_id() {
  static const std::string id = fmt::format("cadenza {} {} {} {} {}", CADENZA_VERSION_STRING,
                                            __VERSION__, __DATE__, __TIME__, sizeof(CommandHeader));
  return fnv1a({reinterpret_cast<const uint8_t*>(id.data()), id.size()});
}

struct Fingerprint {
  uint64_t file_size = 0;
  uint64_t header_checksum = 0;
  uint64_t build = 0;
  uint64_t placement = 0;  // the expert placement's checksum (0: none)
};

Status check_shapes(const dist::ParallelConfig& pc, const ModelConfig& m, const std::string& file) {
  const int64_t tp = pc.tensor;
  if (tp > m.n_heads) {
    return make_error("{}: --tensor-parallel-size {} is more than the model's {} attention heads",
                      file, tp, m.n_heads);
  }
  if (m.n_heads % tp != 0) {
    return make_error("{}: --tensor-parallel-size {} does not divide the model's {} attention "
                      "heads", file, tp, m.n_heads);
  }
  if (m.n_kv_heads % tp != 0 && tp % m.n_kv_heads != 0) {
    return make_error("{}: --tensor-parallel-size {} and the model's {} KV heads: one must divide "
                      "the other", file, tp, m.n_kv_heads);
  }
  const int64_t ffn = m.n_experts > 0 ? m.n_ff_expert : m.n_ff;
  if (!pc.expert_parallel && ffn < tp) {
    return make_error("{}: --tensor-parallel-size {} is more than the FFN width {}", file, tp, ffn);
  }
  if (pc.expert_parallel && m.n_experts > 0 && m.n_experts < tp) {
    return make_error("{}: --enable-expert-parallel over {} ranks but the model has {} experts",
                      file, tp, m.n_experts);
  }
  if (pc.expert_placement && !pc.expert_parallel) {
    return make_error("--expert-placement needs --enable-expert-parallel");
  }
  if (pc.expert_placement && m.n_experts == 0) {
    return make_error("{}: --expert-placement given but the model has no experts", file);
  }
  if (pc.expert_placement) {
    if (Status st = pc.expert_placement->check(pc.tensor, m.n_experts, m.n_layers); !st) return st;
  }
  if (m.n_ff_shared_expert > 0 && m.n_ff_shared_expert < tp) {
    return make_error("{}: --tensor-parallel-size {} is more than the shared expert's width {}",
                      file, tp, m.n_ff_shared_expert);
  }
  return {};
}

}  // namespace

const char* command_name(Command c) {
  switch (c) {
    case Command::Forward: return "forward";
    case Command::CreateKv: return "create_kv";
    case Command::FreeKv: return "free_kv";
    case Command::Reserve: return "reserve";
    case Command::CopyBlock: return "copy_block";
    case Command::Ping: return "ping";
    case Command::Stop: return "stop";
  }
  return "?";
}

Distributed::Distributed(dist::Communicator& world, dist::Topology topology, ModelShard shard)
    : world_(world), topology_(std::move(topology)), shard_(shard) {}

Distributed::~Distributed() = default;

Result<std::unique_ptr<Distributed>> Distributed::create(dist::Communicator& world,
                                                         const dist::ParallelConfig& pc,
                                                         const gguf::GgufFile& file,
                                                         const ModelConfig& m,
                                                         kernels::Backend& backend) {
  Result<dist::Topology> topology = dist::Topology::create(pc, world.rank(), world.size(),
                                                           m.n_layers);
  if (!topology) return topology.error_value();
  if (Status st = check_shapes(pc, m, file.name()); !st) return st.error_value();

  // Same file, same build on every rank: one all-gather, then every rank compares.
  Fingerprint mine{file.file_size(), fnv1a(file.header_bytes()), build_id(),
                   pc.expert_placement ? pc.expert_placement->checksum() : 0};
  std::vector<Fingerprint> all(static_cast<size_t>(world.size()));
  if (Status st = world.all_gather(&mine, sizeof mine, all.data()); !st) return st.error_value();
  for (int r = 1; r < world.size(); ++r) {
    const Fingerprint& f = all[static_cast<size_t>(r)];
    if (f.build != all[0].build) {
      return make_error("rank {} runs a different cadenza build than rank 0: install the same "
                        "binary on every host", r);
    }
    if (f.placement != all[0].placement) {
      return make_error("rank {} uses a different --expert-placement than rank 0: give every "
                        "rank the same file", r);
    }
    if (f.file_size != all[0].file_size || f.header_checksum != all[0].header_checksum) {
      return make_error("rank {} opened a different model file than rank 0 ({} bytes, header "
                        "checksum {:016x}; rank 0: {} bytes, {:016x}): every rank must open the "
                        "same GGUF file from its own disk", r, f.file_size, f.header_checksum,
                        all[0].file_size, all[0].header_checksum);
    }
  }

  ModelShard shard;
  shard.tp_rank = topology->tp_rank;
  shard.tp_size = pc.tensor;
  shard.layer_begin = topology->layer_begin();
  shard.layer_end = topology->layer_end();
  shard.first_stage = topology->first_stage();
  shard.last_stage = topology->last_stage();
  shard.expert_parallel = pc.expert_parallel && m.n_experts > 0;
  shard.placement = pc.expert_placement;
  std::unique_ptr<Distributed> d(new Distributed(world, std::move(*topology), shard));
  Result<std::unique_ptr<dist::Communicator>> tp =
      world.split(d->topology_.stage, d->topology_.tp_rank,
                  fmt::format("tp[stage {}]", d->topology_.stage));
  if (!tp) return tp.error_value();
  d->tp_ = std::move(*tp);
  d->tp_->set_timeout(world.timeout());
  if (Status st = d->choose_device_collectives(backend); !st) return st.error_value();
  d->vocab_starts_.push_back(0);
  for (int r = 0; r < pc.tensor; ++r) {
    d->vocab_starts_.push_back(d->vocab_starts_.back() +
                               dist::split_evenly(m.n_vocab, pc.tensor, r).count);
  }
  return d;
}

// NCCL when every rank of the tensor-parallel group runs on a GPU of its own (host name and
// device ordinal differ pairwise), else MPI through the host. The same decision on every rank.
Status Distributed::choose_device_collectives(kernels::Backend& backend) {
  if (tp_->size() == 1 || backend.host_memory()) return {};
  struct Place {
    uint64_t host = 0;
    int64_t device = -1;
  };
  const std::string host = dist::MpiRuntime::host_name();
  Place mine{fnv1a({reinterpret_cast<const uint8_t*>(host.data()), host.size()}),
             backend.device_ordinal()};
  std::vector<Place> all(static_cast<size_t>(tp_->size()));
  if (Status st = tp_->all_gather(&mine, sizeof mine, all.data()); !st) return st;
  bool own_gpu = true;
  for (size_t i = 0; i < all.size(); ++i) {
    own_gpu = own_gpu && all[i].device >= 0;
    for (size_t j = 0; j < i; ++j) {
      own_gpu = own_gpu && !(all[i].host == all[j].host && all[i].device == all[j].device);
    }
  }
  if (!own_gpu || !dist::nccl_built()) {
    if (tp_->rank() == 0) {
      spdlog::info("{}: all-reduce over MPI, device views staged through the host ({})",
                   tp_->name(), !own_gpu ? "ranks share a GPU" : "this build has no NCCL");
    }
    return {};
  }
  Result<std::unique_ptr<dist::NcclGroup>> g = dist::NcclGroup::create(*tp_, mine.device);
  if (!g) return g.error_value();
  nccl_ = std::move(*g);
  if (tp_->rank() == 0) spdlog::info("{}: all-reduce over NCCL, one GPU per rank", tp_->name());
  return {};
}

Status Distributed::reserve(kernels::Backend& backend, int64_t floats) {
  if (!nccl_) return {};
  const size_t bytes = static_cast<size_t>(floats) * sizeof(float) * static_cast<size_t>(tp_->size());
  if (nccl_gather_ && nccl_gather_->size_bytes() >= bytes) return {};
  Result<std::unique_ptr<kernels::Buffer>> b = backend.allocate(bytes);
  if (!b) return b.error_value();
  nccl_gather_ = std::move(*b);
  return {};
}

Status Distributed::status() const {
  if (failed_) return error_;
  return {};
}

void Distributed::fail(Error e) {
  if (!failed_) {
    failed_ = true;
    error_ = std::move(e);
  }
}

void Distributed::all_reduce(kernels::Backend& be, kernels::Matrix x) {
  if (tp_->size() == 1 || failed_) return;
  assert(x.contiguous());
  const size_t count = static_cast<size_t>(x.rows * x.cols);
  if (nccl_) {  // gather every rank's partial on the GPUs, then add in rank order
    assert(nccl_gather_ && nccl_gather_->size_bytes() >= count * sizeof(float) * tp_->size());
    be.synchronize();
    auto* parts = static_cast<float*>(nccl_gather_->data());
    if (Status st = nccl_->all_gather(x.data, count * sizeof(float), parts); !st) {
      return fail(st.error_value());
    }
    auto part = [&](int r) { return kernels::Matrix::of(parts + count * r, x.rows, x.cols); };
    be.add(part(0), part(1), x);
    for (int r = 2; r < tp_->size(); ++r) be.add(x, part(r), x);
    return;
  }
  float* data = x.data;
  if (!be.host_memory()) {
    staging_.resize(count);
    be.read_view(x, staging_.data());
    data = staging_.data();
  }
  if (Status st = tp_->all_reduce_sum(data, count); !st) return fail(st.error_value());
  if (!be.host_memory()) be.write_view(staging_.data(), x);
}

void Distributed::send_hidden(kernels::Backend& be, kernels::Matrix x) {
  if (failed_) return;
  assert(x.contiguous());
  const size_t count = static_cast<size_t>(x.rows * x.cols);
  const float* data = x.data;
  if (!be.host_memory()) {
    staging_.resize(count);
    be.read_view(x, staging_.data());
    data = staging_.data();
  }
  const int peer = topology_.rank_of(topology_.stage + 1, topology_.tp_rank);
  if (Status st = world_.send(data, count * sizeof(float), peer); !st) fail(st.error_value());
}

void Distributed::recv_hidden(kernels::Backend& be, kernels::Matrix x) {
  if (failed_) return;
  assert(x.contiguous());
  const size_t count = static_cast<size_t>(x.rows * x.cols);
  float* data = x.data;
  if (!be.host_memory()) {
    staging_.resize(count);
    data = staging_.data();
  }
  const int peer = topology_.rank_of(topology_.stage - 1, topology_.tp_rank);
  if (Status st = world_.recv(data, count * sizeof(float), peer); !st) return fail(st.error_value());
  if (!be.host_memory()) be.write_view(staging_.data(), x);
}

void Distributed::deliver_logits(std::span<const float> local, int64_t n_rows, int64_t n_vocab,
                                 std::span<float> out) {
  const int last = topology_.config.pipeline - 1;
  const int collector = topology_.rank_of(last, 0);  // tp rank 0 of the last stage
  if (topology_.stage == last) {
    const int tp = topology_.config.tensor;
    std::span<float> full = out;
    if (topology_.tp_rank == 0 && !driver()) {
      full_logits_.resize(static_cast<size_t>(n_rows * n_vocab));
      full = full_logits_;
    }
    if (tp == 1) {
      if (topology_.tp_rank == 0) std::copy(local.begin(), local.end(), full.begin());
    } else if (!failed_) {
      std::vector<size_t> bytes(static_cast<size_t>(tp));
      for (int r = 0; r < tp; ++r) {
        bytes[static_cast<size_t>(r)] =
            static_cast<size_t>(n_rows * (vocab_starts_[r + 1] - vocab_starts_[r])) * sizeof(float);
      }
      gathered_.resize(static_cast<size_t>(n_rows * n_vocab));
      if (Status st = tp_->gather(local.data(), bytes, gathered_.data(), 0); !st) {
        return fail(st.error_value());
      }
      if (topology_.tp_rank == 0) {  // [tp][rows][cols_r] -> [rows][V]
        const float* part = gathered_.data();
        for (int r = 0; r < tp; ++r) {
          const int64_t v0 = vocab_starts_[r], cols = vocab_starts_[r + 1] - v0;
          for (int64_t i = 0; i < n_rows; ++i) {
            std::copy_n(part + i * cols, cols, full.data() + i * n_vocab + v0);
          }
          part += n_rows * cols;
        }
      }
    }
    if (topology_.tp_rank == 0 && !driver() && !failed_) {
      if (Status st = world_.send(full_logits_.data(), full_logits_.size() * sizeof(float), 0); !st) {
        fail(st.error_value());
      }
    }
  } else if (driver() && !failed_) {
    if (Status st = world_.recv(out.data(), out.size() * sizeof(float), collector); !st) {
      fail(st.error_value());
    }
  }
}

Status Distributed::send_command(const CommandHeader& header, std::span<const uint8_t> payload) {
  if (failed_) return error_;
  assert(driver() && header.payload_bytes == payload.size());
  CommandHeader h = header;
  Status st = world_.broadcast(&h, sizeof h, 0);
  if (st && !payload.empty()) {
    st = world_.broadcast(const_cast<uint8_t*>(payload.data()), payload.size(), 0);
  }
  if (!st) fail(st.error_value());
  return st;
}

Result<CommandHeader> Distributed::receive_command(std::vector<uint8_t>& payload) {
  if (failed_) return error_;
  CommandHeader h;
  Status st = world_.broadcast(&h, sizeof h, 0, dist::Wait::Forever);
  if (st) {
    payload.resize(h.payload_bytes);
    if (h.payload_bytes > 0) st = world_.broadcast(payload.data(), payload.size(), 0);
  }
  if (!st) {
    fail(st.error_value());
    return st.error_value();
  }
  return h;
}

Status Distributed::ping(double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  CommandHeader h;
  h.command = static_cast<int32_t>(Command::Ping);
  if (Status st = send_command(h, {}); !st) return st;
  const double saved = world_.timeout();
  world_.set_timeout(timeout_s);
  reports_.resize(static_cast<size_t>(world_.size()));
  Status result;
  for (int r = 1; r < world_.size() && result; ++r) {
    RankReport answer;
    Status st = world_.recv(&answer, sizeof answer, r);
    if (!st) {
      result = make_error("{} did not answer the heartbeat: {}", topology_.describe(r), st.error());
    } else if (answer.rank != r) {
      result = make_error("{} answered the heartbeat as rank {}", topology_.describe(r),
                          answer.rank);
    } else {
      reports_[static_cast<size_t>(r)] = answer;
    }
  }
  world_.set_timeout(saved);
  if (!result) fail(result.error_value());
  last_ping_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

dist::CommStats Distributed::comm_stats() const {
  dist::CommStats sum = world_.stats();
  for (size_t i = 0; i < static_cast<size_t>(dist::Op::kCount); ++i) {
    sum.ops[i].calls += tp_->stats().ops[i].calls;
    sum.ops[i].bytes += tp_->stats().ops[i].bytes;
    sum.ops[i].seconds += tp_->stats().ops[i].seconds;
  }
  return sum;
}

Status Distributed::answer_ping(uint64_t expert_tokens) {
  RankReport me;
  me.rank = world_.rank();
  me.comm = comm_stats();
  me.expert_tokens = expert_tokens;
  Status st = world_.send(&me, sizeof me, 0);
  if (!st) fail(st.error_value());
  return st;
}

std::vector<RankReport> Distributed::reports(uint64_t own_expert_tokens) const {
  std::vector<RankReport> out = reports_;
  out.resize(static_cast<size_t>(world_.size()));
  for (size_t r = 0; r < out.size(); ++r) out[r].rank = static_cast<int32_t>(r);
  out[0].comm = comm_stats();
  out[0].expert_tokens = own_expert_tokens;
  return out;
}

}  // namespace cadenza::model
