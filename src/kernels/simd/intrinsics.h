// <immintrin.h> for the per-ISA files (kernels_avx2.cpp, kernels_avx512*.cpp, repack_vnni.cpp,
// attention_avx512.cpp, amx_probe.cpp). Nothing else: the intrinsics are always-inline builtins, so
// including them breaks no rule of internal.h.
//
// GCC 12 flags the deliberately self-initialised _mm512_undefined_*() inside its own intrinsic
// headers as uninitialised once inlined deep enough (a false positive): the warning is silenced for
// the header only, our code keeps it.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
