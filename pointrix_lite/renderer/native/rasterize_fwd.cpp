// Forward alpha compositing (gsplat RasterizeToPixels3DGSFwd.cu semantics).
// Gaussian-outer / pixel-inner: every pixel still sees the tile's Gaussians
// front to back, but a whole tile row is one SIMD sweep per Gaussian.
#include <vector>

#include "simd.h"
#include "tile.h"

namespace plr {
namespace {

// Any tile size (and the PLR_SCALAR build): plain per-pixel code.
template <int TS_, int D_>
struct FwdWorker {
    const RasterArgs &a;
    const Packed *packed;
    float *out_colors, *out_alphas, *out_T;
    int32_t *last_ids, *contrib;
    int64_t *evals;
    const int TS = TS_ ? TS_ : a.tile_size;
    const int D = D_ ? D_ : a.D;
    std::vector<GaussRec> recs;
    std::vector<float> cols, T, acc, px;
    std::vector<int32_t> last, alive, row_alive;

    FwdWorker(const RasterArgs &a_, const Packed *pk, float *oc, float *oa, float *ot, int32_t *li, int32_t *cm,
              int64_t *ev)
        : a(a_), packed(pk), out_colors(oc), out_alphas(oa), out_T(ot), last_ids(li), contrib(cm), evals(ev),
          T(TS * TS), acc(static_cast<size_t>(D) * TS * TS), px(TS), last(TS * TS),
          alive(TS * TS), row_alive(TS) {}

    void operator()(int64_t t) {
        // locals, so the compiler sees compile-time D / TS when specialised
        const int D = D_ ? D_ : a.D;
        const TileInfo ti = tile_info(a, t);
        std::fill(contrib + ti.begin, contrib + ti.end, -1);  // this path's backward reads no masks
        if (ti.w <= 0 || ti.h <= 0) return;
        gather_tile(a, packed, ti, recs, cols, Spans::kScalar);
        const int TS = TS_ ? TS_ : a.tile_size;
        const int P = TS * TS;
        std::fill(T.begin(), T.end(), 1.f);
        std::fill(acc.begin(), acc.end(), 0.f);
        std::fill(last.begin(), last.end(), -1);
        int n_alive = 0;
        for (int r = 0; r < TS; ++r) {
            row_alive[r] = r < ti.h ? ti.w : 0;
            n_alive += row_alive[r];
            for (int j = 0; j < TS; ++j) alive[r * TS + j] = (r < ti.h && j < ti.w) ? 1 : 0;
        }
        for (int j = 0; j < TS; ++j) px[j] = static_cast<float>(ti.x0 + j) + 0.5f;

        int64_t n_eval = 0;
        const int64_t n = ti.end - ti.begin;
        for (int64_t i = 0; i < n && n_alive > 0; ++i) {
            const GaussRec g = recs[i];
            const float *col = cols.data() + i * D;
            for (int r = g.lo; r <= g.hi; ++r) {
                if (row_alive[r] == 0) continue;
                n_eval += ti.w;
                const float dy = g.y - (static_cast<float>(ti.y0 + r) + 0.5f);
                float *Tr = T.data() + r * TS;
                int32_t *al = alive.data() + r * TS;
                int32_t *lr = last.data() + r * TS;
                int n_term = 0;
                const int32_t ii = static_cast<int32_t>(i);
                for (int j = 0; j < TS; ++j) {
                    const float dx = g.x - px[j];
                    const float sigma = gauss_sigma(g.a, g.b, g.c, dx, dy);
                    const float alpha = std::min(kMaxAlpha, g.o * exp_neg(-sigma));
                    const bool ok = al[j] != 0 && sigma >= 0.f && alpha >= kAlphaThreshold;
                    const float next_T = Tr[j] * (1.f - alpha);
                    const bool term = ok && next_T <= kTransmittanceEps;  // exclusive stop
                    const bool use = ok && !term;
                    const float vis = alpha * Tr[j];
                    for (int k = 0; k < D; ++k) {
                        float &ak = acc[static_cast<size_t>(k) * P + r * TS + j];
                        ak = use ? ak + col[k] * vis : ak;
                    }
                    Tr[j] = use ? next_T : Tr[j];
                    lr[j] = use ? ii : lr[j];
                    al[j] = term ? 0 : al[j];
                    n_term += term ? 1 : 0;
                }
                if (n_term) {
                    row_alive[r] -= n_term;
                    n_alive -= n_term;
                }
            }
        }
        evals[t] = n_eval;

        const float *bg = a.backgrounds ? a.backgrounds + ti.cam * D : nullptr;
        for (int r = 0; r < ti.h; ++r) {
            for (int j = 0; j < ti.w; ++j) {
                const int p = r * TS + j;
                const int64_t pix = (ti.cam * a.height + ti.y0 + r) * a.width + ti.x0 + j;
                for (int k = 0; k < D; ++k)
                    out_colors[pix * D + k] = acc[static_cast<size_t>(k) * P + p] + (bg ? T[p] * bg[k] : 0.f);
                out_alphas[pix] = 1.f - T[p];
                out_T[pix] = T[p];
                last_ids[pix] = last[p];
            }
        }
    }
};

#ifdef PLR_HAVE_VEC
// Tile size 16: one pixel row is one 16-lane vector.
template <int D_>
struct FwdWorkerVec {
    const RasterArgs &a;
    const Packed *packed;
    float *out_colors, *out_alphas, *out_T;
    int32_t *last_ids, *contrib;
    int64_t *evals;
    const int D = D_ ? D_ : a.D;
    std::vector<GaussRec> recs;
    std::vector<float> cols;
    std::vector<vf> T, acc;
    std::vector<vi> last, alive;
    int row_live[kLanes];

    FwdWorkerVec(const RasterArgs &a_, const Packed *pk, float *oc, float *oa, float *ot, int32_t *li, int32_t *cm,
                 int64_t *ev)
        : a(a_), packed(pk), out_colors(oc), out_alphas(oa), out_T(ot), last_ids(li), contrib(cm), evals(ev), T(kLanes),
          acc(static_cast<size_t>(D) * kLanes), last(kLanes), alive(kLanes) {}

    void operator()(int64_t t) {
        // locals, so the compiler sees compile-time D / TS when specialised
        const int D = D_ ? D_ : a.D;
        const TileInfo ti = tile_info(a, t);
        int32_t *cm = contrib + ti.begin;
        std::fill(cm, contrib + ti.end, 0);
        if (ti.w <= 0 || ti.h <= 0) return;
        gather_tile(a, packed, ti, recs, cols, Spans::kVec);
        vf iota;
        for (int j = 0; j < kLanes; ++j) iota[j] = static_cast<float>(j);
        const vf px = iota + (static_cast<float>(ti.x0) + 0.5f);
        const vi in_row = __builtin_convertvector(iota, vi) < ti.w;
        int n_live = 0;
        for (int r = 0; r < kLanes; ++r) {
            T[r] = splat(1.f);
            last[r] = splati(-1);
            alive[r] = r < ti.h ? in_row : splati(0);
            row_live[r] = r < ti.h;
            n_live += row_live[r];
        }
        std::fill(acc.begin(), acc.end(), vf{});

        int64_t n_eval = 0;
        const int64_t n = ti.end - ti.begin;
        for (int64_t i = 0; i < n && n_live > 0; ++i) {
            const GaussRec g = recs[i];
            if (g.lo > g.hi) continue;  // reaches no pixel of this tile
            const float *col = cols.data() + i * D;
            const RowGauss rg = row_gauss(g.x, g.a, g.b, g.c, px);
            const vi ii = splati(static_cast<int32_t>(i));
            int32_t rows_used = 0;
            for (int r = g.lo; r <= g.hi; ++r) {
                if (!row_live[r]) continue;
                n_eval += ti.w;
                const float dy = g.y - (static_cast<float>(ti.y0 + r) + 0.5f);
                const vf sigma = row_sigma(rg, dy);
                const vf e = g.o * exp_neg(-sigma);
                const vf alpha = sel(e < kMaxAlpha, e, splat(kMaxAlpha));
                const vi ok = alive[r] & (sigma >= 0.f) & (alpha >= kAlphaThreshold);
                const vf next_T = T[r] * (1.f - alpha);
                const vi term = ok & (next_T <= kTransmittanceEps);  // exclusive stop
                const vi use = ok & ~term;
                const vf vis = sel(use, alpha * T[r], vf{});
                for (int k = 0; k < D; ++k) acc[k * kLanes + r] = fmadd(vis, col[k], acc[k * kLanes + r]);
                T[r] = sel(use, next_T, T[r]);
                last[r] = seli(use, ii, last[r]);
                alive[r] = alive[r] & ~term;
                rows_used |= any(use) ? 1 << r : 0;
            }
            cm[i] = rows_used;
            if ((i & 15) == 15) {  // refresh the finished-row flags now and then
                n_live = 0;
                for (int r = 0; r < kLanes; ++r) n_live += row_live[r] = any(alive[r]);
            }
        }
        evals[t] = n_eval;

        const float *bg = a.backgrounds ? a.backgrounds + ti.cam * D : nullptr;
        for (int r = 0; r < ti.h; ++r) {
            const int64_t row = (ti.cam * a.height + ti.y0 + r) * a.width + ti.x0;
            for (int j = 0; j < ti.w; ++j) {
                const float Tj = T[r][j];
                for (int k = 0; k < D; ++k)
                    out_colors[(row + j) * D + k] = acc[k * kLanes + r][j] + (bg ? Tj * bg[k] : 0.f);
                out_alphas[row + j] = 1.f - Tj;
                out_T[row + j] = Tj;
                last_ids[row + j] = last[r][j];
            }
        }
    }
};
#endif

template <int TS_, int D_>
int64_t run(const RasterArgs &a, float *oc, float *oa, float *ot, int32_t *li, int32_t *cm) {
    const int64_t n_tiles = a.C * a.tile_w * a.tile_h;
    const std::vector<Packed> packed = pack_gaussians(a);
    std::vector<int64_t> evals(n_tiles, 0);
#ifdef PLR_HAVE_VEC
    if (TS_ == kLanes)
        for_each_tile(n_tiles, a.nthreads, [&] { return FwdWorkerVec<D_>(a, packed.data(), oc, oa, ot, li, cm, evals.data()); });
    else
#endif
        for_each_tile(n_tiles, a.nthreads, [&] { return FwdWorker<TS_, D_>(a, packed.data(), oc, oa, ot, li, cm, evals.data()); });
    int64_t total = 0;
    for (int64_t e : evals) total += e;
    return total;
}

template <int TS_>
int64_t run_d(const RasterArgs &a, float *oc, float *oa, float *ot, int32_t *li, int32_t *cm) {
    switch (a.D) {
        case 1: return run<TS_, 1>(a, oc, oa, ot, li, cm);
        case 3: return run<TS_, 3>(a, oc, oa, ot, li, cm);
        case 4: return run<TS_, 4>(a, oc, oa, ot, li, cm);
        default: return run<TS_, 0>(a, oc, oa, ot, li, cm);
    }
}

}  // namespace

int64_t raster_fwd(const RasterArgs &a, float *out_colors, float *out_alphas, float *out_T,
                   int32_t *last_ids, int32_t *contrib) {
    if (a.tile_size == 16) return run_d<16>(a, out_colors, out_alphas, out_T, last_ids, contrib);
    return run_d<0>(a, out_colors, out_alphas, out_T, last_ids, contrib);
}

}  // namespace plr
