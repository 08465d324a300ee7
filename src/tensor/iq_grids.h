// Lookup tables that are part of the GGUF format of the IQ types (and of the non-linear 4-bit
// types): a block stores indices into them, so decoder and encoder must use exactly these values.
// Defined in iq_grids.cpp (the grids) and here (the short value tables).
//
// The tables are plain data (no functions), so the per-ISA kernel files may read them.
#pragma once

#include <cstdint>

namespace cadenza::iq {

// N grid points of D coordinates each; v[i] is point i.
template <int N, int D, typename T>
struct Grid {
  T v[N][D];
};

// IQ2_XXS (256 points), IQ2_XS (512), IQ2_S (1024): 8 magnitudes each from {8, 25, 43};
// the signs are stored separately.
extern const Grid<256, 8, uint8_t> kIq2xxs;
extern const Grid<512, 8, uint8_t> kIq2xs;
extern const Grid<1024, 8, uint8_t> kIq2s;
// IQ3_XXS (256 points): 4 magnitudes each from {4, 12, 20, 28, 36, 44, 52, 62}.
extern const Grid<256, 4, uint8_t> kIq3xxs;
// IQ3_S (512 points): 4 magnitudes each from {1, 3, 5, ..., 15}.
extern const Grid<512, 4, uint8_t> kIq3s;
// IQ1_S and IQ1_M (2048 points): 8 signed values each from {-1, 0, 1}.
extern const Grid<2048, 8, int8_t> kIq1s;

// Sign bytes of the types that store 7 sign bits per group of 8 (IQ2_XXS, IQ2_XS, IQ3_XXS):
// v[s] = s | (parity of s) << 7, so a group always has an even number of negative elements.
// Bit j set = element j of the group is negative.
struct SignTable {
  uint8_t v[128];
};
extern const SignTable kSigns;

// IQ4_NL / IQ4_XS: a 4-bit code q decodes to d * kIq4nlValues[q].
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// MXFP4: a 4-bit FP4 E2M1 code (bit 3 sign, bits 2-1 exponent, bit 0 mantissa) holds the value
// kMxfp4Values[q] / 2, i.e. 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives. The table holds twice
// the E2M1 value so that it is integral; the block scale is halved to compensate.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

}  // namespace cadenza::iq
