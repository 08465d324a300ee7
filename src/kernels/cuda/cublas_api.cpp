#include "kernels/cuda/cublas_api.h"

#include <string>

#include "util/shared_library.h"

namespace cadenza::kernels::cuda {

namespace {

Result<CublasApi> load() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  Result<SharedLibrary> lib = SharedLibrary::open({
      soname,
#ifdef CADENZA_CUDA_LIBRARY_DIR
      std::string(CADENZA_CUDA_LIBRARY_DIR) + "/" + soname,
#endif
  });
  if (!lib) return make_error("cuBLAS could not be loaded ({})", lib.error());
  CublasApi api;
  Status st = lib->bind(api.create, "cublasCreate_v2");
  if (st) st = lib->bind(api.destroy, "cublasDestroy_v2");
  if (st) st = lib->bind(api.set_stream, "cublasSetStream_v2");
  if (st) st = lib->bind(api.sgemm, "cublasSgemm_v2");
  if (st) st = lib->bind(api.gemm_ex, "cublasGemmEx");
  if (st) st = lib->bind(api.status_string, "cublasGetStatusString");
  if (!st) return make_error("cuBLAS: {}", st.error());
  return api;
}

}  // namespace

Result<const CublasApi*> cublas_api() {
  static const Result<CublasApi> loaded = load();  // once, thread-safe
  if (!loaded) return loaded.error_value();
  return &*loaded;
}

}  // namespace cadenza::kernels::cuda
