// Choosing a backend by name: "cpu", "cuda" or "cuda:N" (the --device option of the commands).
// The CUDA backend exists only in builds where CMake found the CUDA toolkit (docs/cuda.md); in
// other builds asking for it is a clear error, as is asking for it on a machine without a GPU.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "kernels/backend.h"
#include "util/result.h"

namespace cadenza::kernels {

struct DeviceChoice {
  enum class Kind { Cpu, Cuda };
  Kind kind = Kind::Cpu;
  int index = 0;  // CUDA device ordinal (0 for "cuda")
  std::string to_string() const;  // "cpu" or "cuda:N"
};

// Parses "cpu", "cuda", "cuda:N" (N a decimal ordinal, 0..1023). Errors name the bad value.
Result<DeviceChoice> parse_device(std::string_view device);

struct BackendOptions {
  int n_threads = 0;  // CPU backend: threads running kernels (0 = all hardware threads)
  bool repack = true;  // CPU backend: repacked weight copies while they fit (CpuBackendOptions)
};

// Whether this build contains the CUDA backend.
bool cuda_built();
// CUDA devices on this machine (0 without the CUDA backend, a driver or a GPU).
int cuda_devices();

// Under a process launcher (mpirun, srun), this process's index among those on its host
// (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID or MPI_LOCALRANKID), else -1. "cuda" without an
// ordinal then means device local_rank % cuda_devices(): one GPU per rank on a multi-GPU host.
int launcher_local_rank();

// The backend for `device` (parse_device syntax). Errors: a bad device string, "this build has no
// CUDA support" (built without the CUDA toolkit), "no CUDA device" (no driver or GPU), an ordinal
// out of range. The CUDA backend logs its device name, memory and settings when created.
Result<std::unique_ptr<Backend>> create_backend(std::string_view device,
                                                const BackendOptions& options = {});

}  // namespace cadenza::kernels
