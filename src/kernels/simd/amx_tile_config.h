// The 64-byte operand of ldtilecfg (palette 1), shared by the AMX files (amx_probe.cpp,
// peak_amx.cpp, repack_amx.cpp). A plain struct and a constexpr builder, no inline functions
// with ISA code (see internal.h for why that matters in per-ISA files).
//
// Keep configurations in read-only data (constexpr objects), not in a stack copy filled by
// stores: GCC 12 may drop such stores (it does not see that ldtilecfg reads all 64 bytes), and
// the first tile instruction then faults on a tile with no rows.
#pragma once

#include <cstdint>

namespace cadenza::simd::detail {

struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];  // bytes per row of tile t
  uint8_t rows[16];    // rows of tile t
};
static_assert(sizeof(TileConfig) == 64);

// Palette 1 with tiles [0, count) of 16 rows x 64 bytes, the rest unused.
constexpr TileConfig full_tiles_config(int count) {
  TileConfig cfg{};
  cfg.palette_id = 1;
  for (int t = 0; t < count; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  return cfg;
}

}  // namespace cadenza::simd::detail
