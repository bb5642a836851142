// Plain-pointer entry points of the native rasterizer. bindings.cpp validates
// and allocates torch tensors, these functions only compute (multi-threaded
// through pool.h).
// Layouts are row-major and contiguous unless a stride is given.
#pragma once

#include <cstdint>

namespace plr {

struct ProjectArgs {
    int64_t C, N;
    const float *means;      // [N,3]
    const float *quats;      // [N,4] wxyz, unnormalised
    const float *scales;     // [N,3]
    const float *opacities;  // [N]
    const float *viewmats;   // [C,4,4]
    const float *Ks;         // [C,3,3]
    int width, height;
    float eps2d, near_plane, far_plane, radius_clip;
    bool calc_compensations;
    int nthreads;
};

// Outputs [C,N,...]; culled entries get radii 0 and zeros elsewhere.
void project_fwd(const ProjectArgs &a, int32_t *radii, float *means2d, float *depths,
                 float *conics, float *compensations /* nullable */);

// Gradients w.r.t. means/quats/scales (overwritten) and viewmats (nullable, overwritten).
void project_bwd(const ProjectArgs &a, const int32_t *radii, const float *conics,
                 const float *compensations, const float *v_means2d, const float *v_depths,
                 const float *v_conics, const float *v_compensations /* nullable */,
                 float *v_means, float *v_quats, float *v_scales, float *v_viewmats);

// A Gaussian's radius box in tiles and which of its tiles it reaches (bit
// (y - y0) * bw + (x - x0); boxes over 64 tiles are re-tested instead).
// 16 bytes, so that one cache line holds four (bin_tiles checks that tile
// counts fit 16 bits).
struct BoxHits {
    uint16_t x0, y0, bw, bh;
    uint64_t mask;
};

// Tile binning: per image, visible Gaussians in front-to-back depth order
// (ties by index), appended to every tile their radius box touches and their
// alpha can reach 1/255 in at some pixel centre (common.h Reach).
struct BinArgs {
    int64_t C, N;
    const float *means2d;    // [C,N,2]
    const int32_t *radii;    // [C,N,2]
    const float *depths;     // [C,N]
    const float *conics;     // [C,N,3]
    const float *opacities;  // [C,N], camera stride opac_cam_stride (0: shared)
    int64_t opac_cam_stride;
    struct BoxHits *boxes;   // [C*N] scratch written by bin_count, read by bin_fill
    int width, height, tile_size, tile_w, tile_h;
    int nthreads;
};
// Pass 1: per-(c,g) tile counts and their exclusive prefix sum (gauss_offsets,
// [C*N+1]); returns the number of intersections.
int64_t bin_count(const BinArgs &a, int32_t *gauss_offsets);
// Pass 2: tile_offsets [C*tiles+1], flatten_ids [n] (c*N+g) in tile-major,
// depth-sorted order, and slot_by_pos [n]: for each entry of flatten_ids, its
// index in Gaussian-major order ((c,g)'s k-th intersection is at
// gauss_offsets[c*N+g] + k). The backward writes each intersection's gradient
// row there, so the per-Gaussian sums read contiguous rows, without atomics.
void bin_fill(const BinArgs &a, const int32_t *gauss_offsets, int32_t *tile_offsets,
              int32_t *flatten_ids, int32_t *slot_by_pos);

struct RasterArgs {
    int64_t C, N;
    int D;
    const float *means2d;    // [C,N,2]
    const float *conics;     // [C,N,3]
    const float *colors;     // [C,N,D], camera stride below (0 = shared)
    int64_t colors_cam_stride;
    const float *opacities;  // [C,N], camera stride below
    int64_t opac_cam_stride;
    const float *backgrounds;  // [C,D] nullable
    int width, height, tile_size, tile_w, tile_h;
    const int32_t *tile_offsets;  // [C*tiles+1]
    const int32_t *flatten_ids;   // [n_isects]
    int nthreads;
    // element strides of the backward's incoming pixel gradients (they are
    // often expanded views, e.g. from a sum(), and copying them costs more
    // than the strided reads): colors [C,H,W,D], alphas [C,H,W,1]
    int64_t v_colors_stride[4] = {0, 0, 0, 0};
    int64_t v_alphas_stride[3] = {0, 0, 0};
};

// Returns the number of (Gaussian, pixel) evaluations performed. contrib
// [n_isects]: bit r of an intersection's entry says the Gaussian was blended
// into some pixel of the tile's row r (tile size 16, the SIMD path), so the
// backward visits only those (Gaussian, row) pairs; other tile sizes write -1.
int64_t raster_fwd(const RasterArgs &a, float *out_colors /*[C,H,W,D]*/,
                   float *out_alphas /*[C,H,W]*/, float *out_T /*[C,H,W]*/,
                   int32_t *last_ids /*[C,H,W] tile-local, -1 none*/, int32_t *contrib);

// Per-intersection gradient rows at slot_by_pos, summed per Gaussian in slot order.
// Outputs are [C,N,...] and fully overwritten; v_means2d_abs nullable.
void raster_bwd(const RasterArgs &a, const float *T_final, const int32_t *last_ids, const int32_t *contrib,
                const float *v_colors_px /*[C,H,W,D] strided*/, const float *v_alphas_px /*[C,H,W,1] strided*/,
                const int32_t *gauss_offsets, const int32_t *slot_by_pos,
                float *v_means2d, float *v_conics, float *v_colors, float *v_opacities,
                float *v_means2d_abs);

struct ShArgs {
    int64_t C, N;
    int K, degree;
    const float *means;   // [N,3]
    const float *campos;  // [C,3]
    const float *coeffs;  // [C,N,K,3], camera stride below (0 = shared [N,K,3])
    int64_t coeffs_cam_stride;
    const int32_t *radii;  // [C,N,2]: culled entries are skipped
    int nthreads;
};

// colors [C,N,3] = max(SH(normalize(mean - campos)) + 0.5, 0); culled -> 0.
void sh_fwd(const ShArgs &a, float *colors);
// v_coeffs [N,K,3] (shared) or [C,N,K,3]; v_means [N,3]; v_campos [C,3]; all overwritten.
void sh_bwd(const ShArgs &a, const float *colors, const float *v_colors, float *v_coeffs,
            float *v_means, float *v_campos);

// ---- MCMC position noise (mcmc_noise.cpp) ------------------------------------
struct NoiseArgs {
    int64_t N;
    float *means;             // [N,3], updated in place
    const float *quats;       // [N,4] raw (wxyz), normalised here
    const float *log_scales;  // [N,3]
    const float *logits;      // [N] opacity logits
    const float *eps;         // [N,3] standard normal
    float scaler;
    int nthreads;
};
// means += Sigma (eps * sigmoid(100 (1 - sigmoid(logit) - 0.995)) * scaler), Sigma = R S S^T R^T.
void add_position_noise(const NoiseArgs &a);

// ---- SSIM loss (ssim.cpp) ----------------------------------------------------
struct SsimArgs {
    int64_t P;            // planes (batch x channels)
    int H, W, K;          // plane size, window taps (odd)
    const float *x, *y;   // [P,H,W]
    const float *g;       // [K] normalised 1-D Gaussian taps
    float C1, C2;
    bool valid;           // true: only pixels whose window fits count (else zero padding)
    int nthreads;
    int out_channels = 0;  // ssim_bwd's v_x: 0 planes [P,H,W]; C: channels last [P/C,H,W,C]
    // Training mask [P/mask_channels,H,W] (nullable; 0 = ignore the pixel): x and y must be zero
    // there (to_planes' mask), the map and its gradient then run over the kept pixels only.
    const uint8_t *mask = nullptr;
    int mask_channels = 1;  // planes per mask image (the images' channels)
};
// Number of work items (size of ssim_fwd's partial_sums).
int64_t ssim_items(const SsimArgs &a);
// The number of SSIM-map values the mean is over (map_count: those inside "valid") and of
// L1 values (all_count): every one, or with a mask the kept ones.
void ssim_counts(const SsimArgs &a, int64_t *map_count, int64_t *all_count);
// partial_sums [ssim_items]: SSIM-map sums per item (the map's mean is their
// sum / count); d_mu, d_xx, d_xy [P,H,W] (nullable together): the map's
// partial derivatives w.r.t. the blurred mu_x, E[x^2], E[xy] (0 outside valid);
// l1_sums [ssim_items] (nullable): sums of |x - y| over each item's pixels (all
// of them, valid or not), the loss's L1 term read in the same pass.
void ssim_fwd(const SsimArgs &a, double *partial_sums, float *d_mu, float *d_xx, float *d_xy,
              double *l1_sums = nullptr);
// v_x [P,H,W] (or [P/C,H,W,C], a.out_channels) = scale * d(sum of the map)/dx + l1_scale * sign(x - y).
void ssim_bwd(const SsimArgs &a, float scale, const float *d_mu, const float *d_xx,
              const float *d_xy, float *v_x, float l1_scale = 0.f);

// [B,H,W,C] (element strides st) -> the SSIM kernels' planes dst [B*C,H,W]:
// float32 as it is, uint8 as value / 255 (View.float_image's numbers); 0 where
// mask [B,H,W] (nullable) is 0.
template <class T>
void to_planes(const T *src, const int64_t st[4], int B, int H, int W, int C, float *dst, int nthreads,
               const uint8_t *mask = nullptr);

}  // namespace plr
