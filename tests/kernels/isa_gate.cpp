// isa_gate LEVEL PROGRAM [ARGS...]: runs PROGRAM with CADENZA_ISA=LEVEL when this CPU has LEVEL;
// otherwise prints why and exits 77, which ctest reports as Skipped (SKIP_RETURN_CODE). Without
// it, a forced level above the CPU's is capped to the detected one and the run would repeat that
// level while reporting Passed.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/simd/isa.h"

int main(int argc, char** argv) {
  using namespace cadenza::simd;
  if (argc < 3) {
    std::fprintf(stderr, "usage: isa_gate LEVEL PROGRAM [ARGS...]\n");
    return 2;
  }
  const auto level = isa_from_name(argv[1]);
  if (!level) {
    std::fprintf(stderr, "isa_gate: unknown ISA level '%s'\n", argv[1]);
    return 2;
  }
  if (*level > detected_isa()) {
    std::printf("SKIPPED: %s not available on this CPU (detected %s)\n", argv[1],
                std::string(isa_name(detected_isa())).c_str());
    return 77;
  }
  setenv("CADENZA_ISA", argv[1], 1);
  execv(argv[2], argv + 2);
  std::perror("isa_gate: execv");
  return 2;
}
