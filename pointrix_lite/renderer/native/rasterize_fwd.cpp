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
                    const float alpha = std::min(kMaxAlpha, g.o * exp_minus(sigma));
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
// Buckets the tile's Gaussians [from, to) by the pending blocks they reach
// (GaussRec::blocks): block k's ids, front to back, are ids[k * stride, k *
// stride + cnt[k]); returns stride. Branch-free: a loop over each Gaussian's
// blocks mispredicts its exit once per pair, which cost as much as the
// evaluations themselves.
inline int64_t bucket_blocks(const std::vector<GaussRec> &recs, int32_t from, int32_t to, uint32_t pending,
                             std::vector<uint32_t> &masks, std::vector<int32_t> &ids, int32_t cnt[kLanes]) {
    const int32_t n = to - from;
    const int32_t n16 = (n + kLanes - 1) / kLanes * kLanes;
    const int64_t stride = n16 + kLanes;  // a whole-vector store at cnt[k] <= n16 - 16 stays inside
    masks.resize(n16);
    ids.resize(static_cast<size_t>(kLanes) * stride);
    for (int32_t i = 0; i < n; ++i) masks[i] = recs[from + i].blocks & pending;
    std::fill(masks.begin() + n, masks.begin() + n16, 0u);
    std::fill(cnt, cnt + kLanes, 0);
#if defined(__AVX512F__)
    // 16 Gaussians at a time: per block, one test and one compress of their ids
    const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    for (int32_t c = 0; c < n16; c += kLanes) {
        const __m512i mv = _mm512_loadu_si512(masks.data() + c);
        const __m512i idv = _mm512_add_epi32(iota, _mm512_set1_epi32(from + c));
        for (int k = 0; k < kLanes; ++k) {
            const __mmask16 hit = _mm512_test_epi32_mask(mv, _mm512_set1_epi32(1 << k));
            _mm512_storeu_si512(ids.data() + k * stride + cnt[k], _mm512_maskz_compress_epi32(hit, idv));
            cnt[k] += __builtin_popcount(hit);
        }
    }
#else
    for (int32_t i = 0; i < n; ++i)
        for (int k = 0; k < kLanes; ++k) {
            ids[k * stride + cnt[k]] = from + i;  // written for every block, kept only where the Gaussian reaches
            cnt[k] += (masks[i] >> k) & 1u;
        }
#endif
    return stride;
}

// Pairs gathered, block-tested and bucketed at a time. A tile's blocks mostly
// run out of transmittance long before its list ends (on bench_rasterizer's
// photo scenes 30-41% of the pairs come before the tile's last block stops):
// the pairs behind are never gathered.
constexpr int32_t kChunk = 64;

// Tile size 16, as 4x4-pixel blocks of 16 lanes (TileBlocks). Block-outer:
// each block walks the Gaussians that can reach it, front to back, with its
// transmittance, colour sums and last index held in registers, a chunk of the
// tile's list at a time. (Gaussian-outer kept them in memory, and every
// evaluation then waited on the previous Gaussian's store to the same pixels.)
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
    std::vector<int32_t> block_ids;  // per block, the ids of the Gaussians reaching it, front to back
    std::vector<uint32_t> masks;
    int32_t cnt[kLanes];
    // each block's state between chunks
    vf T_s[kLanes], Tk_s[kLanes];
    vi last_s[kLanes];
    std::vector<vf> acc_s;  // [kLanes][D] colour sums

    FwdWorkerVec(const RasterArgs &a_, const Packed *pk, float *oc, float *oa, float *ot, int32_t *li, int32_t *cm,
                 int64_t *ev)
        : a(a_), packed(pk), out_colors(oc), out_alphas(oa), out_T(ot), last_ids(li), contrib(cm), evals(ev),
          acc_s(static_cast<size_t>(kLanes) * (D_ ? D_ : a_.D)) {}

    // One block's blending state, in registers while it walks its list.
    //
    // The transmittance runs ahead: T takes every Gaussian that passes the
    // alpha tests, the one that ends a pixel included, so a pixel is alive
    // exactly while T > kTransmittanceEps (T only falls). A step's use mask is
    // then one compare of the new T, and the only state a step waits on is
    // T's multiply (plus a max): the form that tested alive -> ok -> term ->
    // alive chained three compares and a mask round trip per Gaussian (2-3% of
    // the forward on a CPU whose FP units set the pace, more where they do
    // not). Tk keeps each pixel's T after its last used Gaussian: the T gsplat
    // reports, where T itself went past the end.
    struct Blend {
        vf px, py;
        int32_t bit;
        bool done;
#if defined(__AVX512F__)
        // On AVX-512 the loop keeps its masks in k registers: the same float operations,
        // but GCC's vector masks cost a conversion (vpmovm2d / vpmovd2m) at every compare
        // and select, about a sixth of the loop's instructions.
        __m512 T, Tk;
        __m512i last;
#else
        vf T, Tk;
        vi last;
#endif
        vf acc_fix[D_ ? D_ : 1];  // the colour sums: a fixed-size array stays in registers
        vf *acc_dyn;              // acc_s's row when D is not a compile-time constant
        vf *acc() { return D_ ? acc_fix : acc_dyn; }
        const int32_t *it, *end;  // the block's ids in this chunk still to blend
    };

    __attribute__((always_inline)) void load(Blend &s, const TileBlocks &tb, int k, int64_t stride) {
        s.px = tb.px[k];
        s.py = tb.py[k];
        s.bit = 1 << k;
        s.done = false;
#if defined(__AVX512F__)
        s.T = (__m512)T_s[k].p[0];
        s.Tk = (__m512)Tk_s[k].p[0];
        s.last = (__m512i)last_s[k].p[0];
#else
        s.T = T_s[k];
        s.Tk = Tk_s[k];
        s.last = last_s[k];
#endif
        vf *acc_k = acc_s.data() + k * D;
        s.acc_dyn = acc_k;
        if constexpr (D_ != 0)
            for (int q = 0; q < D_; ++q) s.acc_fix[q] = acc_k[q];
        s.it = block_ids.data() + k * stride;
        s.end = s.it + cnt[k];
    }

    // Saves block k's state; returns its evaluations in this chunk.
    __attribute__((always_inline)) int64_t store(const Blend &s, const TileBlocks &tb, int k, int64_t stride) {
#if defined(__AVX512F__)
        T_s[k].p[0] = (nf)s.T;
        Tk_s[k].p[0] = (nf)s.Tk;
        last_s[k].p[0] = (ni)s.last;
#else
        T_s[k] = s.T;
        Tk_s[k] = s.Tk;
        last_s[k] = s.last;
#endif
        if constexpr (D_ != 0)
            for (int q = 0; q < D_; ++q) acc_s[k * D_ + q] = s.acc_fix[q];
        return static_cast<int64_t>(s.it - (block_ids.data() + k * stride)) * tb.n_inside[k];
    }

    // Blends the block's next Gaussian; s.done once every pixel of the block is done.
    __attribute__((always_inline)) void step(Blend &s, int32_t *cm) {
        const int D = D_ ? D_ : a.D;
        const int32_t i = *s.it++;
        vf *acc = s.acc();
        const GaussRec &g = recs[i];
        const float *col = cols.data() + static_cast<int64_t>(i) * D;
        const vf sigma = falloff(g.x, g.y, g.a, g.b, g.c, s.px, s.py).sigma;
        const vf e = g.o * exp_minus(sigma);
#if defined(__AVX512F__)
        // min_ps(e, m) is (e < m ? e : m), NaN included: the generic sel below
        const __m512 alpha = _mm512_min_ps((__m512)e.p[0], _mm512_set1_ps(kMaxAlpha));
        __mmask16 ok = _mm512_cmp_ps_mask((__m512)sigma.p[0], _mm512_setzero_ps(), _CMP_GE_OQ);
        ok = _mm512_mask_cmp_ps_mask(ok, alpha, _mm512_set1_ps(kAlphaThreshold), _CMP_GE_OQ);
        const __m512 next_T = _mm512_mul_ps(s.T, _mm512_sub_ps(_mm512_set1_ps(1.f), alpha));
        // max_ps(x, f) is (x > f ? x : f): T never NaN
        const __m512 T = _mm512_mask_max_ps(s.T, ok, next_T, _mm512_set1_ps(kSpentFloor));
        const __mmask16 live = _mm512_cmp_ps_mask(T, _mm512_set1_ps(kTransmittanceEps), _CMP_GT_OQ);
        const __mmask16 use = ok & live;  // next_T > eps: exclusive stop, and T > eps before
        const __m512 vis = _mm512_maskz_mul_ps(use, alpha, s.T);
        for (int q = 0; q < D; ++q)
            acc[q].p[0] = (nf)_mm512_fmadd_ps(vis, _mm512_set1_ps(col[q]), (__m512)acc[q].p[0]);
        s.T = T;
        s.Tk = _mm512_mask_mov_ps(s.Tk, use, T);
        s.last = _mm512_mask_mov_epi32(s.last, use, _mm512_set1_epi32(i));
        cm[i] |= use ? s.bit : 0;
        s.done = !live;
#else
        const vf alpha = sel(e < kMaxAlpha, e, splat(kMaxAlpha));
        const vi ok = (sigma >= 0.f) & (alpha >= kAlphaThreshold);
        const vf next_T = s.T * (1.f - alpha);
        const vf T = sel(ok, vmax(next_T, splat(kSpentFloor)), s.T);
        const vi live = T > kTransmittanceEps;
        const vi use = ok & live;  // next_T > eps: exclusive stop, and T > eps before
        const vf vis = sel(use, alpha * s.T, vf{});
        for (int q = 0; q < D; ++q) acc[q] = fmadd(vis, col[q], acc[q]);
        s.T = T;
        s.Tk = sel(use, T, s.Tk);
        s.last = seli(use, splati(i), s.last);
        cm[i] |= any(use) ? s.bit : 0;
        s.done = !any(live);
#endif
    }

    __attribute__((always_inline)) void walk(Blend &s, int32_t *cm) {
        while (!s.done && s.it != s.end) step(s, cm);
    }

    void write_block(const TileInfo &ti, const TileBlocks &tb, int k, const float *bg) {
        const int D = D_ ? D_ : a.D;
        const vf *acc = acc_s.data() + k * D;
        for (int j = 0; j < kLanes; ++j) {
            if (!tb.inside[k][j]) continue;
            const int64_t pix = (ti.cam * a.height + ti.y0 + TileBlocks::row(k, j)) * a.width + ti.x0 +
                                TileBlocks::col(k, j);
            const float Tj = Tk_s[k][j];
            for (int q = 0; q < D; ++q) out_colors[pix * D + q] = acc[q][j] + (bg ? Tj * bg[q] : 0.f);
            out_alphas[pix] = 1.f - Tj;
            out_T[pix] = Tj;
            last_ids[pix] = last_s[k][j];
        }
    }

    void operator()(int64_t t) {
        // a local, so the compiler sees a compile-time D when specialised
        const int D = D_ ? D_ : a.D;
        const TileInfo ti = tile_info(a, t);
        int32_t *cm = contrib + ti.begin;
        std::fill(cm, contrib + ti.end, 0);
        if (ti.w <= 0 || ti.h <= 0) return;
        const TileBlocks tb(ti);
        for (int k = 0; k < kLanes; ++k) {
            T_s[k] = sel(tb.inside[k], splat(1.f), vf{});  // lanes outside the image: never alive
            Tk_s[k] = T_s[k];
            last_s[k] = splati(-1);
        }
        std::fill(acc_s.begin(), acc_s.end(), vf{});
        // the tile's output rows, asked for now: they arrive while it blends
        for (int r = 0; r < ti.h; ++r) {
            const int64_t pix = (ti.cam * a.height + ti.y0 + r) * a.width + ti.x0;
            for (int q = 0; q < D * ti.w; q += 16) __builtin_prefetch(out_colors + pix * D + q, 1);
            __builtin_prefetch(out_alphas + pix, 1);
            __builtin_prefetch(out_T + pix, 1);
            __builtin_prefetch(last_ids + pix, 1);
        }
        const int32_t n = static_cast<int32_t>(ti.end - ti.begin);
        uint32_t pending = tb.live;  // blocks with a pixel still blending
        int64_t n_eval = 0;
        for (int32_t from = 0; from < n && pending; from += kChunk) {
            const int32_t to = std::min(n, from + kChunk);
            gather_tile(a, packed, ti, recs, cols, Spans::kBlocks, &tb, from, to);
            const int64_t stride = bucket_blocks(recs, from, to, pending, masks, block_ids, cnt);
            uint32_t todo = 0;  // pending blocks this chunk reaches
            for (int k = 0; k < kLanes; ++k) todo |= cnt[k] ? 1u << k : 0u;
            for (; todo; todo &= todo - 1) {
                const int k = __builtin_ctz(todo);
                Blend s;
                load(s, tb, k, stride);
                walk(s, cm);
                n_eval += store(s, tb, k, stride);
                if (s.done) pending &= ~(1u << k);
            }
        }
        const float *bg = a.backgrounds ? a.backgrounds + ti.cam * D : nullptr;
        for (uint32_t live = tb.live; live; live &= live - 1) write_block(ti, tb, __builtin_ctz(live), bg);
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
