// Importance-weighted encoders (quant.h quantize_row_weighted): each block minimises
//   sum_i w_i (x_i - decoded_i)^2,   w_i = importance_i,
// the expected squared change of a layer's output when channel i's activations have mean square
// importance_i (quantize/imatrix.h). Our own searches, in three parts:
//  1. Symmetric scales (Q4_0, Q5_0, IQ4_NL, and the sub-blocks of Q3_K, Q6_K, IQ4_XS): the exact
//     weighted optimum over the scale (fit_levels below): as the inverse scale s grows, each
//     element's nearest level changes only where x_i * s crosses a midpoint between two levels,
//     so sweeping those crossings in order, with the weighted sums updated one element at a time,
//     visits every assignment of quants the scale can produce, each with its closed-form
//     least-squares scale. Both signs of the scale are swept (the tables are not symmetric).
//  2. Affine blocks (Q4_1, Q5_1; the sub-blocks of Q2_K, Q4_K, Q5_K): weighted least-squares
//     (scale, offset) fits over a range of trial scales, each refined once (quants re-picked
//     against the fitted pair, fitted again).
//  3. Super-blocks: the sub-block scales (and mins) are quantized against their super-block
//     scale, then every sub-block tries its rounded integer scale and the neighbours one below and
//     above (with its quants re-picked each time) and keeps the one with the least weighted
//     error; the super-block scale itself is tried at a few anchors and the best total kept.
// The quants are always re-picked against the scales the decoder will see (after fp16 rounding).
// The reference quantizer's searches are a grid over trial scales with weights
// importance * sqrt(sigma^2 + x^2); these are exact or wider.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tensor/iq_grids.h"
#include "tensor/quant.h"
#include "tensor/quant_impl.h"

namespace cadenza::quant_detail {
namespace {

constexpr float kTiny = 1e-15f;

// A sorted table of decode levels; code c decodes to scale * v[c].
struct Levels {
  const float* v;
  int n;
};

template <int Lo, int Hi>
struct UniformLevels {
  std::array<float, Hi - Lo + 1> v{};
  constexpr UniformLevels() {
    for (int i = Lo; i <= Hi; ++i) v[static_cast<size_t>(i - Lo)] = static_cast<float>(i);
  }
  Levels levels() const { return {v.data(), Hi - Lo + 1}; }
};
constexpr UniformLevels<-8, 7> kQ4Levels;
constexpr UniformLevels<-16, 15> kQ5Levels;
constexpr UniformLevels<-4, 3> kQ3Levels;
constexpr UniformLevels<-32, 31> kQ6Levels;
constexpr auto kNlTable = [] {
  std::array<float, 16> v{};
  for (int i = 0; i < 16; ++i) v[static_cast<size_t>(i)] = static_cast<float>(iq::kIq4nlValues[i]);
  return v;
}();
const Levels kNlLevels{kNlTable.data(), 16};

// Code of the level nearest t (ties to the lower).
int nearest(const Levels& lv, float t) {
  int lo = 0, hi = lv.n - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (t > 0.5f * (lv.v[mid] + lv.v[mid + 1]))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// The best codes for a fixed scale d into q; returns the weighted squared error.
float pick(int n, const float* x, const float* w, float d, const Levels& lv, uint8_t* q) {
  const int zero = nearest(lv, 0.0f);
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int c = d != 0.0f ? nearest(lv, x[i] / d) : zero;
    q[i] = static_cast<uint8_t>(c);
    const float diff = x[i] - d * lv.v[c];
    err += w[i] * diff * diff;
  }
  return err;
}

// Part 1 of the file comment: the scale d minimising sum w (x - d * v[q])^2 over all d and q,
// for n <= 32 values; the codes go to q. Inverse scales are swept over [0.5, 1.25] x the range
// that maps the largest |x| onto the table's ends (outside it the largest values would use under
// half the table or be clipped hard).
float fit_levels(int n, const float* x, const float* w, const Levels& lv, uint8_t* q) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const int zero = nearest(lv, 0.0f);
  if (amax < kTiny) {
    std::memset(q, zero, static_cast<size_t>(n));
    return 0.0f;
  }
  const float end_lo = std::min(std::fabs(lv.v[0]), std::fabs(lv.v[lv.n - 1]));
  const float end_hi = std::max(std::fabs(lv.v[0]), std::fabs(lv.v[lv.n - 1]));
  // Tables of up to 32 levels are swept from s = 0 with no upper limit (exact); larger ones
  // (Q6_K) over [0.25, 2.5] x the max-anchored inverse scale, to bound the events.
  const bool small = lv.n <= 32;
  const float s_lo = small ? 0.0f : 0.25f * end_lo / amax;
  const float s_hi = small ? INFINITY : 2.5f * end_hi / amax;

  struct Event {
    float s;
    int i;
  };
  thread_local std::vector<Event> events;
  double best_gain = -1.0;
  float best_d = 0.0f;
  uint8_t cur[kQK];
  for (const float sign : {1.0f, -1.0f}) {
    events.clear();
    double sxq = 0.0, sqq = 0.0;
    for (int i = 0; i < n; ++i) {
      const float y = sign * x[i];
      int c = nearest(lv, y * s_lo);
      cur[i] = static_cast<uint8_t>(c);
      sxq += static_cast<double>(w[i]) * y * lv.v[c];
      sqq += static_cast<double>(w[i]) * lv.v[c] * lv.v[c];
      if (y > 0.0f) {
        for (; c + 1 < lv.n; ++c) {
          const float s = 0.5f * (lv.v[c] + lv.v[c + 1]) / y;
          if (s > s_hi) break;
          events.push_back({s, i});
        }
      } else if (y < 0.0f) {
        for (; c > 0; --c) {
          const float s = 0.5f * (lv.v[c - 1] + lv.v[c]) / y;
          if (s > s_hi) break;
          events.push_back({s, i});
        }
      }
    }
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
      return a.s < b.s || (a.s == b.s && a.i < b.i);
    });
    // Gain sxq^2 / sqq: the error is sum w x^2 minus it.
    auto consider = [&](size_t upto) {
      if (sqq > 0.0 && sxq > 0.0 && sxq * sxq / sqq > best_gain) {
        best_gain = sxq * sxq / sqq;
        // Replay: the codes at this point of the sweep.
        for (int i = 0; i < n; ++i) q[i] = static_cast<uint8_t>(nearest(lv, sign * x[i] * s_lo));
        for (size_t e = 0; e < upto; ++e) {
          const int i = events[e].i;
          q[i] = static_cast<uint8_t>(sign * x[i] > 0.0f ? q[i] + 1 : q[i] - 1);
        }
        best_d = sign * static_cast<float>(sxq / sqq);
      }
    };
    consider(0);
    for (size_t e = 0; e < events.size(); ++e) {
      const int i = events[e].i;
      const float y = sign * x[i];
      const float old_v = lv.v[cur[i]];
      cur[i] = static_cast<uint8_t>(y > 0.0f ? cur[i] + 1 : cur[i] - 1);
      const float new_v = lv.v[cur[i]];
      sxq += static_cast<double>(w[i]) * y * (new_v - old_v);
      sqq += static_cast<double>(w[i]) * (static_cast<double>(new_v) * new_v - static_cast<double>(old_v) * old_v);
      if (e + 1 == events.size() || events[e + 1].s != events[e].s) consider(e + 1);
    }
  }
  if (best_gain < 0.0) {
    std::memset(q, zero, static_cast<size_t>(n));
    return 0.0f;
  }
  return best_d;
}

// Part 2: x ~ d * q + m with q in [0, nmax], weighted least squares. m_nonpositive: the K-quants'
// x ~ d * q - min with min >= 0. Returns the weighted error; q receives the codes.
float fit_affine(int n, const float* x, const float* w, int nmax, bool m_nonpositive, float* d_out,
                 float* m_out, uint8_t* q) {
  float lo = x[0], hi = x[0];
  double sw = 0, swx = 0;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sw += w[i];
    swx += static_cast<double>(w[i]) * x[i];
  }
  if (m_nonpositive && lo > 0.0f) lo = 0.0f;
  if (hi - lo < kTiny || !(sw > 0)) {
    std::memset(q, 0, static_cast<size_t>(n));
    *d_out = 0.0f;
    *m_out = lo;
    return 0.0f;
  }
  uint8_t trial[kQK];
  float best = INFINITY;
  auto evaluate = [&](float d, float m, uint8_t* codes) {
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float diff = d * static_cast<float>(codes[i]) + m - x[i];
      err += w[i] * diff * diff;
    }
    return err;
  };
  // Least-squares (d, m) for fixed codes; false when degenerate.
  auto solve = [&](const uint8_t* codes, float* d, float* m) {
    double sl = 0, sll = 0, sxl = 0;
    for (int i = 0; i < n; ++i) {
      const double l = codes[i];
      sl += w[i] * l;
      sll += w[i] * l * l;
      sxl += w[i] * l * x[i];
    }
    const double det = sw * sll - sl * sl;
    if (!(det > 0)) return false;
    double dd = (sw * sxl - swx * sl) / det;
    double mm = (sll * swx - sl * sxl) / det;
    if (m_nonpositive && mm > 0) {
      mm = 0;
      dd = sll > 0 ? sxl / sll : 0;
    }
    *d = static_cast<float>(dd);
    *m = static_cast<float>(mm);
    return dd > 0;
  };
  auto codes_for = [&](float d, float m, uint8_t* codes) {
    for (int i = 0; i < n; ++i) codes[i] = static_cast<uint8_t>(round_clamp((x[i] - m) / d, 0, nmax));
  };
  for (int step = -10; step <= 10; ++step) {
    const float d0 = (hi - lo) / (static_cast<float>(nmax) + 0.1f * static_cast<float>(step));
    if (!(d0 > 0.0f)) continue;
    codes_for(d0, lo, trial);
    float d = 0.0f, m = 0.0f;
    for (int round = 0; round < 2; ++round) {
      if (!solve(trial, &d, &m)) break;
      const float err = evaluate(d, m, trial);
      if (err < best) {
        best = err;
        *d_out = d;
        *m_out = m;
        std::memcpy(q, trial, static_cast<size_t>(n));
      }
      codes_for(d, m, trial);
    }
  }
  if (!std::isfinite(best)) {  // every fit degenerate: plain min/max
    *d_out = (hi - lo) / static_cast<float>(nmax);
    *m_out = lo;
    codes_for(*d_out, *m_out, q);
    best = evaluate(*d_out, *m_out, q);
  }
  return best;
}

// Error of an affine sub-block decoded as d * q - m with the best codes (written to q).
float pick_affine(int n, const float* x, const float* w, int nmax, float d, float m, uint8_t* q) {
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int c = d > 0.0f ? round_clamp((x[i] + m) / d, 0, nmax) : 0;
    q[i] = static_cast<uint8_t>(c);
    const float diff = d * static_cast<float>(c) - m - x[i];
    err += w[i] * diff * diff;
  }
  return err;
}

// Part 3 for symmetric sub-blocks: sub-block j (len elements at x + j*len) has the float scale
// scales[j]; stores the fp16 super-scale in *d_out and the integer scales (smin..smax) in ls,
// with the codes in q, choosing the super-scale among a few anchors and each integer scale among
// its rounding and neighbours.
void quantize_sub_scales(const float* x, const float* w, int nsub, int len, const float* scales,
                         const Levels& lv, int smin, int smax, uint16_t* d_out, int* ls, uint8_t* q) {
  float max_scale = 0.0f;
  for (int j = 0; j < nsub; ++j)
    if (std::fabs(scales[j]) > std::fabs(max_scale)) max_scale = scales[j];
  *d_out = 0;
  const int zero_code = nearest(lv, 0.0f);
  for (int j = 0; j < nsub; ++j) ls[j] = 0;
  std::memset(q, zero_code, static_cast<size_t>(nsub * len));
  if (std::fabs(max_scale) < kTiny) return;
  float best_total = INFINITY;
  int trial_ls[16];
  uint8_t trial_q[kQK_K], aux[kQK];
  // The largest scale maps onto one of these integers (the negative end first, as the plain
  // encoders do; the positive end too, since the table need not be symmetric).
  const int anchors[] = {smin, smin + 1, smin + 2, smax, smax - 1};
  for (const int anchor : anchors) {
    const uint16_t dh = fp32_to_fp16(max_scale / static_cast<float>(anchor));
    const float d = fp16_to_fp32(dh);
    if (d == 0.0f || !std::isfinite(d)) continue;
    float total = 0.0f;
    for (int j = 0; j < nsub; ++j) {
      const float* xs = x + j * len;
      const float* ws = w + j * len;
      const int l0 = round_clamp(scales[j] / d, smin, smax);
      float best = INFINITY;
      for (int l = std::max(smin, l0 - 1); l <= std::min(smax, l0 + 1); ++l) {
        const float err = pick(len, xs, ws, d * static_cast<float>(l), lv, aux);
        if (err < best) {
          best = err;
          trial_ls[j] = l;
          std::memcpy(trial_q + j * len, aux, static_cast<size_t>(len));
        }
      }
      total += best;
    }
    if (total < best_total) {
      best_total = total;
      *d_out = dh;
      std::memcpy(ls, trial_ls, sizeof(int) * static_cast<size_t>(nsub));
      std::memcpy(q, trial_q, static_cast<size_t>(nsub * len));
    }
  }
}

// Part 3 for affine sub-blocks (Q2_K, Q4_K, Q5_K): sub-block j has scale scales[j] >= 0 and min
// mins[j] >= 0 (x ~ scale * q - min); both quantized to `bits` unsigned against fp16
// super-scales, then each (scale, min) pair tries its neighbours. Writes the fp16 super-scales,
// the integer pairs and the codes.
void quantize_sub_scale_mins(const float* x, const float* w, int nsub, int len, int nmax, int bits,
                             const float* scales, const float* mins, uint16_t* d_out,
                             uint16_t* dmin_out, int* ls, int* lm, uint8_t* q) {
  const int top = (1 << bits) - 1;
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < nsub; ++j) {
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  *d_out = fp32_to_fp16(max_scale / static_cast<float>(top));
  *dmin_out = fp32_to_fp16(max_min / static_cast<float>(top));
  const float d = fp16_to_fp32(*d_out), dmin = fp16_to_fp32(*dmin_out);
  uint8_t aux[kQK];
  for (int j = 0; j < nsub; ++j) {
    const float* xs = x + j * len;
    const float* ws = w + j * len;
    const int s0 = d > 0.0f ? round_clamp(scales[j] / d, 0, top) : 0;
    const int m0 = dmin > 0.0f ? round_clamp(mins[j] / dmin, 0, top) : 0;
    float best = INFINITY;
    for (int s = std::max(0, s0 - 1); s <= std::min(top, s0 + 1); ++s) {
      for (int m = std::max(0, m0 - 1); m <= std::min(top, m0 + 1); ++m) {
        const float err = pick_affine(len, xs, ws, nmax, d * static_cast<float>(s),
                                      dmin * static_cast<float>(m), aux);
        if (err < best) {
          best = err;
          ls[j] = s;
          lm[j] = m;
          std::memcpy(q + j * len, aux, static_cast<size_t>(len));
        }
      }
    }
  }
}

// ---- packing (layouts in blocks.h) ----

void pack_nibbles32(const uint8_t* q, uint8_t* qs) {
  for (int l = 0; l < 16; ++l) qs[l] = static_cast<uint8_t>(q[l] | (q[l + 16] << 4));
}

// Q5_0 / Q5_1: low nibbles as Q4_0, the fifth bits in qh (element l -> bit l).
void pack_q5(const uint8_t* q, uint8_t* qs, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int l = 0; l < 16; ++l) {
    qs[l] = static_cast<uint8_t>((q[l] & 0xF) | ((q[l + 16] & 0xF) << 4));
    qh |= static_cast<uint32_t>(q[l] >> 4) << l;
    qh |= static_cast<uint32_t>(q[l + 16] >> 4) << (l + 16);
  }
  std::memcpy(qh_bytes, &qh, sizeof qh);
}

// Q2_K/Q3_K's 2-bit plane: element e at byte 32*(e/128) + e%32, shift 2*((e%128)/32).
void pack_plane2(const uint8_t* L, uint8_t* qs) {
  for (int e = 0; e < kQK_K; ++e)
    qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((L[e] & 3) << (2 * ((e % 128) / 32)));
}

// Q4_K / Q5_K scale and min bytes (see unpack_scale_min_k4).
void pack_scale_min_k4(const int* ls, const int* lm, uint8_t* scales) {
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] = static_cast<uint8_t>(ls[j]);
      scales[j + 4] = static_cast<uint8_t>(lm[j]);
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// ---- the encoders: one block (or super-block) each ----

void block_q4_0(const float* x, const float* w, uint8_t* out) {
  BlockQ4_0 b{};
  uint8_t q[kQK];
  b.d = fp32_to_fp16(fit_levels(kQK, x, w, kQ4Levels.levels(), q));
  pick(kQK, x, w, fp16_to_fp32(b.d), kQ4Levels.levels(), q);
  pack_nibbles32(q, b.qs);
  std::memcpy(out, &b, sizeof b);
}

void block_q5_0(const float* x, const float* w, uint8_t* out) {
  BlockQ5_0 b{};
  uint8_t q[kQK];
  b.d = fp32_to_fp16(fit_levels(kQK, x, w, kQ5Levels.levels(), q));
  pick(kQK, x, w, fp16_to_fp32(b.d), kQ5Levels.levels(), q);
  pack_q5(q, b.qs, b.qh);
  std::memcpy(out, &b, sizeof b);
}

void block_iq4_nl(const float* x, const float* w, uint8_t* out) {
  BlockIQ4_NL b{};
  uint8_t q[kQK];
  b.d = fp32_to_fp16(fit_levels(kQK, x, w, kNlLevels, q));
  pick(kQK, x, w, fp16_to_fp32(b.d), kNlLevels, q);
  pack_nibbles32(q, b.qs);
  std::memcpy(out, &b, sizeof b);
}

// Q4_1 / Q5_1: x = d * q + m.
template <typename Block, int Nmax>
void block_affine32(const float* x, const float* w, uint8_t* out) {
  Block b{};
  uint8_t q[kQK];
  float d = 0.0f, m = 0.0f;
  fit_affine(kQK, x, w, Nmax, false, &d, &m, q);
  b.d = fp32_to_fp16(d);
  b.m = fp32_to_fp16(m);
  const float dd = fp16_to_fp32(b.d), mm = fp16_to_fp32(b.m);
  pick_affine(kQK, x, w, Nmax, dd, -mm, q);
  if constexpr (Nmax == 15) {
    pack_nibbles32(q, b.qs);
  } else {
    pack_q5(q, b.qs, b.qh);
  }
  std::memcpy(out, &b, sizeof b);
}

void block_q6_K(const float* x, const float* w, uint8_t* out) {
  BlockQ6_K b{};
  float scales[16];
  uint8_t L[kQK_K];
  int ls[16];
  for (int j = 0; j < 16; ++j) scales[j] = fit_levels(16, x + 16 * j, w + 16 * j, kQ6Levels.levels(), L + 16 * j);
  quantize_sub_scales(x, w, 16, 16, scales, kQ6Levels.levels(), -128, 127, &b.d, ls, L);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(ls[j]);
  pack_q6_K(L, b);
  std::memcpy(out, &b, sizeof b);
}

void block_q3_K(const float* x, const float* w, uint8_t* out) {
  BlockQ3_K b{};
  float scales[16];
  uint8_t L[kQK_K];
  int ls[16];
  for (int j = 0; j < 16; ++j) scales[j] = fit_levels(16, x + 16 * j, w + 16 * j, kQ3Levels.levels(), L + 16 * j);
  quantize_sub_scales(x, w, 16, 16, scales, kQ3Levels.levels(), -32, 31, &b.d, ls, L);
  for (int j = 0; j < 16; ++j) {
    const int s = ls[j] + 32;
    if (j < 8)
      b.scales[j] |= static_cast<uint8_t>(s & 0xF);
    else
      b.scales[j - 8] |= static_cast<uint8_t>((s & 0xF) << 4);
    b.scales[8 + j % 4] |= static_cast<uint8_t>((s >> 4) << (2 * (j / 4)));
  }
  pack_plane2(L, b.qs);
  for (int e = 0; e < kQK_K; ++e) b.hmask[e % 32] |= static_cast<uint8_t>((L[e] >> 2) << (e / 32));
  std::memcpy(out, &b, sizeof b);
}

void block_iq4_xs(const float* x, const float* w, uint8_t* out) {
  BlockIQ4_XS b{};
  float scales[8];
  uint8_t q[kQK_K];
  int ls[8];
  for (int j = 0; j < 8; ++j) scales[j] = fit_levels(32, x + 32 * j, w + 32 * j, kNlLevels, q + 32 * j);
  quantize_sub_scales(x, w, 8, 32, scales, kNlLevels, -32, 31, &b.d, ls, q);
  for (int j = 0; j < 8; ++j) {
    const int s = ls[j] + 32;
    b.scales_l[j / 2] |= static_cast<uint8_t>((s & 0xF) << (4 * (j % 2)));
    b.scales_h = static_cast<uint16_t>(b.scales_h | ((s >> 4) << (2 * j)));
    pack_nibbles32(q + 32 * j, b.qs + 16 * j);
  }
  std::memcpy(out, &b, sizeof b);
}

// Q4_K (Nmax 15) / Q5_K (Nmax 31): 8 affine sub-blocks of 32, 6-bit scales and mins.
template <typename Block, int Nmax>
void block_k4(const float* x, const float* w, uint8_t* out) {
  Block b{};
  float scales[8], mins[8];
  uint8_t L[kQK_K];
  int ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    float m = 0.0f;
    fit_affine(32, x + 32 * j, w + 32 * j, Nmax, true, &scales[j], &m, L + 32 * j);
    mins[j] = -m;
  }
  quantize_sub_scale_mins(x, w, 8, 32, Nmax, 6, scales, mins, &b.d, &b.dmin, ls, lm, L);
  pack_scale_min_k4(ls, lm, b.scales);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      b.qs[32 * c + l] = static_cast<uint8_t>((L[64 * c + l] & 0xF) | ((L[64 * c + 32 + l] & 0xF) << 4));
  if constexpr (Nmax == 31) {
    for (int e = 0; e < kQK_K; ++e) b.qh[e % 32] |= static_cast<uint8_t>((L[e] >> 4) << (e / 32));
  }
  std::memcpy(out, &b, sizeof b);
}

void block_q2_K(const float* x, const float* w, uint8_t* out) {
  BlockQ2_K b{};
  float scales[16], mins[16];
  uint8_t L[kQK_K];
  int ls[16], lm[16];
  for (int j = 0; j < 16; ++j) {
    float m = 0.0f;
    fit_affine(16, x + 16 * j, w + 16 * j, 3, true, &scales[j], &m, L + 16 * j);
    mins[j] = -m;
  }
  quantize_sub_scale_mins(x, w, 16, 16, 3, 4, scales, mins, &b.d, &b.dmin, ls, lm, L);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(ls[j] | (lm[j] << 4));
  pack_plane2(L, b.qs);
  std::memcpy(out, &b, sizeof b);
}

}  // namespace

bool quantize_weighted_blocks(DType t, const float* src, const float* importance, uint8_t* dst,
                              int64_t nb) {
  using BlockFn = void (*)(const float*, const float*, uint8_t*);
  BlockFn fn = nullptr;
  int size = 0, bytes = 0;
  switch (t) {
    case DType::Q4_0: fn = block_q4_0; size = kQK; bytes = sizeof(BlockQ4_0); break;
    case DType::Q5_0: fn = block_q5_0; size = kQK; bytes = sizeof(BlockQ5_0); break;
    case DType::Q4_1: fn = block_affine32<BlockQ4_1, 15>; size = kQK; bytes = sizeof(BlockQ4_1); break;
    case DType::Q5_1: fn = block_affine32<BlockQ5_1, 31>; size = kQK; bytes = sizeof(BlockQ5_1); break;
    case DType::IQ4_NL: fn = block_iq4_nl; size = kQK; bytes = sizeof(BlockIQ4_NL); break;
    case DType::Q2_K: fn = block_q2_K; size = kQK_K; bytes = sizeof(BlockQ2_K); break;
    case DType::Q3_K: fn = block_q3_K; size = kQK_K; bytes = sizeof(BlockQ3_K); break;
    case DType::Q4_K: fn = block_k4<BlockQ4_K, 15>; size = kQK_K; bytes = sizeof(BlockQ4_K); break;
    case DType::Q5_K: fn = block_k4<BlockQ5_K, 31>; size = kQK_K; bytes = sizeof(BlockQ5_K); break;
    case DType::Q6_K: fn = block_q6_K; size = kQK_K; bytes = sizeof(BlockQ6_K); break;
    case DType::IQ4_XS: fn = block_iq4_xs; size = kQK_K; bytes = sizeof(BlockIQ4_XS); break;
    default: return false;
  }
  float w[kQK_K];
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * size;
    const float* imp = importance + i * size;
    // A channel that never fired (importance 0) still gets a little weight, so that its weights
    // are not left arbitrary (a later input may use it).
    float mean = 0.0f;
    for (int l = 0; l < size; ++l) mean += imp[l];
    mean /= static_cast<float>(size);
    const float floor = mean > 0.0f ? 1e-3f * mean : 1.0f;
    for (int l = 0; l < size; ++l) w[l] = std::max(imp[l], floor);
    fn(x, w, dst + i * bytes);
    // Keep the plain encoder's block where it happens to be better (its super-block scales are
    // chosen differently; it rarely wins).
    uint8_t plain[sizeof(BlockQ6_K) > sizeof(BlockQ5_K) ? sizeof(BlockQ6_K) : sizeof(BlockQ5_K)];
    quantize_row(t, x, plain, size);
    float a[kQK_K], b[kQK_K];
    dequantize_row(t, dst + i * bytes, a, size);
    dequantize_row(t, plain, b, size);
    double ea = 0, eb = 0;
    for (int l = 0; l < size; ++l) {
      ea += static_cast<double>(w[l]) * (x[l] - a[l]) * (x[l] - a[l]);
      eb += static_cast<double>(w[l]) * (x[l] - b[l]) * (x[l] - b[l]);
    }
    if (eb < ea) std::memcpy(dst + i * bytes, plain, static_cast<size_t>(bytes));
  }
  return true;
}

}  // namespace cadenza::quant_detail
