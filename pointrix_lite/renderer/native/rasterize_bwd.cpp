// Backward of the alpha compositing (gsplat RasterizeToPixels3DGSBwd.cu):
// each pixel walks its Gaussians back to front from the forward's last index,
// recovering T by dividing by (1 - alpha) from the saved final T. Threads own
// tiles and write one gradient row per intersection that blended somewhere, at
// its Gaussian-major slot (binning's slot_by_pos), and mark the slot; a second
// pass sums each Gaussian's marked rows, contiguous, in a fixed order, so there
// are no atomics and results do not depend on the thread count. (Rows in tile
// order made that pass gather them from all over memory, which cost more than
// an eighth of the backward; zero rows for the pairs that blended nowhere cost
// a scattered 36-byte write each, the marks one byte in a small array.)
#include <cmath>
#include <vector>

#include "simd.h"
#include "tile.h"

namespace plr {
namespace {

// Per-intersection gradient row: [v_x, v_y, v_conic(3), v_opacity, v_color(D), |v_x|, |v_y|]
constexpr int kXY = 0, kConic = 2, kOpac = 5, kColor = 6;

// Any tile size (and the PLR_SCALAR build): plain per-pixel code.
template <int TS_, int D_>
struct BwdWorker {
    const RasterArgs &a;
    const Packed *packed;
    const float *T_final, *v_px, *va_px;
    const int32_t *last_ids, *slots;
    float *rows;       // [n_isects, K], Gaussian-major
    uint8_t *written;  // [n_isects]: 1 where the slot's row was written
    const int K;
    const bool absgrad;
    const int TS = TS_ ? TS_ : a.tile_size;
    const int D = D_ ? D_ : a.D;
    std::vector<GaussRec> recs;
    std::vector<float> cols, T, buf, vc, tfa, lane;
    std::vector<int32_t> last, row_max;

    BwdWorker(const RasterArgs &a_, const Packed *pk, const float *tf, const float *vp, const float *vap,
              const int32_t *li, const int32_t *sl, float *rw, uint8_t *wr, int k, bool ag)
        : a(a_), packed(pk), T_final(tf), v_px(vp), va_px(vap), last_ids(li), slots(sl), rows(rw), written(wr), K(k),
          absgrad(ag),
          T(TS * TS), buf(static_cast<size_t>(D) * TS * TS), vc(static_cast<size_t>(D) * TS * TS),
          tfa(TS * TS), lane(static_cast<size_t>(8 + D) * TS), last(TS * TS), row_max(TS) {}

    void operator()(int64_t t) {
        // locals, so the compiler sees compile-time D / TS when specialised
        const int D = D_ ? D_ : a.D;
        const TileInfo ti = tile_info(a, t);
        const int64_t n = ti.end - ti.begin;
        if (n == 0) return;
        const int32_t *sl = slots + ti.begin;
        if (ti.w <= 0 || ti.h <= 0) return;
        const int TS = TS_ ? TS_ : a.tile_size;
        const int P = TS * TS;
        const float *bg = a.backgrounds ? a.backgrounds + ti.cam * D : nullptr;
        int max_last = -1;
        for (int r = 0; r < TS; ++r) {
            row_max[r] = -1;
            for (int j = 0; j < TS; ++j) {
                const int p = r * TS + j;
                const bool in = r < ti.h && j < ti.w;
                const int64_t pix = (ti.cam * a.height + ti.y0 + r) * a.width + ti.x0 + j;
                const int64_t *cs = a.v_colors_stride, *as = a.v_alphas_stride;
                const int64_t vpix = ti.cam * cs[0] + (ti.y0 + r) * cs[1] + (ti.x0 + j) * cs[2];
                const int64_t apix = ti.cam * as[0] + (ti.y0 + r) * as[1] + (ti.x0 + j) * as[2];
                last[p] = in ? last_ids[pix] : -1;
                T[p] = in ? T_final[pix] : 0.f;
                float bgdot = 0.f;
                for (int k = 0; k < D; ++k) {
                    const float v = in ? v_px[vpix + k * cs[3]] : 0.f;
                    vc[static_cast<size_t>(k) * P + p] = v;
                    buf[static_cast<size_t>(k) * P + p] = 0.f;
                    if (bg) bgdot += bg[k] * v;
                }
                // d(out)/d(alpha_i) terms through the final T: alpha channel
                // and background, both scale as T_final / (1 - alpha_i)
                tfa[p] = in ? T[p] * (va_px[apix] - bgdot) : 0.f;
                row_max[r] = std::max(row_max[r], last[p]);
            }
            max_last = std::max(max_last, row_max[r]);
        }
        if (max_last < 0) return;
        gather_tile(a, packed, ti, recs, cols, Spans::kScalar);
        float px[TS_ ? TS_ : 1];
        std::vector<float> px_dyn(TS_ ? 0 : TS);
        float *pxs = TS_ ? px : px_dyn.data();
        for (int j = 0; j < TS; ++j) pxs[j] = static_cast<float>(ti.x0 + j) + 0.5f;

        float *gx = lane.data(), *gy = gx + TS, *gca = gy + TS, *gcb = gca + TS, *gcc = gcb + TS,
              *go = gcc + TS, *gax = go + TS, *gay = gax + TS, *gcol = gay + TS;
        for (int64_t i = max_last; i >= 0; --i) {
            const GaussRec g = recs[i];
            if (g.lo > g.hi) continue;
            const float *col = cols.data() + i * D;
            std::fill(lane.begin(), lane.end(), 0.f);
            bool touched = false;
            const int32_t ii = static_cast<int32_t>(i);
            for (int r = g.lo; r <= g.hi; ++r) {
                if (row_max[r] < ii) continue;
                touched = true;
                const float dy = g.y - (static_cast<float>(ti.y0 + r) + 0.5f);
                float *Tr = T.data() + r * TS;
                const int32_t *lr = last.data() + r * TS;
                const float *tf = tfa.data() + r * TS;
                for (int j = 0; j < TS; ++j) {
                    const float dx = g.x - pxs[j];
                    const float sigma = gauss_sigma(g.a, g.b, g.c, dx, dy);
                    const float vis = exp_minus(sigma);
                    const float alpha = std::min(kMaxAlpha, g.o * vis);
                    const bool valid = lr[j] >= ii && sigma >= 0.f && alpha >= kAlphaThreshold;
                    const float ra = 1.f / (1.f - alpha);
                    const float Tn = Tr[j] * ra;
                    const float fac = alpha * Tn;
                    float v_alpha = tf[j] * ra;
                    for (int k = 0; k < D; ++k) {
                        const size_t p = static_cast<size_t>(k) * P + r * TS + j;
                        v_alpha += (col[k] * Tn - buf[p] * ra) * vc[p];
                        gcol[k * TS + j] += valid ? fac * vc[p] : 0.f;
                        buf[p] = valid ? buf[p] + col[k] * fac : buf[p];
                    }
                    // alpha is clamped at 0.999: no gradient through the clamp
                    const bool inner = valid && g.o * vis <= kMaxAlpha;
                    const float v_sigma = inner ? -g.o * vis * v_alpha : 0.f;
                    const float vx = v_sigma * (g.a * dx + g.b * dy);
                    const float vy = v_sigma * (g.b * dx + g.c * dy);
                    gx[j] += vx;
                    gy[j] += vy;
                    gax[j] += std::fabs(vx);
                    gay[j] += std::fabs(vy);
                    gca[j] += 0.5f * v_sigma * dx * dx;
                    gcb[j] += v_sigma * dx * dy;
                    gcc[j] += 0.5f * v_sigma * dy * dy;
                    go[j] += inner ? vis * v_alpha : 0.f;
                    Tr[j] = valid ? Tn : Tr[j];
                }
            }
            if (!touched) continue;
            written[sl[i]] = 1;
            float *o = rows + static_cast<int64_t>(sl[i]) * K;
            auto hsum = [&](const float *v) {
                float s = 0.f;
                for (int j = 0; j < TS; ++j) s += v[j];
                return s;
            };
            o[kXY] = hsum(gx);
            o[kXY + 1] = hsum(gy);
            o[kConic] = hsum(gca);
            o[kConic + 1] = hsum(gcb);
            o[kConic + 2] = hsum(gcc);
            o[kOpac] = hsum(go);
            for (int k = 0; k < D; ++k) o[kColor + k] = hsum(gcol + k * TS);
            if (absgrad) {
                o[kColor + D] = hsum(gax);
                o[kColor + D + 1] = hsum(gay);
            }
        }
    }
};

#ifdef PLR_HAVE_VEC
// Tile size 16, as the forward's 4x4-pixel blocks (TileBlocks). Gaussian-outer,
// so each Gaussian's gradient stays in registers over its blocks and is
// reduced once per (Gaussian, tile); only the blocks where the forward blended
// it (its contribution mask) are visited.
//
// The per-pixel sums are refactored so a visit costs ~60 vector operations
// instead of ~85 (these machines run the loop at their floating-point
// throughput, so operations are time). With v_c the pixel's colour gradient,
// col the Gaussian's colour and S_c the colour blended behind it:
//   v_alpha = Tn sum_c col_c v_c + ra (T_final v_a' - sum_c S_c v_c)
// keeps one running U = T_final v_a' - sum_c S_c v_c per pixel instead of D
// sums S_c (U -= fac sum_c col_c v_c). And the conic and mean gradients are
// linear in the Gaussian's a, b, c, so the loop sums v_sigma dx, v_sigma dy and
// their products with dx, dy, and the row applies a, b, c once:
//   v_x = sum v_sigma (a dx + b dy) = a sum v_sigma dx + b sum v_sigma dy.
// Same terms, summed in another order (float rounding moves, nothing else).
template <int D_, bool kAbs>
struct BwdWorkerVec {
    const RasterArgs &a;
    const Packed *packed;
    const float *T_final, *v_px, *va_px;
    const int32_t *last_ids, *contrib, *slots;
    float *rows;       // [n_isects, K], Gaussian-major
    uint8_t *written;  // [n_isects]: 1 where the slot's row was written
    const int K;
    const int D = D_ ? D_ : a.D;
    std::vector<vf> T, U, vc;
    std::vector<nf> gcol_dyn;  // colour gradient sums when D is not a compile-time constant
    std::vector<vi> last;

    BwdWorkerVec(const RasterArgs &a_, const Packed *pk, const float *tf, const float *vp, const float *vap,
                 const int32_t *li, const int32_t *cm, const int32_t *sl, float *rw, uint8_t *wr, int k)
        : a(a_), packed(pk), T_final(tf), v_px(vp), va_px(vap), last_ids(li), contrib(cm), slots(sl), rows(rw),
          written(wr), K(k), T(kLanes), U(kLanes), vc(static_cast<size_t>(D) * kLanes), gcol_dyn(D_ ? 0 : D),
          last(kLanes) {}

    void operator()(int64_t t) {
        // a local, so the compiler sees a compile-time D when specialised
        const int D = D_ ? D_ : a.D;
        const TileInfo ti = tile_info(a, t);
        const int64_t n = ti.end - ti.begin;
        if (n == 0) return;
        const int32_t *sl = slots + ti.begin;
        const int32_t *cm = contrib + ti.begin;
        if (ti.w <= 0 || ti.h <= 0) return;
        const TileBlocks tb(ti);
        const float *bg = a.backgrounds ? a.backgrounds + ti.cam * D : nullptr;
        const int64_t *cs = a.v_colors_stride, *as = a.v_alphas_stride;
        // The loops below read the tile's pixels block by block, four image rows
        // at a time; asking for all its rows first overlaps the cache misses.
        for (int r = 0; r < ti.h; ++r) {
            const int y = ti.y0 + r;
            const int64_t pix = (ti.cam * a.height + y) * a.width + ti.x0;
            __builtin_prefetch(last_ids + pix);
            __builtin_prefetch(T_final + pix);
            const float *vrow = v_px + ti.cam * cs[0] + y * cs[1] + ti.x0 * cs[2];  // 3 lines for RGB
            __builtin_prefetch(vrow);
            __builtin_prefetch(vrow + (ti.w / 2) * cs[2]);
            __builtin_prefetch(vrow + (ti.w - 1) * cs[2] + (D - 1) * cs[3]);
            __builtin_prefetch(va_px + ti.cam * as[0] + y * as[1] + ti.x0 * as[2]);
        }
        int32_t max_last = -1;
        for (int k = 0; k < kLanes; ++k) {
            for (int j = 0; j < kLanes; ++j) {
                const bool in = tb.inside[k][j] != 0;
                const int y = ti.y0 + TileBlocks::row(k, j), x = ti.x0 + TileBlocks::col(k, j);
                const int64_t pix = (ti.cam * a.height + y) * a.width + x;
                const int64_t vpix = ti.cam * cs[0] + y * cs[1] + x * cs[2];
                const int64_t apix = ti.cam * as[0] + y * as[1] + x * as[2];
                last[k].set(j, in ? last_ids[pix] : -1);
                T[k].set(j, in ? T_final[pix] : 0.f);
                float bgdot = 0.f;
                for (int q = 0; q < D; ++q) {
                    const float v = in ? v_px[vpix + q * cs[3]] : 0.f;
                    vc[q * kLanes + k].set(j, v);
                    if (bg) bgdot += bg[q] * v;
                }
                // the alpha channel and background see alpha_i through T_final / (1 - alpha_i)
                U[k].set(j, in ? T[k][j] * (va_px[apix] - bgdot) : 0.f);
                max_last = std::max(max_last, last[k][j]);
            }
        }
        if (max_last < 0) return;
        // Records straight from the packed array, no per-tile copy: only the
        // pairs that blended somewhere are read, each once.
        const int32_t *ids = a.flatten_ids + ti.begin;

        for (int32_t i = max_last; i >= 0; --i) {
            // only the blocks where the forward blended this Gaussian: in the
            // others no lane is valid and every gradient term is exactly zero
            uint32_t used = static_cast<uint32_t>(cm[i]);
            // records and rows lie all over memory: ask for the lines a few pairs ahead
            if (i >= 6 && cm[i - 6]) {
                __builtin_prefetch(rows + static_cast<int64_t>(sl[i - 6]) * K, 1);
                __builtin_prefetch(packed + ids[i - 6]);
            }
            if (used == 0) continue;
            float *o = rows + static_cast<int64_t>(sl[i]) * K;
            written[sl[i]] = 1;
            const Packed &g = packed[ids[i]];
            const float *col = pair_colors(a, g, ti.cam, ids[i]);
            // sums over the pixels of ve dx, ve dy, ve dx^2, ve dx dy, ve dy^2
            // (ve = -v_sigma), of the opacity term and of each colour's
            nf sx{}, sy{}, sxx{}, sxy{}, syy{}, gax{}, gay{}, go{};
            nf gcol_fix[D_ ? D_ : 1];
            nf *gcol = D_ ? gcol_fix : gcol_dyn.data();
            for (int q = 0; q < D; ++q) gcol[q] = nf{};
            for (; used; used &= used - 1) {
                const int k = __builtin_ctz(used);
                const Falloff f = falloff(g.x, g.y, g.a, g.b, g.c, tb.px[k], tb.py[k]);
                const vf vis = exp_minus(f.sigma);
                const vf e = g.o * vis;
                vf dot = col[0] * vc[k];
                for (int q = 1; q < D; ++q) dot = fmadd(splat(col[q]), vc[q * kLanes + k], dot);
#if defined(__AVX512F__)
                // Masks in k registers, as in the forward: the same float operations
                // without a mask-to-vector conversion at each compare and select.
                const __m512 alpha = _mm512_min_ps((__m512)e.p[0], _mm512_set1_ps(kMaxAlpha));  // = the sel below
                __mmask16 valid = _mm512_cmpge_epi32_mask((__m512i)last[k].p[0], _mm512_set1_epi32(i));
                valid = _mm512_mask_cmp_ps_mask(valid, (__m512)f.sigma.p[0], _mm512_setzero_ps(), _CMP_GE_OQ);
                valid = _mm512_mask_cmp_ps_mask(valid, alpha, _mm512_set1_ps(kAlphaThreshold), _CMP_GE_OQ);
                const __m512 ra = _mm512_div_ps(_mm512_set1_ps(1.f), _mm512_sub_ps(_mm512_set1_ps(1.f), alpha));
                const __m512 Tn = _mm512_mul_ps((__m512)T[k].p[0], ra);
                const __m512 fac = _mm512_maskz_mul_ps(valid, alpha, Tn);
                const __m512 Uk = (__m512)U[k].p[0];
                const __m512 v_alpha = _mm512_fmadd_ps(Tn, (__m512)dot.p[0], _mm512_mul_ps(ra, Uk));
                U[k].p[0] = (nf)_mm512_fnmadd_ps(fac, (__m512)dot.p[0], Uk);
                for (int q = 0; q < D; ++q) gcol[q] = (nf)_mm512_fmadd_ps(fac, (__m512)vc[q * kLanes + k].p[0], (__m512)gcol[q]);
                // alpha is clamped at 0.999: no gradient through the clamp
                const __mmask16 inner = _mm512_mask_cmp_ps_mask(valid, (__m512)e.p[0], _mm512_set1_ps(kMaxAlpha), _CMP_LE_OQ);
                const __m512 ve = _mm512_maskz_mul_ps(inner, (__m512)e.p[0], v_alpha);
                go = (nf)_mm512_mask3_fmadd_ps((__m512)vis.p[0], v_alpha, (__m512)go, inner);
                T[k].p[0] = (nf)_mm512_mask_mov_ps((__m512)T[k].p[0], valid, Tn);
                vf vev;
                vev.p[0] = (nf)ve;
#else
                const vf alpha = sel(e < kMaxAlpha, e, splat(kMaxAlpha));
                const vi valid = (last[k] >= i) & (f.sigma >= 0.f) & (alpha >= kAlphaThreshold);
                const vf ra = 1.f / (1.f - alpha);
                const vf Tn = T[k] * ra;
                const vf fac = sel(valid, alpha * Tn, vf{});
                const vf v_alpha = fmadd(Tn, dot, ra * U[k]);
                U[k] = U[k] - fac * dot;
                for (int q = 0; q < D; ++q) gcol[q] = fold_fmadd(fac, vc[q * kLanes + k], gcol[q]);
                // alpha is clamped at 0.999: no gradient through the clamp
                const vi inner = valid & (e <= kMaxAlpha);
                const vf vev = sel(inner, e * v_alpha, vf{});
                go = fold_fmadd(sel(inner, vis, vf{}), v_alpha, go);
                T[k] = sel(valid, Tn, T[k]);
#endif
                const vf sdx = vev * f.dx, sdy = vev * f.dy;
                sx = fold_add(sdx, sx);
                sy = fold_add(sdy, sy);
                sxx = fold_fmadd(sdx, f.dx, sxx);
                sxy = fold_fmadd(sdx, f.dy, sxy);
                syy = fold_fmadd(sdy, f.dy, syy);
                if (kAbs) {  // |v_x| per pixel: no sum to factor
                    gax = fold_add(vabs(fmadd(splat(g.a), sdx, g.b * sdy)), gax);
                    gay = fold_add(vabs(fmadd(splat(g.b), sdx, g.c * sdy)), gay);
                }
            }
            // v_sigma = -ve: v_x = -(a sx + b sy), v_conic = -(sxx / 2, sxy, syy / 2)
            nf gx = (nf{} - nsplat(g.a) * sx) - nsplat(g.b) * sy;
            nf gy = (nf{} - nsplat(g.b) * sx) - nsplat(g.c) * sy;
            const nf half = nsplat(-0.5f);
            const nf gca = half * sxx, gcb = nf{} - sxy, gcc = half * syy;
#if defined(__AVX512F__)
            if constexpr (D_ != 0 && kColor + D_ + 2 <= kLanes) {
                // the row's sums in one vector and one masked store
                constexpr int kRow = kColor + D_ + (kAbs ? 2 : 0);
                nf sums[kRow];
                sums[kXY] = gx, sums[kXY + 1] = gy, sums[kConic] = gca, sums[kConic + 1] = gcb;
                sums[kConic + 2] = gcc, sums[kOpac] = go;
                for (int q = 0; q < D_; ++q) sums[kColor + q] = gcol[q];
                if constexpr (kAbs) sums[kColor + D_] = gax, sums[kColor + D_ + 1] = gay;
                _mm512_mask_storeu_ps(o, static_cast<__mmask16>((1u << kRow) - 1), hsum_lanes<kRow>(sums));
                continue;
            }
#endif
            o[kXY] = hsum(gx);
            o[kXY + 1] = hsum(gy);
            o[kConic] = hsum(gca);
            o[kConic + 1] = hsum(gcb);
            o[kConic + 2] = hsum(gcc);
            o[kOpac] = hsum(go);
            for (int q = 0; q < D; ++q) o[kColor + q] = hsum(gcol[q]);
            if (kAbs) {
                o[kColor + D] = hsum(gax);
                o[kColor + D + 1] = hsum(gay);
            }
        }
    }
};
#endif

template <int TS_, int D_>
void run(const RasterArgs &a, const float *tf, const float *vp, const float *vap, const int32_t *li,
         const int32_t *cm, const int32_t *sl, float *rows, uint8_t *wr, int K, bool absgrad) {
    const int64_t n_tiles = a.C * a.tile_w * a.tile_h;
    const PackedGaussians packed(a);
#ifdef PLR_HAVE_VEC
    if (TS_ == kLanes && absgrad)
        for_each_tile(n_tiles, a.nthreads, [&] { return BwdWorkerVec<D_, true>(a, packed.data(), tf, vp, vap, li, cm, sl, rows, wr, K); });
    else if (TS_ == kLanes)
        for_each_tile(n_tiles, a.nthreads, [&] { return BwdWorkerVec<D_, false>(a, packed.data(), tf, vp, vap, li, cm, sl, rows, wr, K); });
    else
#endif
        for_each_tile(n_tiles, a.nthreads, [&] { return BwdWorker<TS_, D_>(a, packed.data(), tf, vp, vap, li, sl, rows, wr, K, absgrad); });
}

template <int TS_>
void run_d(const RasterArgs &a, const float *tf, const float *vp, const float *vap, const int32_t *li,
           const int32_t *cm, const int32_t *sl, float *rows, uint8_t *wr, int K, bool absgrad) {
    switch (a.D) {
        case 1: return run<TS_, 1>(a, tf, vp, vap, li, cm, sl, rows, wr, K, absgrad);
        case 3: return run<TS_, 3>(a, tf, vp, vap, li, cm, sl, rows, wr, K, absgrad);
        case 4: return run<TS_, 4>(a, tf, vp, vap, li, cm, sl, rows, wr, K, absgrad);
        default: return run<TS_, 0>(a, tf, vp, vap, li, cm, sl, rows, wr, K, absgrad);
    }
}

// Per-Gaussian gradients, [C, N, ...] each; v_means2d_abs null without absgrad.
struct GradOut {
    float *v_means2d, *v_conics, *v_colors, *v_opacities, *v_means2d_abs;
};

// Sums each of the (camera, Gaussian) entries [begin, end)'s marked rows, in
// slot order. An unmarked row (blended nowhere) holds stale bytes: selected
// away, not skipped (a branch per row mispredicts; the rows stream in anyway).
template <int K_>
void sum_rows(const float *rows, const uint8_t *written, const int32_t *gauss_offsets, int K_dyn, int D,
              const GradOut &out, int64_t begin, int64_t end) {
    const int K = K_ ? K_ : K_dyn;
    std::vector<float> acc_dyn(K_ ? 0 : K);
    float acc_fix[K_ ? K_ : 1];
    float *acc = K_ ? acc_fix : acc_dyn.data();
    for (int64_t idx = begin; idx < end; ++idx) {
        for (int q = 0; q < K; ++q) acc[q] = 0.f;
        for (int64_t slot = gauss_offsets[idx]; slot < gauss_offsets[idx + 1]; ++slot) {
            const float *row = rows + slot * K;
            const bool w = written[slot] != 0;
            for (int q = 0; q < K; ++q) acc[q] += w ? row[q] : 0.f;
        }
        out.v_means2d[2 * idx] = acc[kXY];
        out.v_means2d[2 * idx + 1] = acc[kXY + 1];
        for (int q = 0; q < 3; ++q) out.v_conics[3 * idx + q] = acc[kConic + q];
        out.v_opacities[idx] = acc[kOpac];
        for (int k = 0; k < D; ++k) out.v_colors[idx * D + k] = acc[kColor + k];
        if (out.v_means2d_abs) {
            out.v_means2d_abs[2 * idx] = acc[kColor + D];
            out.v_means2d_abs[2 * idx + 1] = acc[kColor + D + 1];
        }
    }
}

}  // namespace

void raster_bwd(const RasterArgs &a, const float *T_final, const int32_t *last_ids, const int32_t *contrib,
                const float *v_colors_px, const float *v_alphas_px, const int32_t *gauss_offsets,
                const int32_t *slot_by_pos, float *v_means2d, float *v_conics, float *v_colors,
                float *v_opacities, float *v_means2d_abs) {
    const bool absgrad = v_means2d_abs != nullptr;
    const int D = a.D;
    const int K = kColor + D + (absgrad ? 2 : 0);
    const int64_t n_isects = a.tile_offsets[a.C * a.tile_w * a.tile_h];
    Scratch rows_mem(sizeof(float) * std::max<int64_t>(n_isects * K, 1));  // read only where marked: no zero fill
    Scratch marks_mem(std::max<int64_t>(n_isects, 1));
    float *rows = rows_mem.as<float>();
    uint8_t *written = marks_mem.as<uint8_t>();
    std::fill_n(written, n_isects, uint8_t{0});
    if (a.tile_size == 16)
        run_d<16>(a, T_final, v_colors_px, v_alphas_px, last_ids, contrib, slot_by_pos, rows, written, K, absgrad);
    else
        run_d<0>(a, T_final, v_colors_px, v_alphas_px, last_ids, contrib, slot_by_pos, rows, written, K, absgrad);

    const int64_t total = a.C * a.N;
    const GradOut out{v_means2d, v_conics, v_colors, v_opacities, v_means2d_abs};
    parallel_chunks(total, 4096, a.nthreads, [&](int64_t begin, int64_t end) {
        // a row length known at compile time keeps the sums in registers
        switch (K) {
            case kColor + 3: return sum_rows<kColor + 3>(rows, written, gauss_offsets, K, D, out, begin, end);
            case kColor + 5: return sum_rows<kColor + 5>(rows, written, gauss_offsets, K, D, out, begin, end);
            default: return sum_rows<0>(rows, written, gauss_offsets, K, D, out, begin, end);
        }
    });
}

}  // namespace plr
