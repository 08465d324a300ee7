// Compute-peak loop for AMX int8 (peak_loops.h): tdpbssd on 16x16x64 tiles (16x64 s8 A times
// 64x16 s8 B, as 16 rows of 64 bytes each, into 16x16 int32 C) into six independent accumulator
// tiles from the same two source tiles, no tile loads or stores in the loop. Compiled alone with
// -mamx-tile -mamx-int8; it runs only where cpu_features().amx_usable (tile permission granted
// and the tile probe of amx_probe.cpp ran). No C++ library templates (internal.h).
#include "kernels/simd/intrinsics.h"

#include <cstdint>

#include "kernels/simd/amx_tile_config.h"
#include "kernels/simd/peak_loops.h"

namespace cadenza::simd::detail {
namespace {

constexpr TileConfig kPeakConfig = full_tiles_config(8);  // tiles 0..7: 16 rows x 64 bytes

}  // namespace

void peak_loop_amx_int8(int64_t iterations, int64_t* sink) {
  alignas(64) int8_t src[16 * 64];
  for (int i = 0; i < 16 * 64; ++i) src[i] = static_cast<int8_t>((i % 7) - 3);
  alignas(64) int32_t out[16 * 16];
  _tile_loadconfig(&kPeakConfig);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  _tile_loadd(6, src, 64);
  _tile_loadd(7, src, 64);
  for (int64_t i = 0; i < iterations; ++i) {
    _tile_dpbssd(0, 6, 7);
    _tile_dpbssd(1, 6, 7);
    _tile_dpbssd(2, 6, 7);
    _tile_dpbssd(3, 6, 7);
    _tile_dpbssd(4, 6, 7);
    _tile_dpbssd(5, 6, 7);
  }
  int64_t s = 0;
  _tile_stored(0, out, 64);
  s += out[0];
  _tile_stored(5, out, 64);
  s += out[255];
  _tile_release();
  *sink = s;
}

}  // namespace cadenza::simd::detail
