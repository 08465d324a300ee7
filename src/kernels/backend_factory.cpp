// Backend selection by device string (see backend_factory.h).
#include "kernels/backend_factory.h"

#include <charconv>
#include <cstdlib>

#include "kernels/cpu/cpu_backend.h"
#ifdef CADENZA_HAS_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace cadenza::kernels {

std::string DeviceChoice::to_string() const {
  return kind == Kind::Cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Result<DeviceChoice> parse_device(std::string_view device) {
  if (device == "cpu") return DeviceChoice{DeviceChoice::Kind::Cpu, 0};
  if (device == "cuda") return DeviceChoice{DeviceChoice::Kind::Cuda, 0};
  constexpr std::string_view kPrefix = "cuda:";
  if (device.substr(0, kPrefix.size()) == kPrefix) {
    const std::string_view digits = device.substr(kPrefix.size());
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (!digits.empty() && ec == std::errc() && end == digits.data() + digits.size() && index >= 0 &&
        index < 1024) {
      return DeviceChoice{DeviceChoice::Kind::Cuda, index};
    }
    return make_error("bad device '{}': expected cuda:N with N a device number (0, 1, ...)", device);
  }
  return make_error("unknown device '{}': expected cpu, cuda or cuda:N", device);
}

int cuda_devices() {
#ifdef CADENZA_HAS_CUDA
  return cuda_device_count();
#else
  return 0;
#endif
}

int launcher_local_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') {
      int rank = -1;
      const std::string_view s(v);
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), rank);
      if (ec == std::errc() && end == s.data() + s.size() && rank >= 0) return rank;
    }
  }
  return -1;
}

bool cuda_built() {
#ifdef CADENZA_HAS_CUDA
  return true;
#else
  return false;
#endif
}

Result<std::unique_ptr<Backend>> create_backend(std::string_view device,
                                                const BackendOptions& options) {
  Result<DeviceChoice> choice = parse_device(device);
  if (!choice) return choice.error_value();
  if (choice->kind == DeviceChoice::Kind::Cpu) {
    return make_cpu_backend({.n_threads = options.n_threads,
                             .repack_budget_bytes = options.repack ? -1 : 0});
  }
#ifdef CADENZA_HAS_CUDA
  int index = choice->index;
  // "cuda" under a launcher: this rank's own GPU where the host has several.
  if (device == "cuda" && launcher_local_rank() >= 0 && cuda_device_count() > 0) {
    index = launcher_local_rank() % cuda_device_count();
  }
  Result<std::unique_ptr<Backend>> backend = make_cuda_backend({.device = index});
  if (!backend) return make_error("--device {}: {}", device, backend.error());
  return backend;
#else
  return make_error("--device {}: this build has no CUDA support (build with the CUDA toolkit "
                    "installed, see docs/cuda.md)",
                    device);
#endif
}

}  // namespace cadenza::kernels
