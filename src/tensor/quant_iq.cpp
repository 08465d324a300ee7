// Decoders of the grid types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M (layouts in
// blocks.h, grids in iq_grids.h). Each writes, per group of 8 (or 4) elements, the grid point's
// coordinates times the sub-block scale, with the stored signs (or IQ1's delta) applied.
#include <cstdint>
#include <cstring>

#include "tensor/iq_grids.h"
#include "tensor/quant.h"
#include "tensor/quant_impl.h"

namespace cadenza::quant_detail {
namespace {

uint32_t le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// y[t] = db * g[t] * (bit t of signs ? -1 : 1), t < n.
void put_signed(float* y, int n, const uint8_t* g, uint8_t signs, float db) {
  for (int t = 0; t < n; ++t)
    y[t] = db * static_cast<float>(g[t]) * ((signs >> t) & 1 ? -1.0f : 1.0f);
}

// y[t] = dl * (g[t] + delta), t < 8.
void put_delta(float* y, const int8_t* g, float dl, float delta) {
  for (int t = 0; t < 8; ++t) y[t] = dl * (static_cast<float>(g[t]) + delta);
}

constexpr float kIq1Delta = 0.125f;

}  // namespace

void dequantize_iq2_xxs(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockIQ2_XXS>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < 8; ++j) {
      const uint8_t* q = b.qs + 8 * j;
      const uint32_t s = le32(q + 4);
      const float db = d * (0.5f + static_cast<float>(s >> 28)) * 0.25f;
      for (int k = 0; k < 4; ++k)
        put_signed(dst + i * kQK_K + 32 * j + 8 * k, 8, iq::kIq2xxs.v[q[k]],
                   iq::kSigns.v[(s >> (7 * k)) & 127], db);
    }
  }
}

void dequantize_iq2_xs(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockIQ2_XS>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < 8; ++j) {
      for (int k = 0; k < 4; ++k) {
        const int ls = (b.scales[j] >> (4 * (k / 2))) & 0xF;
        const float db = d * (0.5f + static_cast<float>(ls)) * 0.25f;
        const uint16_t q = b.qs[4 * j + k];
        put_signed(dst + i * kQK_K + 32 * j + 8 * k, 8, iq::kIq2xs.v[q & 511],
                   iq::kSigns.v[q >> 9], db);
      }
    }
  }
}

void dequantize_iq2_s(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockIQ2_S>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < 8; ++j) {
      for (int k = 0; k < 4; ++k) {
        const int ls = (b.scales[j] >> (4 * (k / 2))) & 0xF;
        const float db = d * (0.5f + static_cast<float>(ls)) * 0.25f;
        const int index = b.qs[4 * j + k] | (((b.qh[j] >> (2 * k)) & 3) << 8);
        put_signed(dst + i * kQK_K + 32 * j + 8 * k, 8, iq::kIq2s.v[index], b.signs[4 * j + k], db);
      }
    }
  }
}

void dequantize_iq3_xxs(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockIQ3_XXS>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < 8; ++j) {
      const uint32_t s = le32(b.sas + 4 * j);
      const float db = d * (0.5f + static_cast<float>(s >> 28)) * 0.5f;
      for (int k = 0; k < 4; ++k) {
        const uint8_t signs = iq::kSigns.v[(s >> (7 * k)) & 127];
        float* y = dst + i * kQK_K + 32 * j + 8 * k;
        put_signed(y, 4, iq::kIq3xxs.v[b.qs[8 * j + 2 * k]], signs, db);
        put_signed(y + 4, 4, iq::kIq3xxs.v[b.qs[8 * j + 2 * k + 1]], static_cast<uint8_t>(signs >> 4), db);
      }
    }
  }
}

void dequantize_iq3_s(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockIQ3_S>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < 8; ++j) {
      const int ls = (b.scales[j / 2] >> (4 * (j % 2))) & 0xF;
      const float db = d * static_cast<float>(1 + 2 * ls);
      for (int m = 8 * j; m < 8 * j + 8; ++m) {  // grid points of 4 elements
        const int index = b.qs[m] | (((b.qh[m / 8] >> (m % 8)) & 1) << 8);
        const uint8_t signs = static_cast<uint8_t>(b.signs[m / 2] >> (4 * (m % 2)));
        put_signed(dst + i * kQK_K + 4 * m, 4, iq::kIq3s.v[index], signs, db);
      }
    }
  }
}

void dequantize_iq1_s(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockIQ1_S>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < 8; ++j) {
      const uint16_t h = b.qh[j];
      const float dl = d * static_cast<float>(2 * ((h >> 12) & 7) + 1);
      const float delta = (h & 0x8000) ? -kIq1Delta : kIq1Delta;
      for (int k = 0; k < 4; ++k) {
        const int index = b.qs[4 * j + k] | (((h >> (3 * k)) & 7) << 8);
        put_delta(dst + i * kQK_K + 32 * j + 8 * k, iq::kIq1s.v[index], dl, delta);
      }
    }
  }
}

void dequantize_iq1_m(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockIQ1_M>(src, i);
    uint16_t w[4];
    std::memcpy(w, b.scales, sizeof w);
    const uint16_t dbits = static_cast<uint16_t>((w[0] >> 12) | ((w[1] >> 12) << 4) |
                                                 ((w[2] >> 12) << 8) | ((w[3] >> 12) << 12));
    const float d = fp16_to_fp32(dbits);
    for (int m = 0; m < 32; ++m) {  // groups of 8
      const int h = m / 2;          // half of 16 elements
      const float dl = d * static_cast<float>(2 * ((w[h / 4] >> (3 * (h % 4))) & 7) + 1);
      const int nibble = (b.qh[m / 2] >> (4 * (m % 2))) & 0xF;
      const int index = b.qs[m] | ((nibble & 7) << 8);
      put_delta(dst + i * kQK_K + 8 * m, iq::kIq1s.v[index], dl, (nibble & 8) ? -kIq1Delta : kIq1Delta);
    }
  }
}

}  // namespace cadenza::quant_detail
