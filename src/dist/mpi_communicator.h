// MPI: the process launcher's world (mpirun, srun) and a Communicator over it.
//
//   if (MpiRuntime::launched()) {                        // started by mpirun / srun?
//     if (Status st = MpiRuntime::init(&argc, &argv); !st) fail(st.error());
//     auto world = MpiRuntime::world();                  // rank 0 of size() is the driver
//   }
//
// MPI is initialised only when a launcher started the process (or a test asks for it), so the
// binary outside mpirun behaves as if MPI were not linked in. Errors are returned
// (MPI_ERRORS_RETURN), not aborts. Every wait polls (MPI_Test) with a short sleep once the peer
// is slow, so an idle worker does not spin a core and a bounded wait can give up.
// Thread-safety: MPI is initialised for MPI_THREAD_SERIALIZED: calls from any thread, one at a
// time (the main thread loads, then the engine thread steps).
#pragma once

#include <memory>
#include <string>

#include "dist/communicator.h"
#include "util/result.h"

namespace cadenza::dist {

class MpiRuntime {
 public:
  // Whether an MPI launcher started this process (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK or
  // a Slurm step's SLURM_PROCID with SLURM_NTASKS). Cheap; does not initialise MPI.
  static bool launched();
  // Initialises MPI once (later calls do nothing). Errors: MPI could not start.
  static Status init(int* argc, char*** argv);
  static bool initialized();
  // A communicator over every process of the job (call init first).
  static Result<std::unique_ptr<Communicator>> world();
  // Ends the whole job at once (every rank), with `code`: the last resort after a peer failed.
  [[noreturn]] static void abort(int code);
  // Finalises MPI if init() ran (registered with atexit by init).
  static void finalize();
  // This host's name (MPI_Get_processor_name), for logs.
  static std::string host_name();
};

}  // namespace cadenza::dist
