// Shared inline math for the native CPU rasterizer (no torch headers: these
// translation units compile in seconds, only bindings.cpp pulls in libtorch).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

// Lane helpers and the alpha math must inline into the pixel loops: a call
// passes 16-lane values through memory on targets without 64-byte registers.
#if defined(__GNUC__)
#define PLR_INLINE static inline __attribute__((always_inline))
#else
#define PLR_INLINE static inline
#endif

namespace plr {

constexpr float kAlphaThreshold = 1.f / 255.f;  // gsplat ALPHA_THRESHOLD
constexpr float kMaxAlpha = 0.999f;
constexpr float kTransmittanceEps = 1e-4f;
// Where the forward's running transmittance stops falling once a pixel is
// done (rasterize_fwd.cpp's Blend): far below kTransmittanceEps, far above the
// subnormals that a product falling on without end would reach (many CPUs
// take a slow path on them).
constexpr float kSpentFloor = 1e-20f;

// Scalar spellings of the lane helpers simd.h defines for vectors, so the
// templates below compile to the same operations for float and for vf.
PLR_INLINE float sel(bool m, float a, float b) { return m ? a : b; }
PLR_INLINE int32_t as_int(float x) {
    int32_t i;
    std::memcpy(&i, &x, sizeof(i));
    return i;
}
PLR_INLINE float as_float(int32_t i) {
    float x;
    std::memcpy(&x, &i, sizeof(x));
    return x;
}

// 2^n as float bits from t = n + 1.5 * 2^23 (the low mantissa bits of t hold
// n); unsigned, so garbage lanes cannot overflow a signed shift.
PLR_INLINE int32_t exp_bits(int32_t t) {
    return static_cast<int32_t>((static_cast<uint32_t>(t) + (127u - 0x4B400000u)) << 23);
}

// exp(-s) (meant for s >= 0) in float, accurate to ~1-2 ulp (Cephes expf polynomial),
// branch-free so that it vectorises. glibc's expf only vectorises under
// -ffast-math, which would break the exact thresholds (alpha < 1/255,
// T <= 1e-4) shared with the reference. One template for the scalar code and
// every vector width, with no fused multiply-add (-ffp-contract=off): every
// build (scalar, SSE, AVX2, AVX-512, NEON) computes bit-identical alphas.
// Round-to-nearest range reduction through the 1.5 * 2^23 trick; s is clamped
// above at 87 so the result stays normal. Lanes with s < -88 (only from
// invalid negative sigma) give garbage, which every caller masks out with a
// select, never by multiplying.
// y * 2^n, where t = n + 1.5 * 2^23 carries the integer n in its low bits (exp_minus_t's
// range reduction). Exact for the normal results exp_minus_t scales; the vector
// overload in simd.h is one instruction where the ISA has one (AVX-512's vscalefps).
PLR_INLINE float pow2_scale(float y, float t, float /*n*/) { return y * as_float(exp_bits(as_int(t))); }

// min(s, hi) as (s < hi ? s : hi), NaN giving hi; simd.h's vector overload is one vminps on x86.
PLR_INLINE float min_as_sel(float s, float hi) { return s < hi ? s : hi; }

// The polynomial is that of x = -s; each step is written with the sign moved
// into the operation (fl(-a * b) = -fl(a * b), fl(c + -a) = fl(c - a): rounding
// to nearest is symmetric), so the result is, bit for bit, what evaluating it at
// x = -s gives, without the negation: one vector operation fewer per alpha in
// loops that run at the floating-point units' pace. r below is -(x's r).
template <class F>
PLR_INLINE F exp_minus_t(F s) {
    const float kMagic = 12582912.f;  // 1.5 * 2^23: adding it rounds to an integer
    const F m = min_as_sel(s, F(87.f));
    const F t = kMagic - m * 1.44269504088896341f;
    const F n = t - kMagic;
    F r = m + n * 0.693359375f;  // exact: 0.693359375 has 9 significant bits, |n| < 2^7
    r = r - n * 2.12194440e-4f;
    F p = 1.3981999507e-3f - F(1.9875691500e-4f) * r;
    p = 8.3334519073e-3f - p * r;
    p = 4.1665795894e-2f - p * r;
    p = 1.6666665459e-1f - p * r;
    p = 5.0000001201e-1f - p * r;
    const F y = (p * (r * r) - r) + 1.f;
    return pow2_scale(y, t, n);
}
PLR_INLINE float exp_minus(float s) { return exp_minus_t(s); }

// Gaussian falloff exponent, written once so forward and backward (and every
// build, scalar or vector) recompute bit-identical values: the backward replays
// the forward's threshold tests.
template <class F>
PLR_INLINE F gauss_sigma(F a, F b, F c, F dx, F dy) {
    return 0.5f * (a * dx * dx + c * dy * dy) + b * dx * dy;
}

// The sigma level up to which a Gaussian of opacity o can reach alpha 1/255
// (o exp(-sigma) >= 1/255 <=> sigma <= ln(255 o)), with slack for the float
// rounding between the two: the blend loops' alpha = fl(o fl(exp_minus(sigma)))
// is within ~3 ulp (4e-7 relative) of o exp(-sigma), kAlphaThreshold within
// half an ulp of 1/255, and std::log(255 o) within an ulp plus the rounding of
// 255 o, so a pair that blends has sigma <= ln(255 o) + 5e-7 (1 + |ln(255 o)|).
// kLevelSlack is 200x that. (The error of sigma's own float evaluation is
// Reach's kReachSlack, separate.) Until 2026-11-25 the slack was 5% + 0.05,
// which kept ~2.5% more ellipse radius than any rounding needs. Negative: no
// pixel can see the Gaussian (it also fails at sigma = 0).
constexpr float kLevelSlack = 1e-4f;
static inline float reach_level(float opac) {
    const float level = std::log(opac * 255.f);
    return level + kLevelSlack * (1.f + std::fabs(level));
}

// Float-evaluation allowance of the culling tests, relative to the sum of the
// magnitudes of sigma's terms (see Reach).
constexpr double kReachSlack = 2e-5;

// Half-extents of the region where a Gaussian's alpha can reach 1/255: the
// ellipse sigma <= level (plus Reach's float allowance) reaches sqrt(2 level cov_ii) along axis i, with
// cov = conic^-1 (cov_xx = c / det, cov_yy = a / det). Skipping pixels
// outside never changes one (Reach below trims further, exactly). Both are -1
// when no pixel can see the Gaussian and +inf for a degenerate conic (keep
// every pixel).
static inline void alpha_half_extents(float a, float b, float c, float opac, float *half_w,
                                      float *half_h) {
    float det = a * c - b * b;
    if (!(det > 0.f) || !(a > 0.f) || !(c > 0.f)) {
        *half_w = *half_h = INFINITY;
        return;
    }
    float level = reach_level(opac);
    if (level < 0.f) {
        *half_w = *half_h = -1.f;
        return;
    }
    // Reach's float allowance at the ellipse's extreme points is at most
    // 8 kReachSlack level' ac / det: solve level' = level + that allowance
    const float grow = 1.f - static_cast<float>(8 * kReachSlack) * (a * c / det);
    if (!(grow > 0.5f)) {
        *half_w = *half_h = INFINITY;
        return;
    }
    float s = 2.f * (level / grow) / det;
    *half_w = std::sqrt(s * c) + 0.01f;
    *half_h = std::sqrt(s * a) + 0.01f;
}

// Exact culling: can sigma(dx, dy) = 0.5 a dx^2 + b dx dy + 0.5 c dy^2 reach
// reach_level() somewhere in a rectangle (or row segment) of Gaussian-to-pixel-
// centre offsets dx = x - px, dy = y - py? sigma is convex, so its minimum over
// a rectangle is 0 when the centre lies inside, else on an edge, at the clamped
// stationary point of the free coordinate (the AccuTile / Speedy-Splat test).
// The pixel loops evaluate sigma in float, where cancellation between the
// terms (thin rotated ellipses) costs up to a few ulp of the terms' magnitudes,
// not of sigma; this test runs in float too. It allows 2 kReachSlack (~600
// ulp) of the largest term sum in the rectangle on top of the level's slack,
// which covers both roundings, so a pair is dropped only when no float
// evaluation can blend it. Evaluating a sigma at a slightly rounded stationary
// point only raises it by a second-order amount. A conic that is not positive
// definite keeps everything, as alpha_half_extents does.
struct Reach {
    float a, b, c, level, nb_a, nb_c;  // nb_a dy / nb_c dx: stationary dx / dy
    int mode;                          // 0: reaches nothing, 1: everything, 2: test
    Reach(float a_, float b_, float c_, float level_) : a(a_), b(b_), c(c_), level(level_) {
        nb_a = nb_c = 0.f;
        if (!(level >= 0.f)) {
            mode = 0;
        } else if (!(a > 0.f) || !(c > 0.f) || !(a * c - b * b > 0.f)) {
            mode = 1;
        } else {
            mode = 2;
            nb_a = -b / a;
            nb_c = -b / c;
        }
    }
    float sigma(float dx, float dy) const { return 0.5f * (a * dx * dx + c * dy * dy) + b * dx * dy; }
    static float clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }
    // level plus the float-evaluation allowance for |dx| <= X, |dy| <= Y
    float bound(float X, float Y) const {
        return level + static_cast<float>(2 * kReachSlack) *
                           (0.5f * (std::fabs(a) * X * X + std::fabs(c) * Y * Y) + std::fabs(b) * X * Y);
    }
    // the row segment dy, dx in [dxl, dxh]
    bool row(float dy, float dxl, float dxh) const {
        if (mode != 2) return mode == 1;
        const float lim = bound(std::max(std::fabs(dxl), std::fabs(dxh)), std::fabs(dy));
        return sigma(clampf(nb_a * dy, dxl, dxh), dy) <= lim;
    }
    bool rect(float dxl, float dxh, float dyl, float dyh) const {
        if (mode != 2) return mode == 1;
        const float lim = bound(std::max(std::fabs(dxl), std::fabs(dxh)), std::max(std::fabs(dyl), std::fabs(dyh)));
        // the point nearest the centre (sigma 0 when the centre is inside) decides most tiles
        if (sigma(clampf(0.f, dxl, dxh), clampf(0.f, dyl, dyh)) <= lim) return true;
        return (sigma(clampf(nb_a * dyl, dxl, dxh), dyl) <= lim) | (sigma(clampf(nb_a * dyh, dxl, dxh), dyh) <= lim) |
               (sigma(dxl, clampf(nb_c * dxl, dyl, dyh)) <= lim) | (sigma(dxh, clampf(nb_c * dxh, dyl, dyh)) <= lim);
    }
};

// Tile-local rows [lo, hi] (inclusive) within half of centre my; lo > hi: none.
static inline void row_span(float my, float half, float tile_y0, int tile_rows, int *lo, int *hi) {
    if (half < 0.f) {
        *lo = 1;
        *hi = 0;
        return;
    }
    // pixel row r has centre tile_y0 + r + 0.5
    float flo = std::floor(my - half - tile_y0 - 0.5f);
    float fhi = std::ceil(my + half - tile_y0 - 0.5f);
    *lo = flo < 0.f ? 0 : (flo > tile_rows ? tile_rows : static_cast<int>(flo));
    *hi = fhi > tile_rows - 1 ? tile_rows - 1 : (fhi < -1.f ? -1 : static_cast<int>(fhi));
}

}  // namespace plr
