// Per-Gaussian stages (sh.cpp, projection.cpp) on blocks of kL consecutive
// Gaussians, one per SIMD lane of the target's native vector (simd.h's nf:
// 16 lanes on AVX-512, 8 on AVX2, 4 on SSE / NEON; kL = 1, plain float,
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
typedef nf Lane;
constexpr int kL = kNative;
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

#if defined(PLR_HAVE_VEC)
// In-register kL x kL transpose: log2(kL) stages, each swapping the
// off-diagonal k x k blocks of every 2k x 2k block (two-source shuffles).
static inline void transpose_lanes(Lane r[kL]) {
#define PLR_STAGE(K, LO, HI)                                                                                   \
    for (int i = 0; i < kL; ++i)                                                                               \
        if (!(i & K)) {                                                                                        \
            Lane a = r[i], b = r[i + K];                                                                       \
            r[i] = __builtin_shufflevector(a, b, LO);                                                          \
            r[i + K] = __builtin_shufflevector(a, b, HI);                                                      \
        }
#define PLR_L(...) __VA_ARGS__
#if defined(__AVX512F__)
    PLR_STAGE(8, PLR_L(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
              PLR_L(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31))
    PLR_STAGE(4, PLR_L(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27),
              PLR_L(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31))
    PLR_STAGE(2, PLR_L(0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
              PLR_L(2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31))
    PLR_STAGE(1, PLR_L(0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30),
              PLR_L(1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31))
#elif defined(__AVX__)
    PLR_STAGE(4, PLR_L(0, 1, 2, 3, 8, 9, 10, 11), PLR_L(4, 5, 6, 7, 12, 13, 14, 15))
    PLR_STAGE(2, PLR_L(0, 1, 8, 9, 4, 5, 12, 13), PLR_L(2, 3, 10, 11, 6, 7, 14, 15))
    PLR_STAGE(1, PLR_L(0, 8, 2, 10, 4, 12, 6, 14), PLR_L(1, 9, 3, 11, 5, 13, 7, 15))
#else
    PLR_STAGE(2, PLR_L(0, 1, 4, 5), PLR_L(2, 3, 6, 7))
    PLR_STAGE(1, PLR_L(0, 4, 2, 6), PLR_L(1, 5, 3, 7))
#endif
#undef PLR_L
#undef PLR_STAGE
}
#endif

// dst[m * kL + j] = src[j * stride + m] for m < len, j < n (other lanes 0).
static inline void to_lanes(const float *__restrict src, int64_t stride, int n, int len, float *__restrict dst) {
    int m0 = 0;
#if defined(PLR_HAVE_VEC)
    if (n == kL)
        for (; m0 + kL <= len; m0 += kL) {
            Lane r[kL];
            for (int j = 0; j < kL; ++j) r[j] = load(src + j * stride + m0);
            transpose_lanes(r);
            for (int i = 0; i < kL; ++i) store(dst + (m0 + i) * kL, r[i]);
        }
#endif
    if (m0 == len) return;
    if (n < kL) std::fill(dst + m0 * kL, dst + len * kL, 0.f);
    for (int j = 0; j < n; ++j)
        for (int m = m0; m < len; ++m) dst[m * kL + j] = src[j * stride + m];
}

// A store that bypasses the caches (p aligned to a Lane): for outputs far
// larger than the caches (kStreamBytes on), written whole and read by a later
// call, it saves reading each line in before overwriting it (the SH
// coefficient gradient at 500k Gaussians, SH 3, 96 MB: sh_bwd 13.7-14.1 ->
// 11.0-11.2 ms, 2 threads). Callers end with stream_fence() before their
// results are read.
constexpr size_t kStreamBytes = size_t(16) << 20;
static inline void store_stream(float *p, Lane v) {
#if defined(PLR_HAVE_VEC) && defined(__AVX512F__)
    _mm512_stream_ps(p, (__m512)v);
#elif defined(PLR_HAVE_VEC) && defined(__AVX__)
    _mm256_stream_ps(p, (__m256)v);
#elif defined(PLR_HAVE_VEC) && defined(__SSE__)
    _mm_stream_ps(p, (__m128)v);
#else
    store(p, v);
#endif
}
static inline void stream_fence() {
#if defined(PLR_HAVE_VEC) && defined(__SSE__)
    _mm_sfence();
#endif
}

// dst[j * stride + m] = src[m * kL + j] for m < len, 0 for len <= m < stride.
// stream: whole lane-aligned vectors go out through store_stream.
static inline void from_lanes(const float *__restrict src, int len, int64_t stride, int n, float *__restrict dst,
                              bool stream = false) {
    int m0 = 0;
#if defined(PLR_HAVE_VEC)
    if (n == kL) {
        const bool nt = stream && stride % kL == 0 && reinterpret_cast<uintptr_t>(dst) % sizeof(Lane) == 0;
        for (; m0 + kL <= len; m0 += kL) {
            Lane r[kL];
            for (int i = 0; i < kL; ++i) r[i] = load(src + (m0 + i) * kL);
            transpose_lanes(r);
            if (nt)
                for (int j = 0; j < kL; ++j) store_stream(dst + j * stride + m0, r[j]);
            else
                for (int j = 0; j < kL; ++j) store(dst + j * stride + m0, r[j]);
        }
    }
#else
    (void)stream;
#endif
    for (int j = 0; j < n; ++j) {
        float *row = dst + j * stride;
        for (int m = m0; m < len; ++m) row[m] = src[m * kL + j];
        std::fill(row + len, row + stride, 0.f);
    }
}

}  // namespace plr
