// SSIM with a separable Gaussian window (metrics/ssim.py is the torch
// reference), forward and backward, fused-ssim style: the forward blurs the
// five moments, evaluates the SSIM map and keeps its partial derivatives with
// respect to mu_x, E[x^2] and E[xy]; the backward blurs those three maps with
// the same (symmetric) window, which is the adjoint of the forward blur, and
// combines them with x and y.
//
// Work items are bands of rows of one plane (forward) or of one image's planes
// (backward); an item writes only its own rows and its own partial sums, so
// results do not depend on the thread count.
//
// Both blurs keep a block of 16 columns' sums in registers over all K taps and
// store them once: adding each tap into a row in memory made the passes
// store-bound (K stores per output value). Each value is still summed tap by
// tap in k order from 0.
//
// A training mask (SsimArgs::mask, 0 = ignore the pixel) reproduces model/loss.py's
// masked SSIM: to_planes zeroes both images under it (like the zero padding past
// the border), the forward drops those pixels' map values and partial
// derivatives (so the sum and the gradient run over kept pixels only), and the
// backward zeroes their gradient (the zeroed input has no slope there).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels.h"
#include "pool.h"
#include "simd.h"

namespace plr {
namespace {

constexpr int kBand = 8;  // output rows per work item

#ifdef PLR_HAVE_VEC
constexpr int kBlock = kLanes;  // columns summed in registers at a time
#else
constexpr int kBlock = 1;
#endif

// out[c] = sum_k g[k] * in[c + k] for c in [0, W): `in` holds W + K - 1
// values (the row with r zeros on either side).
inline void blur_row(const float *in, const float *g, int K, int W, float *out) {
    int c0 = 0;
#ifdef PLR_HAVE_VEC
    for (; c0 + 2 * kLanes <= W; c0 += 2 * kLanes) {  // two blocks: independent sums in flight
        vf a0{}, a1{};
        for (int k = 0; k < K; ++k) {
            const vf gk = splat(g[k]);
            a0 = a0 + gk * load16(in + c0 + k);
            a1 = a1 + gk * load16(in + c0 + k + kLanes);
        }
        store16(out + c0, a0);
        store16(out + c0 + kLanes, a1);
    }
#endif
    for (; c0 < W; ++c0) {
        float acc = 0.f;
        for (int k = 0; k < K; ++k) acc += g[k] * in[c0 + k];
        out[c0] = acc;
    }
}

// The taps [k0, k1) of the vertical window at output row `row` that fall
// inside the plane (the others meet zero padding).
inline void tap_range(int row, int K, int H, int *k0, int *k1) {
    const int r = K / 2;
    *k0 = std::max(0, r - row);
    *k1 = std::min(K, H + r - row);
}

#ifdef PLR_HAVE_VEC
PLR_INLINE void load_at(const float *p, vf *out) { *out = load16(p); }
#endif
PLR_INLINE void load_at(const float *p, float *out) { *out = *p; }

// v[0..M)[0, W) = the vertical blur at output row `row` of M values per pixel:
// values(off, val) fills val[M] (floats, or 16-lane vectors of columns off..off+15)
// for the pixel at flat offset off of a plane row.
template <int M, class Values>
inline void blur_rows(const float *g, int K, int H, int W, int row, float *const v[M], Values &&values) {
    int k0, k1;
    tap_range(row, K, H, &k0, &k1);
    const int r = K / 2;
    auto columns = [&](int c0, auto zero) {  // the sums of one block of columns (a float or a vector's)
        decltype(zero) acc[M], val[M];
        for (int i = 0; i < M; ++i) acc[i] = zero;
        for (int k = k0; k < k1; ++k) {
            values(static_cast<int64_t>(row + k - r) * W + c0, val);
            const decltype(zero) gk = g[k];
            for (int i = 0; i < M; ++i) acc[i] = acc[i] + gk * val[i];
        }
        for (int i = 0; i < M; ++i) std::memcpy(v[i] + c0, &acc[i], sizeof(acc[i]));
    };
    int c0 = 0;
#ifdef PLR_HAVE_VEC
    for (; c0 + kLanes <= W; c0 += kLanes) columns(c0, vf{});
#endif
    for (; c0 < W; ++c0) columns(c0, 0.f);
}

// The five moments x, y, x^2, y^2, xy of planes x, y [H, W], blurred vertically at output row `row`.
inline void blur_moments(const float *x, const float *y, const float *g, int K, int H, int W, int row,
                         float *const v[5]) {
    blur_rows<5>(g, K, H, W, row, v, [&](int64_t off, auto *val) {
        load_at(x + off, &val[0]);
        load_at(y + off, &val[1]);
        val[2] = val[0] * val[0];
        val[3] = val[1] * val[1];
        val[4] = val[0] * val[1];
    });
}

// The three maps m[0..3) [H, W], blurred vertically at output row `row`.
inline void blur_maps(const float *const m[3], const float *g, int K, int H, int W, int row, float *const v[3]) {
    blur_rows<3>(g, K, H, W, row, v, [&](int64_t off, auto *val) {
        for (int i = 0; i < 3; ++i) load_at(m[i] + off, &val[i]);
    });
}

// The sum of value(c) over c in [c0, c1), in kBlock partial sums: a single
// running sum is one serial add per pixel.
template <class Value>
inline float partial_sum(int c0, int c1, Value &&value) {
    float part[kBlock] = {};
    int c = c0;
    for (; c + kBlock <= c1; c += kBlock)
        for (int j = 0; j < kBlock; ++j) part[j] += value(c + j);
    float s = 0.f;
    for (; c < c1; ++c) s += value(c);
    for (int j = 0; j < kBlock; ++j) s += part[j];
    return s;
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

// Row `row` of the mask of plane p (nonzero keeps a pixel), or nullptr without a mask.
inline const uint8_t *keep_row(const SsimArgs &a, int64_t p, int row) {
    if (!a.mask) return nullptr;
    return a.mask + (p / a.mask_channels * a.H + row) * static_cast<int64_t>(a.W);
}

// v[c] = 0 where keep[c] is 0 (a select with an unconditional store: the compiler vectorises it).
inline void zero_ignored(const uint8_t *__restrict keep, int W, float *__restrict v) {
    for (int c = 0; c < W; ++c) v[c] = keep[c] ? v[c] : 0.f;
}

// An ignored pixel adds nothing: its map value and (d_mu non-null) partial derivatives become 0.
inline void drop_ignored(const uint8_t *keep, int W, float *s_row, float *d_mu, float *d_xx, float *d_xy) {
    zero_ignored(keep, W, s_row);
    if (d_mu)
        for (float *d : {d_mu, d_xx, d_xy}) zero_ignored(keep, W, d);
}

}  // namespace

int64_t ssim_items(const SsimArgs &a) { return a.P * ((a.H + kBand - 1) / kBand); }

void ssim_counts(const SsimArgs &a, int64_t *map_count, int64_t *all_count) {
    const int r = a.K / 2;
    const int64_t inner = a.valid ? static_cast<int64_t>(a.H - 2 * r) * (a.W - 2 * r) : static_cast<int64_t>(a.H) * a.W;
    if (!a.mask) {
        *map_count = a.P * inner;
        *all_count = a.P * a.H * static_cast<int64_t>(a.W);
        return;
    }
    // One pass over the mask on the caller's thread: waking threads would cost more than the count
    // (torch's mask.sum() did: its OpenMP workers then spun through the kernels that followed).
    auto kept = [](const uint8_t *keep, int c0, int c1) {
        int64_t n = 0;
        for (int c = c0; c < c1; ++c) n += keep[c] != 0;
        return n;
    };
    int64_t map = 0, all = 0;
    for (int64_t p = 0; p < a.P; p += a.mask_channels)  // one plane per mask image, times its channels below
        for (int row = 0; row < a.H; ++row) {
            const uint8_t *keep = keep_row(a, p, row);
            const int64_t n = kept(keep, 0, a.W);
            all += n;
            if (in_valid_rows(a, row)) map += a.valid ? kept(keep, r, a.W - r) : n;
        }
    *map_count = map * a.mask_channels;
    *all_count = all * a.mask_channels;
}

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
                if (l1_sums)  // the L1 term over every pixel, while its row is at hand
                    l1 += partial_sum(0, W, [xr = x + static_cast<int64_t>(row) * W, yr = y + static_cast<int64_t>(row) * W](int c) {
                        return std::fabs(xr[c] - yr[c]);
                    });
                blur_moments(x, y, a.g, K, H, W, row, v);
                for (int i = 0; i < 5; ++i) blur_row(v[i] - r, a.g, K, W, m[i]);
                const int64_t off = (p * H + row) * static_cast<int64_t>(W);
                float *s_row = srow->data();
                if (d_mu)
                    ssim_row<true>(m, a.C1, a.C2, W, s_row, d_mu + off, d_xx + off, d_xy + off);
                else
                    ssim_row<false>(m, a.C1, a.C2, W, s_row, nullptr, nullptr, nullptr);
                if (const uint8_t *keep = keep_row(a, p, row))
                    drop_ignored(keep, W, s_row, d_mu ? d_mu + off : nullptr, d_xx ? d_xx + off : nullptr,
                                 d_xy ? d_xy + off : nullptr);
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
                sum += partial_sum(c0, c1, [s_row](int c) { return s_row[c]; });
            }
            partial_sums[item] = sum;
            if (l1_sums) l1_sums[item] = l1;
        };
    });
}

void ssim_bwd(const SsimArgs &a, float scale, const float *d_mu, const float *d_xx,
              const float *d_xy, float *v_x, float l1_scale) {
    const int H = a.H, W = a.W, K = a.K, r = K / 2;
    // items are bands of one image's C planes, so a channels-last row is written whole by one thread
    const int C = a.out_channels ? a.out_channels : 1;
    const int64_t bands = (H + kBand - 1) / kBand;
    parallel_items(a.P / C * bands, a.nthreads, [&] {
        auto vert = std::make_shared<std::vector<float>>(3 * (W + 2 * r), 0.f);
        auto blur = std::make_shared<std::vector<float>>(3 * W);
        auto rows = std::make_shared<std::vector<float>>(static_cast<size_t>(C) * W);
        return [&a, vert, blur, rows, H, W, K, r, C, bands, scale, d_mu, d_xx, d_xy, v_x, l1_scale](int64_t item) {
            const int64_t img = item / bands;
            const int row0 = static_cast<int>(item % bands) * kBand;
            const int row1 = std::min(H, row0 + kBand);
            const int stride = W + 2 * r;
            float *v[3];
            float *b[3];
            for (int i = 0; i < 3; ++i) {
                v[i] = vert->data() + i * stride + r;
                b[i] = blur->data() + i * W;
            }
            for (int row = row0; row < row1; ++row) {
                for (int ch = 0; ch < C; ++ch) {
                    const int64_t plane = (img * C + ch) * H * W;
                    const float *maps[3] = {d_mu + plane, d_xx + plane, d_xy + plane};
                    blur_maps(maps, a.g, K, H, W, row, v);
                    for (int i = 0; i < 3; ++i) blur_row(v[i] - r, a.g, K, W, b[i]);
                    const int64_t off = plane + static_cast<int64_t>(row) * W;
                    const float *x = a.x + off, *y = a.y + off;
                    float *out = a.out_channels ? rows->data() + ch * W : v_x + off;
                    for (int c = 0; c < W; ++c) {
                        float o = scale * (b[0][c] + 2.f * x[c] * b[1][c] + y[c] * b[2][c]);
                        if (l1_scale != 0.f)  // + l1_scale * sign(x - y), 0 where they are equal (torch's abs)
                            o += x[c] > y[c] ? l1_scale : (x[c] < y[c] ? -l1_scale : 0.f);
                        out[c] = o;
                    }
                    if (const uint8_t *keep = keep_row(a, img * C + ch, row)) zero_ignored(keep, W, out);  // no slope there
                }
                if (a.out_channels) {  // the image's row, channels last [H, W, C]
                    float *dst = v_x + (img * H + row) * static_cast<int64_t>(W) * C;
                    const float *src = rows->data();
                    if (C == 3)
                        for (int c = 0; c < W; ++c)
                            dst[3 * c] = src[c], dst[3 * c + 1] = src[W + c], dst[3 * c + 2] = src[2 * W + c];
                    else
                        for (int c = 0; c < W; ++c)
                            for (int ch = 0; ch < C; ++ch) dst[c * C + ch] = src[ch * W + c];
                }
            }
        };
    });
}

template <class T>
void to_planes(const T *src, const int64_t st[4], int B, int H, int W, int C, float *dst, int nthreads,
               const uint8_t *mask) {
    parallel_chunks(static_cast<int64_t>(B) * H, 16, nthreads, [&](int64_t begin, int64_t end) {
        for (int64_t bh = begin; bh < end; ++bh) {
            const int64_t b = bh / H, h = bh % H;
            const T *row = src + b * st[0] + h * st[1];
            float *out = dst + (b * C * H + h) * static_cast<int64_t>(W);  // channel c: + c * H * W
            const int64_t plane = static_cast<int64_t>(H) * W;
            // uint8 images hold value * 255: the same float division View.float_image makes
            auto conv = [](T v) { return std::is_same<T, uint8_t>::value ? static_cast<float>(v) / 255.f : static_cast<float>(v); };
            if (C == 3 && st[2] == 3 && st[3] == 1) {  // packed RGB: three streams the compiler vectorises
                for (int w = 0; w < W; ++w) {
                    out[w] = conv(row[3 * w]);
                    out[plane + w] = conv(row[3 * w + 1]);
                    out[2 * plane + w] = conv(row[3 * w + 2]);
                }
            } else {
                for (int w = 0; w < W; ++w)
                    for (int c = 0; c < C; ++c) out[c * plane + w] = conv(row[w * st[2] + c * st[3]]);
            }
            if (mask)  // ignored pixels are 0 in every channel, as torch.where(mask, img, 0)
                for (int c = 0; c < C; ++c) zero_ignored(mask + bh * static_cast<int64_t>(W), W, out + c * plane);
        }
    });
}
template void to_planes<float>(const float *, const int64_t[4], int, int, int, int, float *, int, const uint8_t *);
template void to_planes<uint8_t>(const uint8_t *, const int64_t[4], int, int, int, int, float *, int,
                                 const uint8_t *);

}  // namespace plr
