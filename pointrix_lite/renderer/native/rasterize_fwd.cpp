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
// Buckets a tile's Gaussian ids by the blocks they reach (GaussRec::blocks):
// block k's ids, front to back, are ids[k * stride, k * stride + cnt[k]);
// returns stride. Branch-free: a loop over each Gaussian's blocks mispredicts
// its exit once per pair, which cost as much as the evaluations themselves.
inline int64_t bucket_blocks(const std::vector<GaussRec> &recs, int32_t n, std::vector<uint32_t> &masks,
                             std::vector<int32_t> &ids, int32_t cnt[kLanes]) {
    const int32_t n16 = (n + kLanes - 1) / kLanes * kLanes;
    const int64_t stride = n16 + kLanes;  // a whole-vector store at cnt[k] <= n16 - 16 stays inside
    masks.resize(n16);
    ids.resize(static_cast<size_t>(kLanes) * stride);
    for (int32_t i = 0; i < n; ++i) masks[i] = recs[i].blocks;
    std::fill(masks.begin() + n, masks.end(), 0u);
    std::fill(cnt, cnt + kLanes, 0);
#if defined(__AVX512F__)
    // 16 Gaussians at a time: per block, one test and one compress of their ids
    const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    for (int32_t c = 0; c < n16; c += kLanes) {
        const __m512i mv = _mm512_loadu_si512(masks.data() + c);
        const __m512i idv = _mm512_add_epi32(iota, _mm512_set1_epi32(c));
        for (int k = 0; k < kLanes; ++k) {
            const __mmask16 hit = _mm512_test_epi32_mask(mv, _mm512_set1_epi32(1 << k));
            _mm512_storeu_si512(ids.data() + k * stride + cnt[k], _mm512_maskz_compress_epi32(hit, idv));
            cnt[k] += __builtin_popcount(hit);
        }
    }
#else
    for (int32_t i = 0; i < n; ++i)
        for (int k = 0; k < kLanes; ++k) {
            ids[k * stride + cnt[k]] = i;  // written for every block, kept only where the Gaussian reaches
            cnt[k] += (masks[i] >> k) & 1u;
        }
#endif
    return stride;
}

// Tile size 16, as 4x4-pixel blocks of 16 lanes (TileBlocks). Block-outer:
// each block walks the Gaussians that can reach it, front to back, with its
// transmittance, colour sums and last index held in registers. (Gaussian-outer
// kept them in memory, and every evaluation then waited on the previous
// Gaussian's store to the same pixels.)
template <int D_>
struct FwdWorkerVec {
    const RasterArgs &a;
    const Packed *packed;
    float *out_colors, *out_alphas, *out_T;
    int32_t *last_ids, *contrib;
    int64_t *evals;
    std::vector<GaussRec> recs;
    std::vector<float> cols;
    std::vector<int32_t> block_ids;  // per block, the ids of the Gaussians reaching it, front to back
    std::vector<uint32_t> masks;
    std::vector<vf> acc_dyn;         // colour sums when D is not a compile-time constant
    int32_t cnt[kLanes];

    FwdWorkerVec(const RasterArgs &a_, const Packed *pk, float *oc, float *oa, float *ot, int32_t *li, int32_t *cm,
                 int64_t *ev)
        : a(a_), packed(pk), out_colors(oc), out_alphas(oa), out_T(ot), last_ids(li), contrib(cm), evals(ev),
          acc_dyn(D_ ? 0 : a_.D) {}

    // Blends block k's Gaussians front to back and writes its pixels; returns
    // its evaluations. Inlined, so a caller's local acc array stays in registers.
    __attribute__((always_inline)) int64_t blend_block(const TileInfo &ti, const TileBlocks &tb, int k, int64_t stride,
                                                       int32_t *cm, const float *bg, vf *acc) {
        const int D = D_ ? D_ : a.D;
        const int32_t bit = 1 << k;
        const vf px = tb.px[k], py = tb.py[k];
        vf T = splat(1.f);
        vi last = splati(-1), alive = tb.inside[k];
        for (int q = 0; q < D; ++q) acc[q] = vf{};
        const int32_t *ids = block_ids.data() + k * stride, *ids_end = ids + cnt[k];
        const int32_t *it = ids;
#if defined(__AVX512F__)
        // On AVX-512 the loop keeps its masks in k registers: the same float operations,
        // but GCC's vector masks cost a conversion (vpmovm2d / vpmovd2m) at every compare
        // and select, about a sixth of the loop's instructions.
        __m512 T5 = (__m512)T.p[0];
        __m512i last5 = (__m512i)last.p[0];
        __mmask16 alive5 = static_cast<__mmask16>(mask_bits(alive));
#endif
        for (; it != ids_end; ++it) {
            const int32_t i = *it;
            const GaussRec &g = recs[i];
            const float *col = cols.data() + static_cast<int64_t>(i) * D;
            const vf sigma = falloff(g.x, g.y, g.a, g.b, g.c, px, py).sigma;
            const vf e = g.o * exp_neg(-sigma);
#if defined(__AVX512F__)
            // min_ps(e, m) is (e < m ? e : m), NaN included: the generic sel below
            const __m512 alpha = _mm512_min_ps((__m512)e.p[0], _mm512_set1_ps(kMaxAlpha));
            __mmask16 ok = _mm512_mask_cmp_ps_mask(alive5, (__m512)sigma.p[0], _mm512_setzero_ps(), _CMP_GE_OQ);
            ok = _mm512_mask_cmp_ps_mask(ok, alpha, _mm512_set1_ps(kAlphaThreshold), _CMP_GE_OQ);
            const __m512 next_T = _mm512_mul_ps(T5, _mm512_sub_ps(_mm512_set1_ps(1.f), alpha));
            const __mmask16 term = _mm512_mask_cmp_ps_mask(ok, next_T, _mm512_set1_ps(kTransmittanceEps), _CMP_LE_OQ);
            const __mmask16 use = ok & static_cast<__mmask16>(~term);
            const __m512 vis = _mm512_maskz_mul_ps(use, alpha, T5);
            for (int q = 0; q < D; ++q)
                acc[q].p[0] = (nf)_mm512_fmadd_ps(vis, _mm512_set1_ps(col[q]), (__m512)acc[q].p[0]);
            T5 = _mm512_mask_mov_ps(T5, use, next_T);
            last5 = _mm512_mask_mov_epi32(last5, use, _mm512_set1_epi32(i));
            alive5 &= static_cast<__mmask16>(~term);
            cm[i] |= use ? bit : 0;
            const bool done = !alive5;
#else
            const vf alpha = sel(e < kMaxAlpha, e, splat(kMaxAlpha));
            const vi ok = alive & (sigma >= 0.f) & (alpha >= kAlphaThreshold);
            const vf next_T = T * (1.f - alpha);
            const vi term = ok & (next_T <= kTransmittanceEps);  // exclusive stop
            const vi use = ok & ~term;
            const vf vis = sel(use, alpha * T, vf{});
            for (int q = 0; q < D; ++q) acc[q] = fmadd(vis, col[q], acc[q]);
            T = sel(use, next_T, T);
            last = seli(use, splati(i), last);
            alive = alive & ~term;
            cm[i] |= any(use) ? bit : 0;
            const bool done = !any(alive);
#endif
            if (done) {  // every pixel of the block is done
                ++it;
                break;
            }
        }
#if defined(__AVX512F__)
        T.p[0] = (nf)T5;
        last.p[0] = (ni)last5;
#endif
        for (int j = 0; j < kLanes; ++j) {
            if (!tb.inside[k][j]) continue;
            const int64_t pix = (ti.cam * a.height + ti.y0 + TileBlocks::row(k, j)) * a.width + ti.x0 +
                                TileBlocks::col(k, j);
            const float Tj = T[j];
            for (int q = 0; q < D; ++q) out_colors[pix * D + q] = acc[q][j] + (bg ? Tj * bg[q] : 0.f);
            out_alphas[pix] = 1.f - Tj;
            out_T[pix] = Tj;
            last_ids[pix] = last[j];
        }
        return static_cast<int64_t>(it - ids) * tb.n_inside[k];
    }

    void operator()(int64_t t) {
        // a local, so the compiler sees a compile-time D when specialised
        const int D = D_ ? D_ : a.D;
        const TileInfo ti = tile_info(a, t);
        int32_t *cm = contrib + ti.begin;
        std::fill(cm, contrib + ti.end, 0);
        if (ti.w <= 0 || ti.h <= 0) return;
        const TileBlocks tb(ti);
        gather_tile(a, packed, ti, recs, cols, Spans::kBlocks, &tb);
        const int32_t n = static_cast<int32_t>(ti.end - ti.begin);
        const int64_t stride = bucket_blocks(recs, n, masks, block_ids, cnt);
        const float *bg = a.backgrounds ? a.backgrounds + ti.cam * D : nullptr;
        int64_t n_eval = 0;
        for (uint32_t live = tb.live; live; live &= live - 1) {
            const int k = __builtin_ctz(live);
            if constexpr (D_ != 0) {
                vf acc[D_ ? D_ : 1];  // a local array: the colour sums stay in registers
                n_eval += blend_block(ti, tb, k, stride, cm, bg, acc);
            } else {
                n_eval += blend_block(ti, tb, k, stride, cm, bg, acc_dyn.data());
            }
        }
        evals[t] = n_eval;
    }
};
#endif

template <int TS_, int D_>
int64_t run(const RasterArgs &a, float *oc, float *oa, float *ot, int32_t *li, int32_t *cm) {
    const int64_t n_tiles = a.C * a.tile_w * a.tile_h;
    const PackedGaussians packed(a);
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
