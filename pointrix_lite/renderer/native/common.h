// Shared inline math for the native CPU rasterizer (no torch headers: these
// translation units compile in seconds, only bindings.cpp pulls in libtorch).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace plr {

constexpr float kAlphaThreshold = 1.f / 255.f;  // gsplat ALPHA_THRESHOLD
constexpr float kMaxAlpha = 0.999f;
constexpr float kTransmittanceEps = 1e-4f;

// exp(x) (meant for x <= 0) in float, accurate to ~1 ulp (Cephes expf polynomial) and
// branch-free, so that GCC vectorises the pixel loops with it. glibc's expf
// only vectorises under -ffast-math, which would break the exact thresholds
// (alpha < 1/255, T <= 1e-4) shared with the reference.
static inline float exp_neg(float x) {
    x = x < -87.f ? -87.f : x;
    x = x > 88.f ? 88.f : x;
    float fx = x * 1.44269504088896341f + 0.5f;
    float n = std::floor(fx);
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.f;
    int32_t e = (static_cast<int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &e, sizeof(float));
    return y * scale;
}

// Gaussian falloff exponent, written once so forward and backward recompute
// bit-identical values (the backward replays the forward's threshold tests).
static inline float gauss_sigma(float a, float b, float c, float dx, float dy) {
    return 0.5f * (a * dx * dx + c * dy * dy) + b * dx * dy;
}

// Half-extents of the region where a Gaussian's alpha can reach 1/255: the
// ellipse sigma <= ln(255 o) reaches sqrt(2 ln(255 o) cov_ii) along axis i,
// with cov = conic^-1 (cov_xx = c / det, cov_yy = a / det). The 5% + 0.05
// slack covers float rounding of sigma for elongated Gaussians, so skipping
// pixels outside never changes one. Both are -1 when no pixel can see the
// Gaussian and +inf for a degenerate conic (keep every pixel).
static inline void alpha_half_extents(float a, float b, float c, float opac, float *half_w,
                                      float *half_h) {
    float det = a * c - b * b;
    if (!(det > 0.f) || !(a > 0.f) || !(c > 0.f)) {
        *half_w = *half_h = INFINITY;
        return;
    }
    float level = std::log(opac * 255.f);
    if (level < 0.f) {
        *half_w = *half_h = -1.f;
        return;
    }
    float s = 2.f * (level * 1.05f + 0.05f) / det;
    *half_w = std::sqrt(s * c) + 0.01f;
    *half_h = std::sqrt(s * a) + 0.01f;
}

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
