#include "dist/nccl_api.h"

#include <string>

#include "util/shared_library.h"

namespace cadenza::dist {

namespace {

Result<NcclApi> load() {
  const std::string soname = "libnccl.so." + std::to_string(NCCL_MAJOR);
  Result<SharedLibrary> lib = SharedLibrary::open({
      soname,
#ifdef CADENZA_NCCL_LIBRARY_DIR
      std::string(CADENZA_NCCL_LIBRARY_DIR) + "/" + soname,
#endif
  });
  if (!lib) return make_error("NCCL could not be loaded ({})", lib.error());
  NcclApi api;
  Status st = lib->bind(api.get_unique_id, "ncclGetUniqueId");
  if (st) st = lib->bind(api.comm_init_rank, "ncclCommInitRank");
  if (st) st = lib->bind(api.comm_destroy, "ncclCommDestroy");
  if (st) st = lib->bind(api.all_gather, "ncclAllGather");
  if (st) st = lib->bind(api.error_string, "ncclGetErrorString");
  if (!st) return make_error("NCCL: {}", st.error());
  return api;
}

}  // namespace

Result<const NcclApi*> nccl_api() {
  static const Result<NcclApi> loaded = load();  // once, thread-safe
  if (!loaded) return loaded.error_value();
  return &*loaded;
}

}  // namespace cadenza::dist
