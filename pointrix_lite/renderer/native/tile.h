// Per-tile data shared by the forward and backward rasterizer: each thread
// owns whole tiles, gathers the tile's Gaussians into a contiguous record
// array (front to back) and sweeps them over the tile's pixels, SIMD across
// the pixels of a row.
#pragma once

#include <algorithm>
#include <vector>

#include "common.h"
#include "kernels.h"
#include "pool.h"
#include "scratch.h"
#include "simd.h"

namespace plr {

struct GaussRec {
    float x, y, a, b, c, o;
    int lo, hi;       // Spans::kScalar: tile-local rows that can see this Gaussian (lo > hi: none)
    uint32_t blocks;  // Spans::kBlocks: the 4x4 blocks it can reach (bit k: block k)
};

struct TileInfo {
    int64_t cam, begin, end;  // isect range [begin, end)
    int x0, y0, w, h;         // pixel origin and in-image extent
};

inline TileInfo tile_info(const RasterArgs &a, int64_t t) {
    const int64_t tiles = static_cast<int64_t>(a.tile_w) * a.tile_h;
    TileInfo ti;
    ti.cam = t / tiles;
    const int64_t local = t % tiles;
    ti.x0 = static_cast<int>(local % a.tile_w) * a.tile_size;
    ti.y0 = static_cast<int>(local / a.tile_w) * a.tile_size;
    ti.w = std::min(a.tile_size, a.width - ti.x0);
    ti.h = std::min(a.tile_size, a.height - ti.y0);
    ti.begin = a.tile_offsets[t];
    ti.end = a.tile_offsets[t + 1];
    return ti;
}

// Per-(camera, Gaussian) record packed once per call, so the per-tile gather
// reads one cache line instead of six scattered arrays. The gather's ids come
// in depth order, scattered over memory: one line per pair, on huge pages
// (scratch.h), where 44-byte records without the colours cost two lines, a
// third for the colour and a TLB miss each.
constexpr int kPackedColors = 5;  // channels kept in the record (more: read from RasterArgs::colors)
struct alignas(64) Packed {
    float x, y, a, b, c, o, half_w, half_h;
    float level, nb_a, nb_c;  // reach_level(o), -b/a and -b/c (reach_rects); +inf, 0, 0 for a non-PD conic
    float col[kPackedColors];
};
static_assert(sizeof(Packed) == 64, "one cache line per record");

// The records of every (camera, Gaussian), [C * N], in a workspace for one call.
struct PackedGaussians {
    Scratch mem;
    explicit PackedGaussians(const RasterArgs &a);
    const Packed *data() const { return mem.as<Packed>(); }
};

inline PackedGaussians::PackedGaussians(const RasterArgs &a) : mem(sizeof(Packed) * std::max<int64_t>(a.C * a.N, 1)) {
    const int64_t total = a.C * a.N;
    Packed *out = mem.as<Packed>();
    const int nc = a.D <= kPackedColors ? a.D : 0;
    parallel_chunks(total, 8192, a.nthreads, [&](int64_t begin, int64_t end) {
    int64_t c = begin / a.N, g = begin - c * a.N;  // no 64-bit division per Gaussian
    for (int64_t idx = begin; idx < end; ++idx, g = g + 1 == a.N ? (++c, 0) : g + 1) {
        Packed &p = out[idx];
        p.x = a.means2d[2 * idx];
        p.y = a.means2d[2 * idx + 1];
        p.a = a.conics[3 * idx];
        p.b = a.conics[3 * idx + 1];
        p.c = a.conics[3 * idx + 2];
        p.o = a.opacities[c * a.opac_cam_stride + g];
        alpha_half_extents(p.a, p.b, p.c, p.o, &p.half_w, &p.half_h);
        p.level = reach_level(p.o);
        p.nb_a = -p.b / p.a;
        p.nb_c = -p.b / p.c;
        if (!(p.a > 0.f) || !(p.c > 0.f) || !(p.a * p.c - p.b * p.b > 0.f)) p.level = INFINITY, p.nb_a = p.nb_c = 0.f;
        const float *src = a.colors + c * a.colors_cam_stride + g * a.D;
        for (int k = 0; k < kPackedColors; ++k) p.col[k] = k < nc ? src[k] : 0.f;
    }
    });
}

// The colours of pair (camera cam, packed index idx = cam * N + g): in the
// record when they fit, else in RasterArgs::colors.
inline const float *pair_colors(const RasterArgs &a, const Packed &p, int64_t cam, int64_t idx) {
    return a.D <= kPackedColors ? p.col : a.colors + cam * a.colors_cam_stride + (idx - cam * a.N) * a.D;
}

enum class Spans { kScalar, kBlocks };

#ifdef PLR_HAVE_VEC
// A 16x16 tile as 16 blocks of 4x4 pixels, one block per 16-lane vector:
// block k holds tile columns 4 (k & 3) .. +3 and rows 4 (k >> 2) .. +3, its
// lane j the pixel (j & 3, j >> 2) of the block. Square blocks waste fewer
// lanes on a Gaussian a few pixels wide than 16x1 rows did (0.69x the
// evaluations on bench_rasterizer's small scene before early termination).
constexpr int kBlockSide = 4;
struct TileBlocks {
    vf px[kLanes], py[kLanes];  // each block's pixel centres
    vi inside[kLanes];          // its lanes inside the image
    int n_inside[kLanes];
    vf xl, xh, yl, yh;          // lane k: block k's first and last in-image pixel centres
    uint32_t live = 0;          // blocks with a pixel inside the image

    explicit TileBlocks(const TileInfo &ti) {
        for (int k = 0; k < kLanes; ++k) {
            const int bx = (k % kBlockSide) * kBlockSide, by = (k / kBlockSide) * kBlockSide;
            n_inside[k] = 0;
            for (int j = 0; j < kLanes; ++j) {
                const int x = bx + j % kBlockSide, y = by + j / kBlockSide;
                px[k].set(j, static_cast<float>(ti.x0 + x) + 0.5f);
                py[k].set(j, static_cast<float>(ti.y0 + y) + 0.5f);
                inside[k].set(j, x < ti.w && y < ti.h ? -1 : 0);
                n_inside[k] += x < ti.w && y < ti.h;
            }
            xl.set(k, static_cast<float>(ti.x0 + bx) + 0.5f);
            yl.set(k, static_cast<float>(ti.y0 + by) + 0.5f);
            xh.set(k, static_cast<float>(ti.x0 + std::min(bx + kBlockSide, ti.w) - 1) + 0.5f);
            yh.set(k, static_cast<float>(ti.y0 + std::min(by + kBlockSide, ti.h) - 1) + 0.5f);
            if (n_inside[k]) live |= 1u << k;
        }
    }

    // the pixel of block k's lane j, as an offset from the tile's origin
    static int col(int k, int j) { return (k % kBlockSide) * kBlockSide + j % kBlockSide; }
    static int row(int k, int j) { return (k / kBlockSide) * kBlockSide + j / kBlockSide; }

    // blocks in which the Gaussian's alpha can reach 1/255 at some pixel centre
    uint32_t reach(const Packed &p) const {
        if (!(p.level >= 0.f)) return 0u;
        return mask_bits(reach_rects(p.a, p.b, p.c, p.level, p.nb_a, p.nb_c, p.x - xh, p.x - xl, p.y - yh, p.y - yl)) &
               live;
    }
};
#endif

// Gathers the tile's Gaussians [from, to) of its list (and their colors,
// [n][D]) into recs / cols at their tile-local index, with where their alpha
// can reach 1/255. kBlocks (tile size 16): the 4x4 blocks, all at once
// (TileBlocks::reach). kScalar (any tile size): rows [lo, hi], the ellipse's
// bounding rows, ends trimmed by the exact row test (Reach::row); the
// reachable rows are an interval (the ellipse cut to the tile's columns is
// convex), so trimming the ends is enough. The arrays are sized for the whole
// list when from is 0.
inline void gather_tile(const RasterArgs &a, const Packed *packed, const TileInfo &ti,
                        std::vector<GaussRec> &recs, std::vector<float> &cols, Spans spans,
                        const struct TileBlocks *blocks = nullptr, int64_t from = 0, int64_t to = -1) {
    const int64_t n = ti.end - ti.begin;
    if (to < 0) to = n;
    if (from == 0) {
        recs.resize(n);
        cols.resize(n * a.D);
    }
    const float y0 = static_cast<float>(ti.y0);
    const bool in_record = a.D <= kPackedColors;
    // pixel columns have centres x0 + 0.5 .. x0 + w - 0.5
    const float px_lo = static_cast<float>(ti.x0) + 0.5f, px_hi = static_cast<float>(ti.x0 + ti.w - 1) + 0.5f;
    for (int64_t i = from; i < to; ++i) {
        // ids come in depth order, scattered over memory: the gather waits on
        // cache misses unless the records a few pairs ahead are requested now
        if (i + 8 < n) {
            const int64_t ahead = a.flatten_ids[ti.begin + i + 8];
            __builtin_prefetch(packed + ahead);
            if (!in_record) __builtin_prefetch(pair_colors(a, packed[ahead], ti.cam, ahead));
        }
        const int64_t idx = a.flatten_ids[ti.begin + i];  // c*N + g
        const Packed &p = packed[idx];
        GaussRec &r = recs[i];
        r.x = p.x, r.y = p.y, r.a = p.a, r.b = p.b, r.c = p.c, r.o = p.o;
        // idx - cam * N, not idx % N: a 64-bit division per pair cost more than the whole gather
        const float *src = pair_colors(a, p, ti.cam, idx);
        for (int k = 0; k < a.D; ++k) cols[i * a.D + k] = src[k];
#ifdef PLR_HAVE_VEC
        if (spans == Spans::kBlocks) {
            r.blocks = blocks->reach(p);
            continue;
        }
#endif
        row_span(p.y, p.half_h, y0, ti.h, &r.lo, &r.hi);
        if (p.x + p.half_w < px_lo || p.x - p.half_w > px_hi) r.lo = 1, r.hi = 0;
        if (r.lo > r.hi) continue;
        const float dxl = p.x - px_hi, dxh = p.x - px_lo;
        const Reach reach(p.a, p.b, p.c, p.level);
        auto hit = [&](int row) { return reach.row(p.y - (static_cast<float>(ti.y0 + row) + 0.5f), dxl, dxh); };
        while (r.lo <= r.hi && !hit(r.lo)) ++r.lo;
        while (r.hi >= r.lo && !hit(r.hi)) --r.hi;
    }
}

// Runs worker(tile) over all tiles, claimed one by one (tile costs vary by
// orders of magnitude, a static split would idle threads). make() builds one
// worker per participating thread, so workspaces are allocated once.
template <class Make>
void for_each_tile(int64_t n_tiles, int nthreads, Make &&make) {
    parallel_items(n_tiles, nthreads, make);
}

}  // namespace plr
