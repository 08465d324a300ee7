#include "util/shared_library.h"

#include <dlfcn.h>

namespace cadenza {

Result<SharedLibrary> SharedLibrary::open(std::initializer_list<std::string> candidates) {
  std::string tried;
  for (const std::string& candidate : candidates) {
    // RTLD_LOCAL: its symbols serve only the pointers bound from it.
    if (void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      SharedLibrary lib;
      lib.handle_ = handle;
      lib.name_ = candidate;
      return lib;
    }
    const char* why = dlerror();
    tried += fmt::format("{}{}: {}", tried.empty() ? "" : "; ", candidate,
                         why != nullptr ? why : "not found");
  }
  if (tried.empty()) return Error("no library to open");
  return Error(tried);
}

Result<void*> SharedLibrary::symbol(const char* name) const {
  dlerror();  // clear an earlier error
  void* address = dlsym(handle_, name);
  if (address == nullptr) {
    const char* why = dlerror();
    return make_error("{}: no symbol '{}'{}{}", name_, name, why != nullptr ? ": " : "",
                      why != nullptr ? why : "");
  }
  return address;
}

}  // namespace cadenza
