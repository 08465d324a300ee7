// AMX availability probe. Compiled alone with -mamx-tile -mamx-int8 (see CMakeLists.txt): nothing
// here runs unless cpuid lists AMX-TILE/INT8 and XCR0 enables tile state. Like every per-ISA file it
// uses no C++ library templates (their out-of-line copies could be shared with other files).
#include "kernels/simd/amx_tile_config.h"
#include "kernels/simd/internal.h"
#include "kernels/simd/intrinsics.h"

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#ifndef ARCH_REQ_XCOMP_PERM
#define ARCH_REQ_XCOMP_PERM 0x1023
#endif

namespace cadenza::simd::detail {
namespace {

constexpr int kXfeatureXtiledata = 18;

constexpr TileConfig kProbeConfig = full_tiles_config(3);  // tiles 0..2: 16 rows x 64 bytes

[[noreturn]] void probe_child() {
  _tile_loadconfig(&kProbeConfig);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_dpbssd(0, 1, 2);
  _tile_release();
  _exit(0);
}

}  // namespace

AmxProbe probe_amx() {
  AmxProbe r;
  // The permission is per process and inherited by children, so it is requested here.
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, kXfeatureXtiledata) != 0) {
    r.detail = "arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) refused";
    return r;
  }
  r.permitted = true;
  // A VM may list AMX and still fault (SIGILL/SIGSEGV) on the first tile instruction: run the
  // probe in a child so a fault costs nothing but the child.
  pid_t pid = fork();
  if (pid < 0) {
    r.detail = "fork() for the tile probe failed";
    return r;
  }
  if (pid == 0) probe_child();
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      r.detail = "waitpid() for the tile probe failed";
      return r;
    }
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    r.works = true;
    r.detail = "tile probe (ldtilecfg + tdpbssd) ran";
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
    r.detail = "tile probe killed by a signal";
  } else {
    r.detail = "tile probe failed";
  }
  return r;
}

}  // namespace cadenza::simd::detail
