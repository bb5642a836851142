// Spherical-harmonics colours max(SH(dir) + 0.5, 0), dir = mean - camera
// centre (gsplat SphericalHarmonicsCUDA.cu bases, degrees 0..4), forward and
// backward. The basis derivatives come from evaluating the same polynomial
// code on dual numbers, so there is no second hand-derived formula to drift.
// Both run on blocks of kL Gaussians, one per SIMD lane (lanes.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels.h"
#include "pool.h"
#include "lanes.h"

namespace plr {
namespace {

constexpr int kMaxBases = 25;

// Value plus partial derivatives w.r.t. the unit direction's x, y, z.
template <class S>
struct Dual {
    S v, dx, dy, dz;
};
template <class S>
inline Dual<S> operator+(Dual<S> a, Dual<S> b) { return {a.v + b.v, a.dx + b.dx, a.dy + b.dy, a.dz + b.dz}; }
template <class S>
inline Dual<S> operator-(Dual<S> a, Dual<S> b) { return {a.v - b.v, a.dx - b.dx, a.dy - b.dy, a.dz - b.dz}; }
template <class S>
inline Dual<S> operator*(Dual<S> a, Dual<S> b) {
    return {a.v * b.v, a.dx * b.v + a.v * b.dx, a.dy * b.v + a.v * b.dy, a.dz * b.v + a.v * b.dz};
}
template <class S>
inline Dual<S> operator*(float s, Dual<S> a) { return {s * a.v, s * a.dx, s * a.dy, s * a.dz}; }
template <class S>
inline Dual<S> operator+(Dual<S> a, float s) { return {a.v + s, a.dx, a.dy, a.dz}; }
template <class S>
inline Dual<S> operator-(Dual<S> a, float s) { return {a.v - s, a.dx, a.dy, a.dz}; }

// Real SH bases (Sloan's fast form, gsplat's signs) at unit direction (x, y, z).
template <class T>
__attribute__((always_inline)) inline void sh_bases(int degree, T x, T y, T z, T *b) {
    b[0] = 0.f * x + 0.2820947917738781f;
    if (degree < 1) return;
    b[1] = -0.48860251190292f * y;
    b[2] = 0.48860251190292f * z;
    b[3] = -0.48860251190292f * x;
    if (degree < 2) return;
    T z2 = z * z;
    T fTmpB = -1.092548430592079f * z;
    T fC1 = x * x - y * y;
    T fS1 = 2.f * (x * y);
    T pSH6 = 0.9461746957575601f * z2 - 0.3153915652525201f;
    b[4] = 0.5462742152960395f * fS1;
    b[5] = fTmpB * y;
    b[6] = pSH6;
    b[7] = fTmpB * x;
    b[8] = 0.5462742152960395f * fC1;
    if (degree < 3) return;
    T fTmpC = -2.285228997322329f * z2 + 0.4570457994644658f;
    T fTmpB3 = 1.445305721320277f * z;
    T fC2 = x * fC1 - y * fS1;
    T fS2 = x * fS1 + y * fC1;
    T pSH12 = z * (1.865881662950577f * z2 - 1.119528997770346f);
    b[9] = -0.5900435899266435f * fS2;
    b[10] = fTmpB3 * fS1;
    b[11] = fTmpC * y;
    b[12] = pSH12;
    b[13] = fTmpC * x;
    b[14] = fTmpB3 * fC1;
    b[15] = -0.5900435899266435f * fC2;
    if (degree < 4) return;
    T fTmpD = z * (-4.683325804901025f * z2 + 2.007139630671868f);
    T fTmpC4 = 3.31161143515146f * z2 - 0.47308734787878f;
    T fTmpB4 = -1.770130769779931f * z;
    T fC3 = x * fC2 - y * fS2;
    T fS3 = x * fS2 + y * fC2;
    b[16] = 0.6258357354491763f * fS3;
    b[17] = fTmpB4 * fS2;
    b[18] = fTmpC4 * fS1;
    b[19] = fTmpD * y;
    b[20] = 1.984313483298443f * (z * pSH12) - 1.006230589874905f * pSH6;
    b[21] = fTmpD * x;
    b[22] = fTmpC4 * fC1;
    b[23] = fTmpB4 * fC2;
    b[24] = 0.6258357354491763f * fC3;
}

inline bool visible(const int32_t *radii, int64_t idx) { return radii[2 * idx] > 0 && radii[2 * idx + 1] > 0; }

// Unit directions of a block of n <= kL Gaussians from camera c, lane-major
// (x, y, z, 1/|dir|, visible as 0/1). Culled and padding lanes get (0, 0, 1)
// and 1/|dir| = 0, so their bases are finite and everything they feed is 0.
// Returns whether any lane is visible.
struct BlockDirs {
    alignas(64) float x[kL], y[kL], z[kL], inv[kL];
    bool vis[kL];
};
inline bool block_dirs(const ShArgs &a, int64_t c, int64_t g0, int n, BlockDirs *d) {
    bool any = false;
    const float *cp = a.campos + 3 * c;
    for (int j = 0; j < kL; ++j) {
        const bool v = j < n && visible(a.radii, c * a.N + g0 + j);
        d->vis[j] = v;
        any |= v;
        if (!v) {
            d->x[j] = d->y[j] = d->inv[j] = 0.f;
            d->z[j] = 1.f;
            continue;
        }
        const float *m = a.means + 3 * (g0 + j);
        float dx = m[0] - cp[0], dy = m[1] - cp[1], dz = m[2] - cp[2];
        float inv = 1.f / std::sqrt(dx * dx + dy * dy + dz * dz);
        d->x[j] = dx * inv, d->y[j] = dy * inv, d->z[j] = dz * inv, d->inv[j] = inv;
    }
    return any;
}

}  // namespace

void sh_fwd(const ShArgs &a, float *colors) {
    const int nb = (a.degree + 1) * (a.degree + 1);
    const int64_t KK = a.K * 3;
    constexpr int64_t kChunk = 4096;  // a multiple of kL
    const int64_t per_cam = (a.N + kChunk - 1) / kChunk;
    parallel_items(a.C * per_cam, a.nthreads, [&] { return [&](int64_t item) {
        const int64_t c = item / per_cam;
        const int64_t end = std::min(a.N, (item % per_cam + 1) * kChunk);
        BlockDirs d;
        alignas(64) float co[kMaxBases * 3 * kL];
        for (int64_t g0 = item % per_cam * kChunk; g0 < end; g0 += kL) {
            const int n = static_cast<int>(std::min<int64_t>(kL, end - g0));
            float *out = colors + 3 * (c * a.N + g0);
            if (!block_dirs(a, c, g0, n, &d)) {
                std::fill(out, out + 3 * n, 0.f);
                continue;
            }
            Lane b[kMaxBases];
            sh_bases<Lane>(a.degree, load(d.x), load(d.y), load(d.z), b);
            to_lanes(a.coeffs + c * a.coeffs_cam_stride + g0 * KK, KK, n, nb * 3, co);
            for (int ch = 0; ch < 3; ++ch) {
                Lane s = Lane{};
                for (int k = 0; k < nb; ++k) s += b[k] * load(co + (k * 3 + ch) * kL);
                s = s + 0.5f;
                s = s < 0.f ? Lane{} : s;  // std::max(s, 0.f), NaN kept
                alignas(64) float sv[kL];
                store(sv, s);
                for (int j = 0; j < n; ++j) out[3 * j + ch] = d.vis[j] ? sv[j] : 0.f;
            }
        }
    }; });
}

void sh_bwd(const ShArgs &a, const float *colors, const float *v_colors, float *v_coeffs,
            float *v_means, float *v_campos) {
    const int64_t C = a.C, N = a.N, KK = a.K * 3;
    const int nb = (a.degree + 1) * (a.degree + 1);
    const bool shared = a.coeffs_cam_stride == 0;  // v_coeffs [N,K,3], else [C,N,K,3]
    constexpr int64_t kChunk = 1024;  // fixed chunks (a multiple of kL): campos sums independent of thread count
    const int64_t n_chunks = (N + kChunk - 1) / kChunk;
    std::vector<float> cam_buf(static_cast<size_t>(n_chunks) * C * 3, 0.f);
    const bool stream = static_cast<size_t>((shared ? 1 : C) * N * KK) * sizeof(float) >= kStreamBytes;
    parallel_items(n_chunks, a.nthreads, [&] { return [&](int64_t chunk) {
        // accumulate locally, write once: neighbouring chunks share cache lines
        std::vector<float> cb(C * 3, 0.f);
        BlockDirs d;
        alignas(64) float co[kMaxBases * 3 * kL], vco[kMaxBases * 3 * kL], vc[3 * kL];
        const int64_t end = std::min(N, (chunk + 1) * kChunk);
        for (int64_t g0 = chunk * kChunk; g0 < end; g0 += kL) {
            const int n = static_cast<int>(std::min<int64_t>(kL, end - g0));
            Lane vm[3] = {Lane{}, Lane{}, Lane{}};
            bool any_cam = false;
            if (shared) std::fill(vco, vco + nb * 3 * kL, 0.f);
            for (int64_t c = 0; c < C; ++c) {
                const int64_t idx0 = c * N + g0;
                if (!block_dirs(a, c, g0, n, &d)) {
                    if (!shared) std::fill(v_coeffs + idx0 * KK, v_coeffs + (idx0 + n) * KK, 0.f);
                    continue;
                }
                any_cam = true;
                // clamp at 0: gradient only where the colour is positive
                for (int ch = 0; ch < 3; ++ch)
                    for (int j = 0; j < kL; ++j) {
                        const int64_t i3 = 3 * (idx0 + j) + ch;
                        vc[ch * kL + j] = d.vis[j] && colors[i3] > 0.f ? v_colors[i3] : 0.f;
                    }
                const Lane one = Lane{} + 1.f, zero = Lane{};
                Dual<Lane> b[kMaxBases];
                sh_bases<Dual<Lane>>(a.degree, Dual<Lane>{load(d.x), one, zero, zero},
                                     Dual<Lane>{load(d.y), zero, one, zero}, Dual<Lane>{load(d.z), zero, zero, one},
                                     b);
                to_lanes(a.coeffs + c * a.coeffs_cam_stride + g0 * KK, KK, n, nb * 3, co);
                if (!shared) std::fill(vco, vco + nb * 3 * kL, 0.f);
                const Lane vc0 = load(vc), vc1 = load(vc + kL), vc2 = load(vc + 2 * kL);
                Lane vn[3] = {Lane{}, Lane{}, Lane{}};  // gradient w.r.t. the unit direction
                for (int k = 0; k < nb; ++k) {
                    float *o = vco + k * 3 * kL;
                    const float *ci = co + k * 3 * kL;
                    store(o, load(o) + b[k].v * vc0);
                    store(o + kL, load(o + kL) + b[k].v * vc1);
                    store(o + 2 * kL, load(o + 2 * kL) + b[k].v * vc2);
                    Lane w = Lane{};
                    w += load(ci) * vc0;
                    w += load(ci + kL) * vc1;
                    w += load(ci + 2 * kL) * vc2;
                    vn[0] += w * b[k].dx;
                    vn[1] += w * b[k].dy;
                    vn[2] += w * b[k].dz;
                }
                if (!shared) from_lanes(vco, nb * 3, KK, n, v_coeffs + idx0 * KK, stream);
                // through the normalisation: (I - n n^T) / |dir|
                const Lane x = load(d.x), y = load(d.y), z = load(d.z), inv = load(d.inv);
                const Lane dot = vn[0] * x + vn[1] * y + vn[2] * z;
                alignas(64) float vd[3][kL];
                store(vd[0], (vn[0] - dot * x) * inv);
                store(vd[1], (vn[1] - dot * y) * inv);
                store(vd[2], (vn[2] - dot * z) * inv);
                for (int j = 0; j < kL; ++j)
                    for (int i = 0; i < 3; ++i) {
                        if (d.vis[j])
                            cb[c * 3 + i] -= vd[i][j];
                        else
                            vd[i][j] = 0.f;  // even from non-finite coefficients of a culled Gaussian
                    }
                for (int i = 0; i < 3; ++i) vm[i] += load(vd[i]);
            }
            if (shared) {
                if (any_cam)
                    from_lanes(vco, nb * 3, KK, n, v_coeffs + g0 * KK, stream);
                else
                    std::fill(v_coeffs + g0 * KK, v_coeffs + (g0 + n) * KK, 0.f);
            }
            alignas(64) float vms[3][kL];
            for (int i = 0; i < 3; ++i) store(vms[i], vm[i]);
            for (int j = 0; j < n; ++j)
                for (int i = 0; i < 3; ++i) v_means[3 * (g0 + j) + i] = vms[i][j];
        }
        std::copy(cb.begin(), cb.end(), cam_buf.begin() + chunk * C * 3);
        stream_fence();
    }; });
    for (int64_t c = 0; c < C; ++c)
        for (int i = 0; i < 3; ++i) {
            float s = 0.f;
            for (int64_t k = 0; k < n_chunks; ++k) s += cam_buf[(static_cast<size_t>(k) * C + c) * 3 + i];
            v_campos[c * 3 + i] = s;
        }
}

}  // namespace plr
