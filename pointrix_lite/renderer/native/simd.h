// 16-lane float vectors (one 4x4 pixel block) built from the target's native
// vectors: one AVX-512 register, two AVX2 or four SSE / NEON registers. GCC's
// generic 64-byte vector type is lowered badly where 64 bytes is not native
// (measured on AVX2: values spilled to the stack lane by lane, the rasterizer
// ~10x slower than on AVX-512), so vf / vi hold an array of native-width
// vectors and every operator works part by part. Alpha math (common.h's
// exp_minus / gauss_sigma templates) runs the same unfused operations in every
// lane of every ISA and in the scalar code, so all builds blend bit-identical
// alphas. Define PLR_SCALAR to compile without vector extensions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#if !defined(PLR_SCALAR) && defined(__GNUC__)
#define PLR_HAVE_VEC 1

namespace plr {

constexpr int kLanes = 16;
#if defined(__AVX512F__)
constexpr int kNative = 16;
#elif defined(__AVX__)
constexpr int kNative = 8;
#else
constexpr int kNative = 4;  // SSE, NEON, anything else GCC/Clang vectorise
#endif
constexpr int kParts = kLanes / kNative;
typedef float nf __attribute__((vector_size(4 * kNative)));
typedef int32_t ni __attribute__((vector_size(4 * kNative)));

// Broadcast without arithmetic. (nf{} + s, GCC's idiom, is an add the compiler
// may not fold away, as 0 + -0 is +0: in the forward's inner loop that put a
// scalar add in front of each of its nine per-Gaussian broadcasts.)
PLR_INLINE nf nsplat(float s) {
#if defined(__AVX512F__)
    return (nf)_mm512_set1_ps(s);
#elif defined(__AVX__)
    return (nf)_mm256_set1_ps(s);
#elif defined(__SSE__)
    return (nf)_mm_set1_ps(s);
#elif defined(__ARM_NEON)
    return (nf)vdupq_n_f32(s);
#else
    nf v;
    for (int j = 0; j < kNative; ++j) v[j] = s;
    return v;
#endif
}

struct vi;
struct vf {
    nf p[kParts];
    vf() = default;  // vf{} is zero
    vf(float s) {    // NOLINT: a scalar broadcasts, as GCC vectors do
        const nf v = nsplat(s);
        for (int i = 0; i < kParts; ++i) p[i] = v;
    }
    float operator[](int j) const { return p[j / kNative][j % kNative]; }
    void set(int j, float v) { p[j / kNative][j % kNative] = v; }
};
struct vi {
    ni p[kParts];
    vi() = default;
    vi(int32_t s) {  // NOLINT
        for (int i = 0; i < kParts; ++i) p[i] = ni{} + s;
    }
    int32_t operator[](int j) const { return p[j / kNative][j % kNative]; }
    void set(int j, int32_t v) { p[j / kNative][j % kNative] = v; }
};

#define PLR_PARTS(T, expr)                              \
    T r;                                                \
    for (int i = 0; i < kParts; ++i) r.p[i] = (expr);   \
    return r
#define PLR_BINOP(R, T, op)                                                                \
    PLR_INLINE R operator op(const T &a, const T &b) { PLR_PARTS(R, a.p[i] op b.p[i]); }
PLR_BINOP(vf, vf, +)
PLR_BINOP(vf, vf, -)
PLR_BINOP(vf, vf, *)
PLR_BINOP(vf, vf, /)
PLR_BINOP(vi, vf, <)
PLR_BINOP(vi, vf, <=)
PLR_BINOP(vi, vf, >)
PLR_BINOP(vi, vf, >=)
PLR_BINOP(vi, vi, +)
PLR_BINOP(vi, vi, -)
PLR_BINOP(vi, vi, *)
PLR_BINOP(vi, vi, &)
PLR_BINOP(vi, vi, |)
PLR_BINOP(vi, vi, <)
PLR_BINOP(vi, vi, >=)
#undef PLR_BINOP
PLR_INLINE vf operator-(const vf &a) { PLR_PARTS(vf, -a.p[i]); }
PLR_INLINE vi operator~(const vi &a) { PLR_PARTS(vi, ~a.p[i]); }
PLR_INLINE vi operator<<(const vi &a, int s) { PLR_PARTS(vi, a.p[i] << s); }
PLR_INLINE vf &operator+=(vf &a, const vf &b) { return a = a + b; }

PLR_INLINE vf splat(float s) { return vf(s); }
PLR_INLINE vi splati(int32_t s) { return vi(s); }
PLR_INLINE vf sel(const vi &m, const vf &a, const vf &b) { PLR_PARTS(vf, m.p[i] ? a.p[i] : b.p[i]); }
PLR_INLINE vi seli(const vi &m, const vi &a, const vi &b) { PLR_PARTS(vi, m.p[i] ? a.p[i] : b.p[i]); }
PLR_INLINE vi as_int(const vf &a) { PLR_PARTS(vi, (ni)a.p[i]); }
PLR_INLINE vf as_float(const vi &a) { PLR_PARTS(vf, (nf)a.p[i]); }
PLR_INLINE vi to_int(const vf &a) { PLR_PARTS(vi, __builtin_convertvector(a.p[i], ni)); }  // truncates
PLR_INLINE vf to_float(const vi &a) { PLR_PARTS(vf, __builtin_convertvector(a.p[i], nf)); }
PLR_INLINE vf vabs(const vf &x) { return as_float(as_int(x) & 0x7fffffff); }
PLR_INLINE vf load16(const float *s) {
    vf r;
    __builtin_memcpy(&r, s, sizeof(r));
    return r;
}
PLR_INLINE void store16(float *d, const vf &v) { __builtin_memcpy(d, &v, sizeof(v)); }
PLR_INLINE vf iota16() {
    static const float k[kLanes] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    return load16(k);
}

// a * b + c, fused where the target has FMA. Only colour sums and gradients
// use it (results may differ by ISA in the last bits there, never the alphas).
PLR_INLINE nf nfmadd(nf a, nf b, nf c) {
#if defined(__AVX512F__)
    return (nf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif defined(__FMA__) && defined(__AVX__)
    return (nf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#elif defined(__aarch64__)
    return (nf)vfmaq_f32((float32x4_t)c, (float32x4_t)a, (float32x4_t)b);
#else
    return a * b + c;
#endif
}
PLR_INLINE vf fmadd(const vf &a, const vf &b, const vf &c) { PLR_PARTS(vf, nfmadd(a.p[i], b.p[i], c.p[i])); }

// A sum over many 16-lane values kept in one native vector (parts folded in
// as they come): the backward's nine gradient sums would not fit in AVX2's
// sixteen registers as 16-lane values. Reduced by hsum(nf) below.
PLR_INLINE nf fold_add(const vf &x, nf acc) {
    for (int i = 0; i < kParts; ++i) acc = acc + x.p[i];
    return acc;
}
PLR_INLINE nf fold_fmadd(const vf &a, const vf &b, nf acc) {
    for (int i = 0; i < kParts; ++i) acc = nfmadd(a.p[i], b.p[i], acc);
    return acc;
}
// min(s, hi) as common.h's scalar (s < hi ? s : hi, NaN giving hi) and max(a, b) as (a > b ? a : b):
// x86's minps / maxps are exactly those (GCC emits a compare and a blend for the selects); NEON's
// vminq / vmaxq are not for NaN, so selects there.
#if defined(__AVX512F__)
#define PLR_X86_MINMAX(op, a, b) PLR_PARTS(vf, (nf)_mm512_##op##_ps((__m512)(a).p[i], (__m512)(b).p[i]))
#elif defined(__AVX__)
#define PLR_X86_MINMAX(op, a, b) PLR_PARTS(vf, (nf)_mm256_##op##_ps((__m256)(a).p[i], (__m256)(b).p[i]))
#elif defined(__SSE__)
#define PLR_X86_MINMAX(op, a, b) PLR_PARTS(vf, (nf)_mm_##op##_ps((__m128)(a).p[i], (__m128)(b).p[i]))
#endif
PLR_INLINE vf min_as_sel(const vf &s, const vf &hi) {
#ifdef PLR_X86_MINMAX
    PLR_X86_MINMAX(min, s, hi);
#else
    return sel(s < hi, s, hi);
#endif
}
PLR_INLINE vf vmax(const vf &a, const vf &b) {
#ifdef PLR_X86_MINMAX
    PLR_X86_MINMAX(max, a, b);
#else
    return sel(a > b, a, b);
#endif
}
#undef PLR_X86_MINMAX
#undef PLR_PARTS

PLR_INLINE vi exp_bits(const vi &t) { return (t + vi(127 - 0x4B400000)) << 23; }
PLR_INLINE vf pow2_scale(const vf &y, const vf &t, const vf &n) {
#if defined(__AVX512F__)
    // y * 2^n in one vscalefps (the same correctly rounded product) for an add, a shift and a multiply
    (void)t;
    vf r;
    r.p[0] = (nf)_mm512_scalef_ps((__m512)y.p[0], (__m512)n.p[0]);
    return r;
#else
    (void)n;
    return y * as_float(exp_bits(as_int(t)));
#endif
}
// exp(-s) and sigma as common.h defines them for every build
PLR_INLINE vf exp_minus(const vf &s) { return exp_minus_t(s); }

// The falloff sigma(dx, dy) = 0.5 a dx^2 + b dx dy + 0.5 c dy^2 at 16 pixel
// centres (px, py), with the offsets dx = x - px, dy = y - py it was built
// from. The forward and the backward both call this, so their alphas agree bit
// for bit (what the backward's threshold replay needs).
struct Falloff {
    vf dx, dy, sigma;
};

PLR_INLINE Falloff falloff(float x, float y, float a, float b, float c, const vf &px, const vf &py) {
    Falloff f;
    f.dx = x - px;
    f.dy = y - py;
    f.sigma = gauss_sigma(vf(a), vf(b), vf(c), f.dx, f.dy);
    return f;
}

// Bit k set when lane k of the comparison mask m is (movemask per native part).
PLR_INLINE uint32_t mask_bits(const vi &m) {
#if defined(__AVX512F__)
    return _mm512_movepi32_mask((__m512i)m.p[0]);
#else
    uint32_t bits = 0;
    for (int i = 0; i < kParts; ++i) {
#if defined(__AVX__)
        const uint32_t b = static_cast<uint32_t>(_mm256_movemask_ps((__m256)m.p[i]));
#elif defined(__SSE2__)
        const uint32_t b = static_cast<uint32_t>(_mm_movemask_ps((__m128)m.p[i]));
#elif defined(__aarch64__)
        const uint32x4_t w = {1, 2, 4, 8};
        const uint32_t b = vaddvq_u32(vandq_u32((uint32x4_t)m.p[i], w));
#else
        uint32_t b = 0;
        for (int j = 0; j < kNative; ++j) b |= (m.p[i][j] ? 1u : 0u) << j;
#endif
        bits |= b << (i * kNative);
    }
    return bits;
#endif
}

// Is any lane of the comparison mask m set?
PLR_INLINE bool any(const vi &m) {
#if defined(__AVX512F__)
    return _mm512_movepi32_mask((__m512i)m.p[0]) != 0;
#else
    ni o = m.p[0];
    for (int i = 1; i < kParts; ++i) o |= m.p[i];
#if defined(__AVX__)
    return !_mm256_testz_si256((__m256i)o, (__m256i)o);
#elif defined(__SSE4_1__)
    return !_mm_testz_si128((__m128i)o, (__m128i)o);
#elif defined(__aarch64__)
    return vmaxvq_u32((uint32x4_t)o) != 0;
#else
    return mask_bits(m) != 0;
#endif
#endif
}

PLR_INLINE int count(const vi &m) { return __builtin_popcount(mask_bits(m)); }

// Per lane, can sigma reach level (plus Reach's float allowance) at some
// offset in the rectangle [dxl, dxh] x [dyl, dyh] (Reach::rect in 16 lanes)?
// level = +inf with nb_a = nb_c = 0 marks a conic that is not positive
// definite: every rectangle.
PLR_INLINE vi reach_rects(float a, float b, float c, float level, float nb_a, float nb_c, const vf &dxl,
                             const vf &dxh, const vf &dyl, const vf &dyh) {
    auto clampv = [](const vf &v, const vf &lo, const vf &hi) { return sel(v < lo, lo, sel(v > hi, hi, v)); };
    auto sigma = [&](const vf &dx, const vf &dy) { return 0.5f * (a * dx * dx + c * dy * dy) + b * dx * dy; };
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
PLR_INLINE uint32_t reach_tiles(const Reach &R, float gx, float gy, int tx0, int ty0, int bw, int bh, int ts,
                                   int width, int height) {
    const int n = bw * bh;
    if (R.mode != 2) return R.mode == 1 ? (n >= 32 ? ~0u : (1u << n) - 1) : 0u;
    const vf j = iota16();
    const vi yi = to_int((j + 0.5f) * (1.f / static_cast<float>(bw)));  // floor, j >= 0
    const vi xi = to_int(j) - yi * vi(bw);
    const vi px0 = (xi + vi(tx0)) * vi(ts), py0 = (yi + vi(ty0)) * vi(ts);
    const vi px1 = px0 + vi(ts), py1 = py0 + vi(ts);
    const vf xl = to_float(px0) + 0.5f, yl = to_float(py0) + 0.5f;
    const vf xh = to_float(seli(px1 < vi(width), px1, vi(width))) - 0.5f;
    const vf yh = to_float(seli(py1 < vi(height), py1, vi(height))) - 0.5f;
    const vi hit = reach_rects(R.a, R.b, R.c, R.level, R.nb_a, R.nb_c, gx - xh, gx - xl, gy - yh, gy - yl);
    return mask_bits(hit) & (n >= 32 ? ~0u : (1u << n) - 1);
}

// Sum of the lanes of a native vector in a fixed pairwise order (lanes j and
// j + 8, then j and j + 4, then (0 + 2) + (1 + 3)): with fold_add's order,
// a 16-lane sum is reduced the same way on AVX-512 as before the folding.
PLR_INLINE float hsum(nf v) {
    typedef float f4 __attribute__((vector_size(16)));
    f4 s4;
#if defined(__AVX512F__)
    typedef float f8 __attribute__((vector_size(32)));
    const f8 s8 = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                  __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
    s4 = __builtin_shufflevector(s8, s8, 0, 1, 2, 3) + __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
#elif defined(__AVX__)
    s4 = __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
#else
    s4 = v;
#endif
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

#if defined(__AVX512F__)
// The lane sums of N <= 16 vectors in one vector, lane q the sum of v[q]: one
// shuffle pair and add per two vectors per level (four levels), instead of
// ~10 instructions per vector. Each sum is formed in hsum's order (lanes j and
// j + 8, then + 4, then (0 + 2) + (1 + 3)), so the results are hsum's bits.
template <int N>
PLR_INLINE __m512 hsum_lanes(const nf *v) {
    __m512 x[16], c[8], u[4], w[2];
    for (int q = 0; q < 16; ++q) x[q] = q < N ? (__m512)v[q] : _mm512_setzero_ps();
    for (int i = 0; i < 8; ++i)  // 128-bit quarters 0 + 2 and 1 + 3 of two vectors
        c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; ++i)  // then those two quarters: four partial sums each
        u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; ++i)  // partials 0 + 2 and 1 + 3
        w[i] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0x44), _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], 0xEE));
    const __m512 z = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xDD));
    // z's lane 4 i + j holds vector 4 j + i
    return _mm512_permutexvar_ps(_mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0), z);
}
#endif

}  // namespace plr
#endif
