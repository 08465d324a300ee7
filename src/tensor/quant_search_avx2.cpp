// The K-quant scale searches for AVX2 (quant_search_simd.inc; built with -mavx2 -mfma, while
// -ffp-contract=off keeps every multiply and add separate, as in the scalar reference).
// One register holds 8 trials; fit_scale_min evaluates 8 trials per pass.
//
// No AVX-512 variant: compiled for AVX-512 (16 trials per register, windows of 16) the
// fit_scale_min search took 1010 ns per Q4_K sub-block against this file's 840 ns, and with 8
// trials per register it was no faster than this one (950 ns), on a 2-vCPU AMD EPYC VM with AVX-512.
#define QUANT_SEARCH_NS avx2
#define QUANT_SEARCH_WIDTH 8
#define QUANT_SEARCH_WINDOW 8
#include "tensor/quant_search_simd.inc"
