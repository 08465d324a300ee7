#include "cli/parallel.h"

#include <csignal>
#include <cstdlib>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "dist/mpi_communicator.h"
#include "model/model.h"
#include "util/resident_memory.h"

namespace cadenza::cli {

void add_parallel_options(CLI::App& sub, ParallelArgs& a) {
  sub.add_option("--tensor-parallel-size", a.tensor,
                 "Split every layer across this many processes (run under mpirun; "
                 "docs/distributed.md)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  sub.add_option("--pipeline-parallel-size", a.pipeline,
                 "Split the layers into this many stages, one group of processes each")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  sub.add_option("--pp-layers", a.pp_layers,
                 "Layers per pipeline stage, e.g. 12,12,8 (default: an even split)");
  sub.add_flag("--enable-expert-parallel", a.expert_parallel,
               "MoE models: place whole experts across the tensor-parallel ranks instead of "
               "splitting every expert");
  sub.add_option("--expert-placement", a.expert_placement,
                 "With --enable-expert-parallel: a JSON file of the experts each tp rank holds, "
                 "{\"ranks\": [[0,1,...],[...]], \"layers\": {\"3\": [...]}} "
                 "(docs/distributed.md; default: an even split)");
  sub.add_option("--dist-timeout", a.timeout_s,
                 "Seconds a rank may take to answer before the job is declared failed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

void expand_short_parallel_flags(std::vector<std::string>& args) {
  for (std::string& a : args) {
    if (a == "-tp") a = "--tensor-parallel-size";
    else if (a == "-pp") a = "--pipeline-parallel-size";
    else if (a.rfind("-tp=", 0) == 0) a = "--tensor-parallel-size=" + a.substr(4);
    else if (a.rfind("-pp=", 0) == 0) a = "--pipeline-parallel-size=" + a.substr(4);
  }
}

bool Job::driver() const { return !world || world->rank() == 0; }

Result<Job> start_job(const ParallelArgs& a) {
  Job job;
  job.config.tensor = a.tensor;
  job.config.pipeline = a.pipeline;
  job.config.expert_parallel = a.expert_parallel;
  if (!a.pp_layers.empty()) {
    Result<std::vector<int64_t>> layers = dist::ParallelConfig::parse_stage_layers(a.pp_layers);
    if (!layers) return layers.error_value();
    job.config.stage_layers = std::move(*layers);
  }
  if (!a.expert_placement.empty()) {
    Result<dist::ExpertPlacement> placement = dist::ExpertPlacement::load(a.expert_placement);
    if (!placement) return placement.error_value();
    job.config.expert_placement =
        std::make_shared<const dist::ExpertPlacement>(std::move(*placement));
  }
  if (!dist::MpiRuntime::launched()) {
    if (job.config.distributed()) {
      return make_error("tensor parallel {} x pipeline parallel {} needs {} processes: start it "
                        "with mpirun -np {} cadenza ... (docs/distributed.md)", a.tensor,
                        a.pipeline, job.config.world_size(), job.config.world_size());
    }
    return job;
  }
  if (Status st = dist::MpiRuntime::init(nullptr, nullptr); !st) return st.error_value();
  Result<std::unique_ptr<dist::Communicator>> world = dist::MpiRuntime::world();
  if (!world) return world.error_value();
  job.world = std::move(*world);
  job.world->set_timeout(a.timeout_s);
  const int rank = job.world->rank();
  // Every rank logs to its own stderr (mpirun merges them): tag each line with the rank.
  spdlog::set_pattern(fmt::format("[%Y-%m-%d %H:%M:%S.%e] [rank {}] [%^%l%$] %v", rank));
  if (rank == 0) {
    spdlog::info("distributed: {} processes (tp {} x pp {}{}), driver on {} (pid {})",
                 job.world->size(), a.tensor, a.pipeline,
                 a.expert_parallel ? ", expert parallel" : "", dist::MpiRuntime::host_name(),
                 ::getpid());
  }
  return job;
}

std::optional<int> serve_if_worker(model::Model& model) {
  if (model.is_driver()) return std::nullopt;
  // A worker ends when the driver stops it (Command::Stop) or the job is torn down: a SIGTERM
  // or SIGINT that mpirun forwards to every rank is the driver's to act on (a graceful drain
  // ends with Stop), not a reason for a worker to vanish under it.
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGINT, SIG_IGN);
  const dist::Topology& t = model.distributed()->topology();
  spdlog::info("worker {} on {} (pid {}): layers [{}, {}), serving the driver",
               t.describe(t.world_rank), dist::MpiRuntime::host_name(), ::getpid(),
               t.layer_begin(), t.layer_end());
  Status st = model.serve_worker();
  if (!st) {
    spdlog::error("worker failed: {}", st.error());
    return 1;
  }
  spdlog::info("worker {}: done; peak resident memory {:.1f} MiB", t.describe(t.world_rank),
               static_cast<double>(peak_resident_bytes()) / 1048576.0);
  return 0;
}

void abort_job(const std::string& why) {
  spdlog::error("{}; ending every rank of the job", why);
  spdlog::default_logger()->flush();
  dist::MpiRuntime::abort(1);
}

}  // namespace cadenza::cli
