// Encoders of the grid types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M (layouts in
// blocks.h, grids in iq_grids.h). Our own algorithm, the same for every type:
//
//  1. Signs (IQ2/IQ3): each element's sign is stored as is; where the format allows only an
//     even number of negatives per group of 8 (IQ2_XXS, IQ2_XS, IQ3_XXS) and a group has an odd
//     number, the sign of its element of least weight * |x| is flipped. The targets are then the
//     magnitudes a = sign * x (negative for a flipped element), to be approximated by s * g with
//     g a grid point's coordinates and s >= 0 the sub-block scale. IQ1 has no signs: its values
//     s * (g + delta) with g in {-1, 0, 1}^8 approximate x directly.
//  2. Grid search at a given scale: a/s is rounded per coordinate to the nearest grid level,
//     which names a lattice point; a table built once per grid lists the 16 grid points nearest
//     each lattice point (3^8 or 8^4 of them), and the one of least weighted squared error wins.
//     For IQ1 both signs of delta are tried (per sub-block for IQ1_S, per group for IQ1_M).
//  3. Scale search per sub-block: 11 trial scales from 0.4 to 1.4 times (sub-block max / largest
//     grid value); for each, the grid search then a weighted least-squares refit of the scale to
//     the chosen points; the trial with the least error wins.
//  4. The sub-block scales are quantized against the super-block maximum (4 or 3 bits, in the
//     type's own mapping db = f(d, ls)); each sub-block tries its rounded code and the codes one
//     below and above, re-running the grid search at the decoded scale, and keeps the best.
// Weights are |x| + the sub-block's RMS (as the K-quants use). Every block written is valid; the
// error bounds measured on random data are in src/tensor/README.md.
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

constexpr int kCandidates = 16;  // grid points listed per lattice point
constexpr int kTrials = 11;      // trial scales per sub-block
constexpr float kEps = 1e-15f;

// One grid as the encoder sees it: npoints points of dim coordinates (values, as floats), the
// sorted level values a coordinate can take, and the neighbour lists per lattice point.
struct GridInfo {
  int dim = 0, npoints = 0, nlevels = 0;
  float levels[8] = {};
  std::vector<float> coords;     // npoints * dim
  std::vector<uint16_t> near;    // (nlevels^dim) * kCandidates point indices

  float max_level() const { return levels[nlevels - 1]; }
  // Level index nearest v (ties to the lower level).
  int level_of(float v) const {
    int c = 0;
    while (c + 1 < nlevels && v > 0.5f * (levels[c] + levels[c + 1])) ++c;
    return c;
  }
};

template <int N, int D, typename T, size_t L>
GridInfo make_grid(const iq::Grid<N, D, T>& g, const std::array<float, L>& levels) {
  GridInfo info;
  info.dim = D;
  info.npoints = N;
  info.nlevels = static_cast<int>(L);
  for (size_t l = 0; l < L; ++l) info.levels[l] = levels[l];
  info.coords.resize(static_cast<size_t>(N * D));
  for (int p = 0; p < N; ++p)
    for (int t = 0; t < D; ++t) info.coords[p * D + t] = static_cast<float>(g.v[p][t]);
  int keys = 1;
  for (int t = 0; t < D; ++t) keys *= info.nlevels;
  info.near.resize(static_cast<size_t>(keys * kCandidates));
  std::vector<std::pair<float, uint16_t>> dist(N);
  for (int key = 0; key < keys; ++key) {
    float lattice[D];
    for (int t = 0, k = key; t < D; ++t, k /= info.nlevels) lattice[t] = info.levels[k % info.nlevels];
    for (int p = 0; p < N; ++p) {
      float d2 = 0.0f;
      for (int t = 0; t < D; ++t) d2 += (info.coords[p * D + t] - lattice[t]) * (info.coords[p * D + t] - lattice[t]);
      dist[p] = {d2, static_cast<uint16_t>(p)};
    }
    std::partial_sort(dist.begin(), dist.begin() + kCandidates, dist.end());
    for (int c = 0; c < kCandidates; ++c) info.near[key * kCandidates + c] = dist[c].second;
  }
  return info;
}

constexpr std::array<float, 3> kLev2 = {8, 25, 43};
constexpr std::array<float, 8> kLev3xxs = {4, 12, 20, 28, 36, 44, 52, 62};
constexpr std::array<float, 8> kLev3s = {1, 3, 5, 7, 9, 11, 13, 15};
constexpr std::array<float, 3> kLev1 = {-1, 0, 1};

const GridInfo& grid_iq2xxs() { static const GridInfo g = make_grid(iq::kIq2xxs, kLev2); return g; }
const GridInfo& grid_iq2xs() { static const GridInfo g = make_grid(iq::kIq2xs, kLev2); return g; }
const GridInfo& grid_iq2s() { static const GridInfo g = make_grid(iq::kIq2s, kLev2); return g; }
const GridInfo& grid_iq3xxs() { static const GridInfo g = make_grid(iq::kIq3xxs, kLev3xxs); return g; }
const GridInfo& grid_iq3s() { static const GridInfo g = make_grid(iq::kIq3s, kLev3s); return g; }
const GridInfo& grid_iq1s() { static const GridInfo g = make_grid(iq::kIq1s, kLev1); return g; }

constexpr float kDelta = 0.125f;  // IQ1's offset magnitude

// Best point for one group of g.dim targets a under scale s (values s * (coords + offset));
// returns its index and adds sum w*a*v and sum w*v*v (v = coords + offset) for the refit.
int best_point(const GridInfo& g, const float* a, const float* w, float s, float offset,
               float* err, float* sav, float* svv) {
  int key = 0;
  for (int t = g.dim - 1; t >= 0; --t) key = key * g.nlevels + g.level_of(a[t] / s - offset);
  const uint16_t* cand = &g.near[static_cast<size_t>(key) * kCandidates];
  int best = cand[0];
  float best_err = INFINITY, best_av = 0.0f, best_vv = 0.0f;
  for (int c = 0; c < kCandidates; ++c) {
    const float* v = &g.coords[static_cast<size_t>(cand[c]) * g.dim];
    float e = 0.0f, av = 0.0f, vv = 0.0f;
    for (int t = 0; t < g.dim; ++t) {
      const float vt = v[t] + offset;
      const float diff = s * vt - a[t];
      e += w[t] * diff * diff;
      av += w[t] * a[t] * vt;
      vv += w[t] * vt * vt;
    }
    if (e < best_err) {
      best_err = e;
      best = cand[c];
      best_av = av;
      best_vv = vv;
    }
  }
  *err += best_err;
  *sav += best_av;
  *svv += best_vv;
  return best;
}

// How a sub-block's groups use IQ1's delta.
enum class Delta { none, shared, per_group };

// Grid search over the n elements (n / 8 groups of 8) of one sub-block at scale s. idx gets one
// point per g.dim elements; neg (per group of 8, IQ1 only) whether delta is negative. With
// Delta::shared, *shared_neg selects the sign for all groups. Returns the weighted error and the
// refit sums.
float pick(const GridInfo& g, Delta mode, bool shared_neg, int n, const float* a, const float* w,
           float s, uint16_t* idx, uint8_t* neg, float* sav, float* svv) {
  float err = 0.0f;
  *sav = *svv = 0.0f;
  for (int k = 0; k < n / 8; ++k) {
    const float* ak = a + 8 * k;
    const float* wk = w + 8 * k;
    if (mode == Delta::none) {
      for (int h = 0; h < 8 / g.dim; ++h)
        idx[8 / g.dim * k + h] = static_cast<uint16_t>(
            best_point(g, ak + g.dim * h, wk + g.dim * h, s, 0.0f, &err, sav, svv));
      continue;
    }
    const bool try_neg[2] = {shared_neg, !shared_neg};
    const int tries = mode == Delta::per_group ? 2 : 1;
    float best_e = INFINITY, best_av = 0.0f, best_vv = 0.0f;
    for (int tr = 0; tr < tries; ++tr) {
      float e = 0.0f, av = 0.0f, vv = 0.0f;
      const int p = best_point(g, ak, wk, s, try_neg[tr] ? -kDelta : kDelta, &e, &av, &vv);
      if (e < best_e) {
        best_e = e, best_av = av, best_vv = vv;
        idx[k] = static_cast<uint16_t>(p);
        neg[k] = try_neg[tr];
      }
    }
    err += best_e;
    *sav += best_av;
    *svv += best_vv;
  }
  return err;
}

// The scale search of one sub-block (step 3 of the file comment). Returns the scale (0 for an
// all-zero sub-block) and leaves the chosen points in idx / neg.
float fit(const GridInfo& g, Delta mode, int n, const float* a, const float* w, uint16_t* idx,
          uint8_t* neg) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(a[i]));
  if (amax < kEps) {
    std::memset(idx, 0, sizeof(uint16_t) * static_cast<size_t>(n / g.dim));
    std::memset(neg, 0, static_cast<size_t>(n / 8));
    return 0.0f;
  }
  const float top = mode == Delta::none ? g.max_level() : g.max_level() + kDelta;
  float best_err = INFINITY, best_s = amax / top;
  uint16_t tidx[32];
  uint8_t tneg[4];
  for (int pass = 0; pass < (mode == Delta::shared ? 2 : 1); ++pass) {
    for (int k = 0; k < kTrials; ++k) {
      const float s = amax / top * (0.4f + 0.1f * static_cast<float>(k));
      float sav, svv;
      pick(g, mode, pass == 1, n, a, w, s, tidx, tneg, &sav, &svv);
      if (!(svv > 0.0f) || !(sav > 0.0f)) continue;
      const float s_fit = sav / svv;
      float sav2, svv2;
      const float err = pick(g, mode, pass == 1, n, a, w, s_fit, tidx, tneg, &sav2, &svv2);
      if (err < best_err) {
        best_err = err;
        best_s = s_fit;
        std::memcpy(idx, tidx, sizeof(uint16_t) * static_cast<size_t>(n / g.dim));
        std::memcpy(neg, tneg, static_cast<size_t>(n / 8));
      }
    }
  }
  return best_s;
}

// Step 1 for one group of 8: targets a = sign * x and the 8 sign bits (bit t: element t
// negative); with `parity`, an odd count of negatives is made even by flipping the element of
// least w * |x|.
uint8_t signs_of(const float* x, const float* w, bool parity, float* a) {
  uint8_t bits = 0;
  int flip = 0;
  for (int t = 0; t < 8; ++t) {
    if (x[t] < 0.0f) bits = static_cast<uint8_t>(bits | (1 << t));
    if (w[t] * std::fabs(x[t]) < w[flip] * std::fabs(x[flip])) flip = t;
  }
  if (parity && (__builtin_popcount(bits) & 1)) bits = static_cast<uint8_t>(bits ^ (1 << flip));
  for (int t = 0; t < 8; ++t) a[t] = (bits >> t) & 1 ? -x[t] : x[t];
  return bits;
}

// Weights of one sub-block: |x| + its RMS.
void weights_of(const float* x, int n, float* w) {
  float sum2 = 0.0f;
  for (int i = 0; i < n; ++i) sum2 += x[i] * x[i];
  const float rms = std::sqrt(sum2 / static_cast<float>(n));
  for (int i = 0; i < n; ++i) w[i] = rms + std::fabs(x[i]);
}

// The scale code mapping of a type: decoded scale = d * (mul * ls + add) (times `post` for
// IQ2/IQ3_XXS), ls in 0..max_code.
struct ScaleCode {
  float mul, add, post;
  int max_code;
  float value(float d, int ls) const {
    return d * (mul * static_cast<float>(ls) + add) * post;
  }
};
constexpr ScaleCode kCodeIq2 = {1.0f, 0.5f, 0.25f, 15};  // d * (0.5 + ls) * 0.25
constexpr ScaleCode kCodeIq3xxs = {1.0f, 0.5f, 0.5f, 15};
constexpr ScaleCode kCodeIq3s = {2.0f, 1.0f, 1.0f, 15};  // d * (1 + 2 ls)
constexpr ScaleCode kCodeIq1 = {2.0f, 1.0f, 1.0f, 7};    // d * (2 ls + 1)

// A whole super-block: nsub sub-blocks of `sub` elements (sub / 8 groups each). Fills, per
// sub-block, its scale code ls[j], and per element group the points idx, signs and IQ1's neg.
// Returns d as fp16 bits.
struct Encoded {
  uint16_t d = 0;
  int ls[16] = {};
  uint16_t idx[64] = {};     // one per dim elements
  uint8_t signs[32] = {};    // per group of 8
  uint8_t neg[32] = {};      // per group of 8 (IQ1)
};

Encoded encode(const GridInfo& g, Delta mode, bool parity, const ScaleCode& code, int sub,
               const float* x) {
  Encoded e;
  const int nsub = kQK_K / sub;
  const int pts = sub / g.dim;  // points per sub-block
  float a[kQK_K], w[kQK_K], scale[16];
  float max_scale = 0.0f;
  for (int j = 0; j < nsub; ++j) {
    weights_of(x + sub * j, sub, w + sub * j);
    for (int k = 0; k < sub / 8; ++k) {
      const int grp = sub / 8 * j + k;
      if (mode == Delta::none)
        e.signs[grp] = signs_of(x + 8 * grp, w + 8 * grp, parity, a + 8 * grp);
      else
        std::memcpy(a + 8 * grp, x + 8 * grp, 8 * sizeof(float));
    }
    scale[j] = fit(g, mode, sub, a + sub * j, w + sub * j, e.idx + pts * j, e.neg + sub / 8 * j);
    max_scale = std::max(max_scale, scale[j]);
  }
  // d such that the largest sub-block scale is the top code's value.
  e.d = fp32_to_fp16(max_scale / code.value(1.0f, code.max_code));
  const float d = fp16_to_fp32(e.d);
  if (d == 0.0f) return e;  // every element decodes to 0
  for (int j = 0; j < nsub; ++j) {
    const float guess = (scale[j] / (d * code.post) - code.add) / code.mul;
    const int l0 = round_clamp(guess, 0, code.max_code);
    float best = INFINITY;
    uint16_t tidx[32];
    uint8_t tneg[4];
    for (int ls = std::max(0, l0 - 1); ls <= std::min(code.max_code, l0 + 1); ++ls) {
      for (int pass = 0; pass < (mode == Delta::shared ? 2 : 1); ++pass) {
        float sav, svv;
        const float err = pick(g, mode, pass == 1, sub, a + sub * j, w + sub * j,
                               code.value(d, ls), tidx, tneg, &sav, &svv);
        if (err < best) {
          best = err;
          e.ls[j] = ls;
          std::memcpy(e.idx + pts * j, tidx, sizeof(uint16_t) * static_cast<size_t>(pts));
          std::memcpy(e.neg + sub / 8 * j, tneg, static_cast<size_t>(sub / 8));
        }
      }
    }
  }
  return e;
}

}  // namespace

void quantize_iq2_xxs(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const Encoded e = encode(grid_iq2xxs(), Delta::none, true, kCodeIq2, 32, src + i * kQK_K);
    BlockIQ2_XXS b{};
    b.d = e.d;
    for (int j = 0; j < 8; ++j) {
      uint32_t s = static_cast<uint32_t>(e.ls[j]) << 28;
      for (int k = 0; k < 4; ++k) {
        b.qs[8 * j + k] = static_cast<uint8_t>(e.idx[4 * j + k]);
        s |= static_cast<uint32_t>(e.signs[4 * j + k] & 127) << (7 * k);
      }
      std::memcpy(b.qs + 8 * j + 4, &s, 4);
    }
    store_block(dst, i, b);
  }
}

void quantize_iq2_xs(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const Encoded e = encode(grid_iq2xs(), Delta::none, true, kCodeIq2, 16, src + i * kQK_K);
    BlockIQ2_XS b{};
    b.d = e.d;
    for (int m = 0; m < 32; ++m)
      b.qs[m] = static_cast<uint16_t>(e.idx[m] | ((e.signs[m] & 127) << 9));
    for (int j = 0; j < 8; ++j) b.scales[j] = static_cast<uint8_t>(e.ls[2 * j] | (e.ls[2 * j + 1] << 4));
    store_block(dst, i, b);
  }
}

void quantize_iq2_s(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const Encoded e = encode(grid_iq2s(), Delta::none, false, kCodeIq2, 16, src + i * kQK_K);
    BlockIQ2_S b{};
    b.d = e.d;
    for (int m = 0; m < 32; ++m) {
      b.qs[m] = static_cast<uint8_t>(e.idx[m] & 0xFF);
      b.qh[m / 4] = static_cast<uint8_t>(b.qh[m / 4] | ((e.idx[m] >> 8) << (2 * (m % 4))));
      b.signs[m] = e.signs[m];
    }
    for (int j = 0; j < 8; ++j) b.scales[j] = static_cast<uint8_t>(e.ls[2 * j] | (e.ls[2 * j + 1] << 4));
    store_block(dst, i, b);
  }
}

void quantize_iq3_xxs(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const Encoded e = encode(grid_iq3xxs(), Delta::none, true, kCodeIq3xxs, 32, src + i * kQK_K);
    BlockIQ3_XXS b{};
    b.d = e.d;
    for (int m = 0; m < 64; ++m) b.qs[m] = static_cast<uint8_t>(e.idx[m]);
    for (int j = 0; j < 8; ++j) {
      uint32_t s = static_cast<uint32_t>(e.ls[j]) << 28;
      for (int k = 0; k < 4; ++k) s |= static_cast<uint32_t>(e.signs[4 * j + k] & 127) << (7 * k);
      std::memcpy(b.sas + 4 * j, &s, 4);
    }
    store_block(dst, i, b);
  }
}

void quantize_iq3_s(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const Encoded e = encode(grid_iq3s(), Delta::none, false, kCodeIq3s, 32, src + i * kQK_K);
    BlockIQ3_S b{};
    b.d = e.d;
    for (int m = 0; m < 64; ++m) {
      b.qs[m] = static_cast<uint8_t>(e.idx[m] & 0xFF);
      b.qh[m / 8] = static_cast<uint8_t>(b.qh[m / 8] | ((e.idx[m] >> 8) << (m % 8)));
    }
    std::memcpy(b.signs, e.signs, 32);
    for (int j = 0; j < 8; ++j) b.scales[j / 2] = static_cast<uint8_t>(b.scales[j / 2] | (e.ls[j] << (4 * (j % 2))));
    store_block(dst, i, b);
  }
}

void quantize_iq1_s(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const Encoded e = encode(grid_iq1s(), Delta::shared, false, kCodeIq1, 32, src + i * kQK_K);
    BlockIQ1_S b{};
    b.d = e.d;
    for (int j = 0; j < 8; ++j) {
      uint16_t h = static_cast<uint16_t>((e.ls[j] << 12) | (e.neg[4 * j] ? 0x8000 : 0));
      for (int k = 0; k < 4; ++k) {
        b.qs[4 * j + k] = static_cast<uint8_t>(e.idx[4 * j + k] & 0xFF);
        h = static_cast<uint16_t>(h | ((e.idx[4 * j + k] >> 8) << (3 * k)));
      }
      b.qh[j] = h;
    }
    store_block(dst, i, b);
  }
}

void quantize_iq1_m(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const Encoded e = encode(grid_iq1s(), Delta::per_group, false, kCodeIq1, 16, src + i * kQK_K);
    BlockIQ1_M b{};
    uint16_t w[4] = {};
    for (int h = 0; h < 16; ++h) w[h / 4] = static_cast<uint16_t>(w[h / 4] | (e.ls[h] << (3 * (h % 4))));
    for (int k = 0; k < 4; ++k) w[k] = static_cast<uint16_t>(w[k] | (((e.d >> (4 * k)) & 0xF) << 12));
    std::memcpy(b.scales, w, sizeof w);
    for (int m = 0; m < 32; ++m) {
      b.qs[m] = static_cast<uint8_t>(e.idx[m] & 0xFF);
      const int nibble = (e.idx[m] >> 8) | (e.neg[m] ? 8 : 0);
      b.qh[m / 2] = static_cast<uint8_t>(b.qh[m / 2] | (nibble << (4 * (m % 2))));
    }
    store_block(dst, i, b);
  }
}

}  // namespace cadenza::quant_detail
