// Per-Gaussian stages (sh.cpp, projection.cpp) on blocks of kL consecutive
// Gaussians, one per SIMD lane (simd.h's 16-lane vf; kL = 1, plain float,
// under PLR_SCALAR). Lane code spells out the scalar formula step by step
// (no FMA contraction: -ffp-contract=off), so every lane width gives
// bit-identical results. Inputs are [N, len] rows (AoS); a block is
// transposed into lane-major scratch on the way in and out.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "simd.h"

namespace plr {

#if defined(PLR_HAVE_VEC)
typedef vf Lane;
constexpr int kL = kLanes;
#else
typedef float Lane;
constexpr int kL = 1;
#endif

static inline Lane load(const float *p) {
    Lane v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}
static inline void store(float *p, Lane v) { std::memcpy(p, &v, sizeof(v)); }
// s in every lane (-0.f stays -0.f, unlike vf{} + s)
static inline Lane bcast(float s) {
    alignas(64) float t[kL];
    for (int j = 0; j < kL; ++j) t[j] = s;
    return load(t);
}
// std::min / std::max lane by lane (same operand order, so NaNs and signed zeros match)
template <class T>
static inline T lmin(T a, T b) { return b < a ? b : a; }
template <class T>
static inline T lmax(T a, T b) { return a < b ? b : a; }
// correctly rounded, so identical to std::sqrt in every lane
static inline Lane lsqrt(Lane x) {
    alignas(64) float t[kL];
    store(t, x);
    for (int j = 0; j < kL; ++j) t[j] = std::sqrt(t[j]);
    return load(t);
}

// dst[m * kL + j] = src[j * stride + m] for m < len, j < n (other lanes 0).
static inline void to_lanes(const float *__restrict src, int64_t stride, int n, int len, float *__restrict dst) {
    if (n < kL) std::fill(dst, dst + len * kL, 0.f);
    for (int j = 0; j < n; ++j)
        for (int m = 0; m < len; ++m) dst[m * kL + j] = src[j * stride + m];
}

// dst[j * stride + m] = src[m * kL + j] for m < len, 0 for len <= m < stride.
static inline void from_lanes(const float *__restrict src, int len, int64_t stride, int n, float *__restrict dst) {
    for (int j = 0; j < n; ++j) {
        float *row = dst + j * stride;
        for (int m = 0; m < len; ++m) row[m] = src[m * kL + j];
        std::fill(row + len, row + stride, 0.f);
    }
}

}  // namespace plr
