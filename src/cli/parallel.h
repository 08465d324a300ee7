// The distributed options every model-running subcommand shares (run, generate, bench, serve):
// -tp/--tensor-parallel-size, -pp/--pipeline-parallel-size, --pp-layers,
// --enable-expert-parallel, --dist-timeout; and the launch under mpirun / srun
// (docs/distributed.md).
//
//   ParallelArgs pa;  add_parallel_options(*sub, pa);          // at parse time
//   auto job = start_job(pa);                                   // MPI up when launched
//   options.world = job->world.get(); options.parallel = job->config;
//   auto model = Model::load(..., options);
//   if (auto code = serve_if_worker(**model)) return *code;     // worker ranks end here
//
// Without a launcher and with -tp 1 -pp 1 nothing of this runs: MPI stays uninitialised.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/topology.h"
#include "util/result.h"

namespace CLI {
class App;
}

namespace cadenza::model {
class Model;
}

namespace cadenza::cli {

struct ParallelArgs {
  int tensor = 1;
  int pipeline = 1;
  std::string pp_layers;
  bool expert_parallel = false;
  std::string expert_placement;  // --expert-placement FILE
  double timeout_s = 30;  // a peer that does not answer within this is a failure
};

// --tensor-parallel-size / --pipeline-parallel-size; -tp and -pp (vLLM's spellings, which CLI11
// cannot declare: its short names are one letter) are rewritten by expand_short_parallel_flags.
void add_parallel_options(CLI::App& sub, ParallelArgs& args);
// Rewrites "-tp N" / "-pp N" (and -tp=N) in a command line to the long options, in place.
void expand_short_parallel_flags(std::vector<std::string>& args);

struct Job {
  std::unique_ptr<dist::Communicator> world;  // null in one process
  dist::ParallelConfig config;
  bool driver() const;
};

// Starts MPI when a launcher started this process (and tags every log line with the rank).
// Errors: bad --pp-layers, MPI that does not start, -tp/-pp > 1 without a launcher.
Result<Job> start_job(const ParallelArgs& args);

// On a worker rank: serves the driver until it stops, then returns the exit code (0, or 1
// after a failure, which is logged). On the driver and in one process: nullopt.
std::optional<int> serve_if_worker(model::Model& model);

// The driver's last resort after a rank failed: logs `why`, then ends every rank of the job
// with exit code 1 (MPI_Abort); in one process a plain exit.
[[noreturn]] void abort_job(const std::string& why);

}  // namespace cadenza::cli
