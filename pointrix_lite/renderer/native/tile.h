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
#include "simd.h"

namespace plr {

struct GaussRec {
    float x, y, a, b, c, o;
    int lo, hi;  // tile-local rows that can see this Gaussian (lo > hi: none)
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
// reads one block instead of five scattered arrays.
struct Packed {
    float x, y, a, b, c, o, half_w, half_h;
    float level, nb_a;  // reach_level(o) and -b/a (reach_rows); +inf and 0 for a non-PD conic
};

inline std::vector<Packed> pack_gaussians(const RasterArgs &a) {
    const int64_t total = a.C * a.N;
    std::vector<Packed> out(total);
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
        if (!(p.a > 0.f) || !(p.c > 0.f) || !(p.a * p.c - p.b * p.b > 0.f)) p.level = INFINITY, p.nb_a = 0.f;
    }
    });
    return out;
}

enum class Spans { kNone, kScalar, kVec };

// Gathers the tile's Gaussians (and their colors, [n][D]) contiguously, with
// the rows [lo, hi] their alpha can reach 1/255 in. kVec (tile size 16):
// reach_rows for all rows at once. kScalar (any tile size): the ellipse's
// bounding rows, ends trimmed by the exact row test (Reach::row); the
// reachable rows are an interval (the ellipse cut to the tile's columns is
// convex), so trimming the ends is enough. kNone (the SIMD backward, which
// reads the forward's contribution masks instead) leaves rows unset.
inline void gather_tile(const RasterArgs &a, const Packed *packed, const TileInfo &ti,
                        std::vector<GaussRec> &recs, std::vector<float> &cols, Spans spans) {
    const int64_t n = ti.end - ti.begin;
    recs.resize(n);
    cols.resize(n * a.D);
    const float y0 = static_cast<float>(ti.y0);
    const int64_t cam_base = ti.cam * a.N;  // a tile's ids all belong to its camera
    // pixel columns have centres x0 + 0.5 .. x0 + w - 0.5
    const float px_lo = static_cast<float>(ti.x0) + 0.5f, px_hi = static_cast<float>(ti.x0 + ti.w - 1) + 0.5f;
    for (int64_t i = 0; i < n; ++i) {
        // ids come in depth order, scattered over memory: the gather waits on
        // cache misses unless the records a few pairs ahead are requested now
        if (i + 8 < n) {
            const int64_t ahead = a.flatten_ids[ti.begin + i + 8];
            __builtin_prefetch(packed + ahead);
            __builtin_prefetch(a.colors + ti.cam * a.colors_cam_stride + (ahead - cam_base) * a.D);
        }
        const int64_t idx = a.flatten_ids[ti.begin + i];  // c*N + g
        const Packed &p = packed[idx];
        GaussRec &r = recs[i];
        r.x = p.x, r.y = p.y, r.a = p.a, r.b = p.b, r.c = p.c, r.o = p.o;
        // idx - cam * N, not idx % N: a 64-bit division per pair cost more than the whole gather
        const float *src = a.colors + ti.cam * a.colors_cam_stride + (idx - cam_base) * a.D;
        for (int k = 0; k < a.D; ++k) cols[i * a.D + k] = src[k];
        if (spans == Spans::kNone) continue;
#ifdef PLR_HAVE_VEC
        if (spans == Spans::kVec) {
            const uint32_t m = reach_rows(p.y, p.a, p.b, p.c, p.level, p.nb_a, p.x - px_hi, p.x - px_lo, y0, ti.h);
            r.lo = m ? __builtin_ctz(m) : 1;
            r.hi = m ? 31 - __builtin_clz(m) : 0;
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
