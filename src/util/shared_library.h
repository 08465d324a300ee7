// A shared library opened at run time (dlopen) rather than linked: for dependencies only some
// runs use. Linking cuBLAS, for one, maps and relocates it in every process, a CPU-only
// `cadenza --version` included (~144 MiB resident, docs/performance.md "Memory"); opened here,
// it costs nothing until a CUDA backend is created.
//
// Ownership: a library stays open for the rest of the process (never dlclose'd: libraries such as
// cuBLAS register exit handlers and keep threads that must not outlive their code).
// Thread-safety: open() and symbol() may be called from any thread (dlopen/dlsym are).
#pragma once

#include <initializer_list>
#include <string>

#include "util/result.h"

namespace cadenza {

class SharedLibrary {
 public:
  // Opens the first of `candidates` that loads (each a soname searched the usual way, with
  // LD_LIBRARY_PATH and the ld.so cache, or a path). The error names every candidate and why it
  // failed.
  static Result<SharedLibrary> open(std::initializer_list<std::string> candidates);

  // The address of `name` in the library; an error when it has no such symbol.
  Result<void*> symbol(const char* name) const;

  // Assigns symbol `name` to a function pointer (`F` the pointer's type).
  template <typename F>
  Status bind(F& function, const char* name) const {
    Result<void*> s = symbol(name);
    if (!s) return s.error_value();
    function = reinterpret_cast<F>(*s);
    return {};
  }

  // The candidate that was opened.
  const std::string& name() const { return name_; }

 private:
  void* handle_ = nullptr;
  std::string name_;
};

}  // namespace cadenza
