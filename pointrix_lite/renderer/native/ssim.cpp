// SSIM with a separable Gaussian window (metrics/ssim.py is the torch
// reference), forward and backward, fused-ssim style: the forward blurs the
// five moments, evaluates the SSIM map and keeps its partial derivatives with
// respect to mu_x, E[x^2] and E[xy]; the backward blurs those three maps with
// the same (symmetric) window, which is the adjoint of the forward blur, and
// combines them with x and y.
//
// Work items are bands of rows of one plane; an item writes only its own rows
// and its own partial sum, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels.h"
#include "pool.h"

namespace plr {
namespace {

constexpr int kBand = 8;  // output rows per work item

// out[c] = sum_k g[k] * in[c + k] for c in [0, W): `in` holds W + K - 1
// values (the row with r zeros on either side).
inline void blur_row(const float *in, const float *g, int K, int W, float *out) {
    for (int c = 0; c < W; ++c) out[c] = 0.f;
    for (int k = 0; k < K; ++k) {
        const float gk = g[k];
        const float *src = in + k;
        for (int c = 0; c < W; ++c) out[c] += gk * src[c];
    }
}

// v_m[c] += g * (x, y, x^2, y^2, xy)[c]: one tap of the vertical blur of the five moments.
void accumulate_moments(const float *__restrict xs, const float *__restrict ys, float gk, int W,
                        float *__restrict v0, float *__restrict v1, float *__restrict v2,
                        float *__restrict v3, float *__restrict v4) {
    for (int c = 0; c < W; ++c) {
        const float xv = xs[c], yv = ys[c];
        v0[c] += gk * xv;
        v1[c] += gk * yv;
        v2[c] += gk * (xv * xv);
        v3[c] += gk * (yv * yv);
        v4[c] += gk * (xv * yv);
    }
}

// One row of the SSIM map from the blurred moments m[5] (mu_x, mu_y, E[x^2], E[y^2], E[xy]),
// and (kGrad) its partial derivatives w.r.t. mu_x, E[x^2], E[xy].
template <bool kGrad>
void ssim_row(float *const m[5], float C1, float C2, int W, float *__restrict s_row,
              float *__restrict g_mu, float *__restrict g_xx, float *__restrict g_xy) {
    const float *__restrict m0 = m[0], *__restrict m1 = m[1], *__restrict m2 = m[2];
    const float *__restrict m3 = m[3], *__restrict m4 = m[4];
    for (int c = 0; c < W; ++c) {
        const float mu1 = m0[c], mu2 = m1[c];
        const float mu11 = mu1 * mu1, mu22 = mu2 * mu2, mu12 = mu1 * mu2;
        const float A = 2.f * mu12 + C1;
        const float B = 2.f * (m4[c] - mu12) + C2;
        const float C = mu11 + mu22 + C1;
        const float D = (m2[c] - mu11) + (m3[c] - mu22) + C2;
        const float CD = C * D;
        const float S = (A * B) / CD;
        s_row[c] = S;
        if (kGrad) {
            // dS/dmu1 = 2/(CD) [mu2 (B - A) + mu1 S (C - D)]
            g_mu[c] = 2.f * (mu2 * (B - A) + mu1 * S * (C - D)) / CD;
            g_xx[c] = -S / D;
            g_xy[c] = 2.f * A / CD;
        }
    }
}

bool in_valid_rows(const SsimArgs &a, int row) {
    const int r = a.K / 2;
    return !a.valid || (row >= r && row < a.H - r);
}

}  // namespace

int64_t ssim_items(const SsimArgs &a) { return a.P * ((a.H + kBand - 1) / kBand); }

void ssim_fwd(const SsimArgs &a, double *partial_sums, float *d_mu, float *d_xx, float *d_xy, double *l1_sums) {
    const int H = a.H, W = a.W, K = a.K, r = K / 2;
    const int64_t bands = (H + kBand - 1) / kBand;
    parallel_items(ssim_items(a), a.nthreads, [&] {
        // five vertically blurred moment rows, each padded by r zeros per side
        auto vert = std::make_shared<std::vector<float>>(5 * (W + 2 * r), 0.f);
        auto mom = std::make_shared<std::vector<float>>(5 * W);
        auto srow = std::make_shared<std::vector<float>>(W);
        return [&a, vert, mom, srow, H, W, K, r, bands, partial_sums, d_mu, d_xx, d_xy, l1_sums](int64_t item) {
            const int64_t p = item / bands;
            const int row0 = static_cast<int>(item % bands) * kBand;
            const int row1 = std::min(H, row0 + kBand);
            const float *x = a.x + p * H * W, *y = a.y + p * H * W;
            const int stride = W + 2 * r;
            float *v[5];
            float *m[5];
            for (int i = 0; i < 5; ++i) {
                v[i] = vert->data() + i * stride + r;
                m[i] = mom->data() + i * W;
            }
            double sum = 0.0, l1 = 0.0;
            for (int row = row0; row < row1; ++row) {
                if (l1_sums) {  // the L1 term over every pixel, while its row is at hand
                    const float *xr = x + static_cast<int64_t>(row) * W, *yr = y + static_cast<int64_t>(row) * W;
                    float row_l1 = 0.f;
                    for (int c = 0; c < W; ++c) row_l1 += std::fabs(xr[c] - yr[c]);
                    l1 += row_l1;
                }
                for (int i = 0; i < 5; ++i) std::fill(v[i], v[i] + W, 0.f);
                for (int k = 0; k < K; ++k) {
                    const int src = row + k - r;
                    if (src < 0 || src >= H) continue;  // zero padding
                    accumulate_moments(x + static_cast<int64_t>(src) * W, y + static_cast<int64_t>(src) * W,
                                       a.g[k], W, v[0], v[1], v[2], v[3], v[4]);
                }
                for (int i = 0; i < 5; ++i) blur_row(v[i] - r, a.g, K, W, m[i]);
                const int64_t off = (p * H + row) * static_cast<int64_t>(W);
                float *s_row = srow->data();
                if (d_mu)
                    ssim_row<true>(m, a.C1, a.C2, W, s_row, d_mu + off, d_xx + off, d_xy + off);
                else
                    ssim_row<false>(m, a.C1, a.C2, W, s_row, nullptr, nullptr, nullptr);
                // "valid": only pixels whose whole window lies inside count (and get gradients)
                const bool row_in = in_valid_rows(a, row);
                const int c0 = row_in ? (a.valid ? r : 0) : W;
                const int c1 = row_in ? (a.valid ? W - r : W) : W;
                if (d_mu && (c0 > 0 || c1 < W)) {
                    for (float *g : {d_mu + off, d_xx + off, d_xy + off}) {
                        std::fill(g, g + c0, 0.f);
                        std::fill(g + c1, g + W, 0.f);
                    }
                }
                float row_sum = 0.f;
                for (int c = c0; c < c1; ++c) row_sum += s_row[c];
                sum += row_sum;
            }
            partial_sums[item] = sum;
            if (l1_sums) l1_sums[item] = l1;
        };
    });
}

void ssim_bwd(const SsimArgs &a, float scale, const float *d_mu, const float *d_xx,
              const float *d_xy, float *v_x, float l1_scale) {
    const int H = a.H, W = a.W, K = a.K, r = K / 2;
    const int64_t bands = (H + kBand - 1) / kBand;
    parallel_items(ssim_items(a), a.nthreads, [&] {
        auto vert = std::make_shared<std::vector<float>>(3 * (W + 2 * r), 0.f);
        auto blur = std::make_shared<std::vector<float>>(3 * W);
        return [&a, vert, blur, H, W, K, r, bands, scale, d_mu, d_xx, d_xy, v_x, l1_scale](int64_t item) {
            const int64_t p = item / bands;
            const int row0 = static_cast<int>(item % bands) * kBand;
            const int row1 = std::min(H, row0 + kBand);
            const int64_t plane = p * H * W;
            const int stride = W + 2 * r;
            float *v[3];
            float *b[3];
            for (int i = 0; i < 3; ++i) {
                v[i] = vert->data() + i * stride + r;
                b[i] = blur->data() + i * W;
            }
            const float *maps[3] = {d_mu + plane, d_xx + plane, d_xy + plane};
            for (int row = row0; row < row1; ++row) {
                for (int i = 0; i < 3; ++i) std::fill(v[i], v[i] + W, 0.f);
                for (int k = 0; k < K; ++k) {
                    const int src = row + k - r;
                    if (src < 0 || src >= H) continue;
                    const float gk = a.g[k];
                    for (int i = 0; i < 3; ++i) {
                        const float *s = maps[i] + static_cast<int64_t>(src) * W;
                        for (int c = 0; c < W; ++c) v[i][c] += gk * s[c];
                    }
                }
                for (int i = 0; i < 3; ++i) blur_row(v[i] - r, a.g, K, W, b[i]);
                const int64_t off = plane + static_cast<int64_t>(row) * W;
                const float *x = a.x + off, *y = a.y + off;
                float *out = v_x + off;
                for (int c = 0; c < W; ++c)
                    out[c] = scale * (b[0][c] + 2.f * x[c] * b[1][c] + y[c] * b[2][c]);
                if (l1_scale != 0.f)  // + l1_scale * sign(x - y), 0 where they are equal (torch's abs)
                    for (int c = 0; c < W; ++c)
                        out[c] += x[c] > y[c] ? l1_scale : (x[c] < y[c] ? -l1_scale : 0.f);
            }
        };
    });
}

}  // namespace plr
