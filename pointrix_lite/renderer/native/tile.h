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
// reads one 32-byte block instead of five scattered arrays.
struct Packed {
    float x, y, a, b, c, o, half_w, half_h;
};

inline std::vector<Packed> pack_gaussians(const RasterArgs &a) {
    const int64_t total = a.C * a.N;
    std::vector<Packed> out(total);
    parallel_chunks(total, 8192, a.nthreads, [&](int64_t begin, int64_t end) {
    for (int64_t idx = begin; idx < end; ++idx) {
        Packed &p = out[idx];
        p.x = a.means2d[2 * idx];
        p.y = a.means2d[2 * idx + 1];
        p.a = a.conics[3 * idx];
        p.b = a.conics[3 * idx + 1];
        p.c = a.conics[3 * idx + 2];
        p.o = a.opacities[(idx / a.N) * a.opac_cam_stride + idx % a.N];
        alpha_half_extents(p.a, p.b, p.c, p.o, &p.half_w, &p.half_h);
    }
    });
    return out;
}

// Gathers the tile's Gaussians (and their colors, [n][D]) contiguously.
inline void gather_tile(const RasterArgs &a, const Packed *packed, const TileInfo &ti,
                        std::vector<GaussRec> &recs, std::vector<float> &cols) {
    const int64_t n = ti.end - ti.begin;
    recs.resize(n);
    cols.resize(n * a.D);
    const float y0 = static_cast<float>(ti.y0);
    for (int64_t i = 0; i < n; ++i) {
        const int64_t idx = a.flatten_ids[ti.begin + i];  // c*N + g
        const Packed &p = packed[idx];
        GaussRec &r = recs[i];
        r.x = p.x, r.y = p.y, r.a = p.a, r.b = p.b, r.c = p.c, r.o = p.o;
        row_span(p.y, p.half_h, y0, ti.h, &r.lo, &r.hi);
        // pixel columns have centres x0 + 0.5 .. x0 + w - 0.5
        if (p.x + p.half_w < ti.x0 + 0.5f || p.x - p.half_w > ti.x0 + ti.w - 0.5f) r.lo = 1, r.hi = 0;
        const float *src = a.colors + ti.cam * a.colors_cam_stride + (idx % a.N) * a.D;
        for (int k = 0; k < a.D; ++k) cols[i * a.D + k] = src[k];
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
