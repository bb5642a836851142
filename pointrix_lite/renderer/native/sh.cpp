// Spherical-harmonics colours max(SH(dir) + 0.5, 0), dir = mean - camera
// centre (gsplat SphericalHarmonicsCUDA.cu bases, degrees 0..4), forward and
// backward. The basis derivatives come from evaluating the same polynomial
// code on dual numbers, so there is no second hand-derived formula to drift.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels.h"
#include "pool.h"

namespace plr {
namespace {

// Value plus partial derivatives w.r.t. the unit direction's x, y, z.
struct Dual {
    float v, dx, dy, dz;
};
inline Dual operator+(Dual a, Dual b) { return {a.v + b.v, a.dx + b.dx, a.dy + b.dy, a.dz + b.dz}; }
inline Dual operator-(Dual a, Dual b) { return {a.v - b.v, a.dx - b.dx, a.dy - b.dy, a.dz - b.dz}; }
inline Dual operator*(Dual a, Dual b) {
    return {a.v * b.v, a.dx * b.v + a.v * b.dx, a.dy * b.v + a.v * b.dy, a.dz * b.v + a.v * b.dz};
}
inline Dual operator*(float s, Dual a) { return {s * a.v, s * a.dx, s * a.dy, s * a.dz}; }
inline Dual operator+(Dual a, float s) { return {a.v + s, a.dx, a.dy, a.dz}; }
inline Dual operator-(Dual a, float s) { return {a.v - s, a.dx, a.dy, a.dz}; }
inline float value(float f) { return f; }
inline float value(const Dual &d) { return d.v; }

// Real SH bases (Sloan's fast form, gsplat's signs) at unit direction (x, y, z).
template <class T>
void sh_bases(int degree, T x, T y, T z, T *b) {
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

struct Dir {
    float x, y, z, inv_norm;
};

inline Dir unit_dir(const float *mean, const float *campos) {
    float dx = mean[0] - campos[0], dy = mean[1] - campos[1], dz = mean[2] - campos[2];
    float inv = 1.f / std::sqrt(dx * dx + dy * dy + dz * dz);
    return {dx * inv, dy * inv, dz * inv, inv};
}

inline bool visible(const int32_t *radii, int64_t idx) { return radii[2 * idx] > 0 && radii[2 * idx + 1] > 0; }

}  // namespace

void sh_fwd(const ShArgs &a, float *colors) {
    const int64_t total = a.C * a.N;
    const int nb = (a.degree + 1) * (a.degree + 1);
    parallel_chunks(total, 4096, a.nthreads, [&](int64_t begin, int64_t end) {
    for (int64_t idx = begin; idx < end; ++idx) {
        const int64_t c = idx / a.N, g = idx % a.N;
        float *out = colors + 3 * idx;
        if (!visible(a.radii, idx)) {
            out[0] = out[1] = out[2] = 0.f;
            continue;
        }
        Dir d = unit_dir(a.means + 3 * g, a.campos + 3 * c);
        float b[25];
        sh_bases<float>(a.degree, d.x, d.y, d.z, b);
        const float *co = a.coeffs + c * a.coeffs_cam_stride + g * a.K * 3;
        for (int ch = 0; ch < 3; ++ch) {
            float s = 0.f;
            for (int k = 0; k < nb; ++k) s += b[k] * co[k * 3 + ch];
            out[ch] = std::max(s + 0.5f, 0.f);
        }
    }
    });
}

void sh_bwd(const ShArgs &a, const float *colors, const float *v_colors, float *v_coeffs,
            float *v_means, float *v_campos) {
    const int64_t C = a.C, N = a.N;
    const int nb = (a.degree + 1) * (a.degree + 1);
    const bool shared = a.coeffs_cam_stride == 0;  // v_coeffs [N,K,3], else [C,N,K,3]
    constexpr int64_t kChunk = 1024;  // fixed chunks: campos sums independent of thread count
    const int64_t n_chunks = (N + kChunk - 1) / kChunk;
    std::vector<float> cam_buf(static_cast<size_t>(n_chunks) * C * 3, 0.f);
    parallel_items(n_chunks, a.nthreads, [&] { return [&](int64_t chunk) {
        // accumulate locally, write once: neighbouring chunks share cache lines
        std::vector<float> cb(C * 3, 0.f);
        for (int64_t g = chunk * kChunk; g < std::min(N, (chunk + 1) * kChunk); ++g) {
            float vm[3] = {0.f, 0.f, 0.f};
            if (shared) std::fill(v_coeffs + g * a.K * 3, v_coeffs + (g + 1) * a.K * 3, 0.f);
            for (int64_t c = 0; c < C; ++c) {
                const int64_t idx = c * N + g;
                float *vco = v_coeffs + (shared ? g : idx) * a.K * 3;
                if (!shared) std::fill(vco, vco + a.K * 3, 0.f);
                if (!visible(a.radii, idx)) continue;
                // clamp at 0: gradient only where the colour is positive
                float vc[3];
                for (int ch = 0; ch < 3; ++ch) vc[ch] = colors[3 * idx + ch] > 0.f ? v_colors[3 * idx + ch] : 0.f;
                Dir d = unit_dir(a.means + 3 * g, a.campos + 3 * c);
                Dual b[25];
                sh_bases<Dual>(a.degree, Dual{d.x, 1.f, 0.f, 0.f}, Dual{d.y, 0.f, 1.f, 0.f},
                               Dual{d.z, 0.f, 0.f, 1.f}, b);
                const float *co = a.coeffs + c * a.coeffs_cam_stride + g * a.K * 3;
                float vn[3] = {0.f, 0.f, 0.f};  // gradient w.r.t. the unit direction
                for (int k = 0; k < nb; ++k) {
                    float w = 0.f;
                    for (int ch = 0; ch < 3; ++ch) {
                        vco[k * 3 + ch] += b[k].v * vc[ch];
                        w += co[k * 3 + ch] * vc[ch];
                    }
                    vn[0] += w * b[k].dx;
                    vn[1] += w * b[k].dy;
                    vn[2] += w * b[k].dz;
                }
                // through the normalisation: (I - n n^T) / |dir|
                float dot = vn[0] * d.x + vn[1] * d.y + vn[2] * d.z;
                float vd[3] = {(vn[0] - dot * d.x) * d.inv_norm, (vn[1] - dot * d.y) * d.inv_norm,
                               (vn[2] - dot * d.z) * d.inv_norm};
                for (int i = 0; i < 3; ++i) {
                    vm[i] += vd[i];
                    cb[c * 3 + i] -= vd[i];
                }
            }
            for (int i = 0; i < 3; ++i) v_means[3 * g + i] = vm[i];
        }
        std::copy(cb.begin(), cb.end(), cam_buf.begin() + chunk * C * 3);
    }; });
    for (int64_t c = 0; c < C; ++c)
        for (int i = 0; i < 3; ++i) {
            float s = 0.f;
            for (int64_t k = 0; k < n_chunks; ++k) s += cam_buf[(static_cast<size_t>(k) * C + c) * 3 + i];
            v_campos[c * 3 + i] = s;
        }
}

}  // namespace plr
