// 16-lane float vectors (one tile row of 16 pixels) with GCC/Clang vector
// extensions: AVX-512 registers under -march=native on such CPUs, pairs of
// AVX2 / quads of SSE registers elsewhere. Every operation mirrors the scalar
// code in common.h step by step (no FMA contraction), so both give bit-identical
// alphas. Define PLR_SCALAR to compile without vector extensions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common.h"

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif

#if !defined(PLR_SCALAR) && defined(__GNUC__)
#define PLR_HAVE_VEC 1

namespace plr {

constexpr int kLanes = 16;
typedef float vf __attribute__((vector_size(64)));
typedef int32_t vi __attribute__((vector_size(64)));

static inline vf splat(float s) { return vf{} + s; }
static inline vi splati(int32_t s) { return vi{} + s; }
static inline vf sel(vi m, vf a, vf b) { return m ? a : b; }
static inline vi seli(vi m, vi a, vi b) { return m ? a : b; }

static inline vf vabs(vf x) { return (vf)((vi)x & 0x7fffffff); }

// a * b + c, fused where the target has FMA. Only the 16-lane path uses it;
// forward and backward share the functions below, so both still see
// bit-identical alphas (what the backward's threshold replay needs).
static inline vf fmadd(vf a, vf b, vf c) {
#if defined(__AVX512F__)
    return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif defined(__FMA__)
    __m256 a2[2], b2[2], c2[2];
    __builtin_memcpy(a2, &a, sizeof(a));
    __builtin_memcpy(b2, &b, sizeof(b));
    __builtin_memcpy(c2, &c, sizeof(c));
    c2[0] = _mm256_fmadd_ps(a2[0], b2[0], c2[0]);
    c2[1] = _mm256_fmadd_ps(a2[1], b2[1], c2[1]);
    vf r;
    __builtin_memcpy(&r, c2, sizeof(r));
    return r;
#else
    return a * b + c;
#endif
}
static inline vf fmadd(vf a, float b, vf c) { return fmadd(a, splat(b), c); }

// exp(x) for the alpha test: Cephes polynomial (~1-2 ulp) with round-to-nearest
// range reduction through the 1.5 * 2^23 trick. x is clamped below at -87 so
// the result stays normal; lanes with x > 88 (only from invalid negative sigma)
// may produce garbage, which every caller masks out with sel(), never by multiplying.
static inline vf exp_neg(vf x) {
    const float kMagic = 12582912.f;  // 1.5 * 2^23: adding it rounds to an integer
    x = sel(x < -87.f, splat(-87.f), x);
    vf t = fmadd(x, 1.44269504088896341f, splat(kMagic));
    vf n = t - kMagic;
    vf r = fmadd(n, -0.693359375f, x);
    r = fmadd(n, 2.12194440e-4f, r);
    vf p = fmadd(splat(1.9875691500e-4f), r, splat(1.3981999507e-3f));
    p = fmadd(p, r, splat(8.3334519073e-3f));
    p = fmadd(p, r, splat(4.1665795894e-2f));
    p = fmadd(p, r, splat(1.6666665459e-1f));
    p = fmadd(p, r, splat(5.0000001201e-1f));
    vf y = fmadd(p, r * r, r) + 1.f;
    vi e = ((vi)t + (127 - 0x4B400000)) << 23;  // low mantissa bits of t hold n
    return y * (vf)e;
}

// The falloff sigma(dx, dy) = 0.5 a dx^2 + b dx dy + 0.5 c dy^2 at 16 pixel
// centres (px, py), with the offsets dx = x - px, dy = y - py it was built
// from. The forward and the backward both call this, so their alphas agree bit
// for bit (what the backward's threshold replay needs).
struct Falloff {
    vf dx, dy, sigma;
};

static inline Falloff falloff(float x, float y, float a, float b, float c, vf px, vf py) {
    Falloff f;
    f.dx = x - px;
    f.dy = y - py;
    f.sigma = fmadd(b * f.dx, f.dy, (0.5f * a) * f.dx * f.dx + (0.5f * c) * f.dy * f.dy);
    return f;
}

// Bit k set when lane k of the comparison mask m is.
static inline uint32_t mask_bits(vi m) {
#if defined(__AVX512F__)
    return _mm512_test_epi32_mask((__m512i)m, (__m512i)m);
#else
    uint32_t bits = 0;
    for (int k = 0; k < kLanes; ++k) bits |= (m[k] ? 1u : 0u) << k;
    return bits;
#endif
}

// Per lane, can sigma reach level (plus Reach's float allowance) at some
// offset in the rectangle [dxl, dxh] x [dyl, dyh] (Reach::rect in 16 lanes)?
// level = +inf with nb_a = nb_c = 0 marks a conic that is not positive
// definite: every rectangle.
static inline vi reach_rects(float a, float b, float c, float level, float nb_a, float nb_c, vf dxl, vf dxh,
                             vf dyl, vf dyh) {
    auto clampv = [](vf v, vf lo, vf hi) { return sel(v < lo, lo, sel(v > hi, hi, v)); };
    auto sigma = [&](vf dx, vf dy) { return 0.5f * (a * dx * dx + c * dy * dy) + b * dx * dy; };
    const vf X = sel(vabs(dxl) > vabs(dxh), vabs(dxl), vabs(dxh));
    const vf Y = sel(vabs(dyl) > vabs(dyh), vabs(dyl), vabs(dyh));
    const vf lim = level + static_cast<float>(2 * kReachSlack) *
                               (0.5f * (std::fabs(a) * X * X + std::fabs(c) * Y * Y) + std::fabs(b) * X * Y);
    // The centre inside the rectangle is a hit; else sigma's minimum over it
    // lies on an edge facing the centre (from any other boundary point the
    // path towards the centre enters the rectangle and lowers sigma), so only
    // the facing x-edge and y-edge are evaluated, at their clamped stationary
    // points: two candidates instead of Reach::rect's five, each one of its.
    const vf ex = sel(dxl > 0.f, dxl, dxh), ey = sel(dyl > 0.f, dyl, dyh);
    return ((dxl <= 0.f) & (dxh >= 0.f) & (dyl <= 0.f) & (dyh >= 0.f)) |
           (sigma(ex, clampv(nb_c * ex, dyl, dyh)) <= lim) | (sigma(clampv(nb_a * ey, dxl, dxh), ey) <= lim);
}

// Reach::rect for up to 16 tiles of a radius box at once, one tile per lane
// (lane y * bw + x: tile (tx0 + x, ty0 + y), the bit layout of binning's hit
// masks). Same allowance as the scalar one, no branches: binning runs it for
// every box.
static inline uint32_t reach_tiles(const Reach &R, float gx, float gy, int tx0, int ty0, int bw, int bh, int ts,
                                   int width, int height) {
    const int n = bw * bh;
    if (R.mode != 2) return R.mode == 1 ? (n >= 32 ? ~0u : (1u << n) - 1) : 0u;
    vf j;
    for (int k = 0; k < kLanes; ++k) j[k] = static_cast<float>(k);
    const vi yi = __builtin_convertvector((j + 0.5f) * (1.f / static_cast<float>(bw)), vi);  // floor, j >= 0
    const vi xi = __builtin_convertvector(j, vi) - yi * bw;
    const vi px0 = (xi + tx0) * ts, py0 = (yi + ty0) * ts;
    const vi px1 = px0 + ts, py1 = py0 + ts;
    const vf xl = __builtin_convertvector(px0, vf) + 0.5f, yl = __builtin_convertvector(py0, vf) + 0.5f;
    const vf xh = __builtin_convertvector(px1 < width ? px1 : splati(width), vf) - 0.5f;
    const vf yh = __builtin_convertvector(py1 < height ? py1 : splati(height), vf) - 0.5f;
    const vi hit = reach_rects(R.a, R.b, R.c, R.level, R.nb_a, R.nb_c, gx - xh, gx - xl, gy - yh, gy - yl);
    return mask_bits(hit & (__builtin_convertvector(j, vi) < n));
}

typedef float vf8 __attribute__((vector_size(32)));
typedef float vf4 __attribute__((vector_size(16)));

// Sum of the 16 lanes in a fixed pairwise order (deterministic, ISA-independent).
__attribute__((always_inline)) static inline float hsum(vf v) {
    vf8 lo, hi;
    __builtin_memcpy(&lo, &v, sizeof(lo));
    __builtin_memcpy(&hi, reinterpret_cast<const char *>(&v) + sizeof(lo), sizeof(hi));
    vf8 s8 = lo + hi;
    vf4 l4, h4;
    __builtin_memcpy(&l4, &s8, sizeof(l4));
    __builtin_memcpy(&h4, reinterpret_cast<const char *>(&s8) + sizeof(l4), sizeof(h4));
    vf4 s4 = l4 + h4;
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

static inline bool any(vi m) {
#if defined(__AVX512F__)
    return _mm512_test_epi32_mask((__m512i)m, (__m512i)m) != 0;
#else
    int32_t s[kLanes];
    __builtin_memcpy(s, &m, sizeof(s));
    int32_t acc = 0;
    for (int i = 0; i < kLanes; ++i) acc |= s[i];
    return acc != 0;
#endif
}

static inline int count(vi m) {
    int32_t s[kLanes];
    __builtin_memcpy(s, &m, sizeof(s));
    int n = 0;
    for (int i = 0; i < kLanes; ++i) n += s[i] != 0;
    return n;
}

}  // namespace plr
#endif
