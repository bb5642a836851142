// Tile binning (gsplat IntersectTile.cu + radix sort + isect_offset_encode) done
// as: sort each image's visible Gaussians by depth once, then a parallel
// counting sort into tiles that preserves that order. Each tile list is then
// front-to-back without per-tile sorting.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common.h"
#include "kernels.h"
#include "pool.h"
#include "simd.h"

namespace plr {
namespace {

struct Rect {
    int x0, y0, x1, y1;  // [x0,x1) x [y0,y1) in tiles
};

inline int clampi(float v, int hi) {
    if (!(v > 0.f)) return 0;  // also maps NaN to 0, as a saturating cast would
    return v > hi ? hi : static_cast<int>(v);
}

// Same float arithmetic as gsplat's intersect_tile_kernel.
inline Rect tile_rect(const BinArgs &a, int64_t idx) {
    const float ts = static_cast<float>(a.tile_size);
    float rx = static_cast<float>(a.radii[2 * idx]), ry = static_cast<float>(a.radii[2 * idx + 1]);
    float tx = a.means2d[2 * idx] / ts, ty = a.means2d[2 * idx + 1] / ts;
    float trx = rx / ts, try_ = ry / ts;
    return Rect{clampi(std::floor(tx - trx), a.tile_w), clampi(std::floor(ty - try_), a.tile_h),
                clampi(std::ceil(tx + trx), a.tile_w), clampi(std::ceil(ty + try_), a.tile_h)};
}

inline bool visible(const BinArgs &a, int64_t idx) {
    return a.radii[2 * idx] > 0 && a.radii[2 * idx + 1] > 0;
}

// Exact tile test of one Gaussian: its radius box (gsplat's) over-covers, most
// of all at the corners and for thin rotated ellipses; keep a tile only if the
// alpha can reach 1/255 at one of the tile's in-image pixel centres.
struct TileCull {
    float gx, gy;
    Reach reach;
    TileCull(const BinArgs &a, int64_t idx, float opac)
        : gx(a.means2d[2 * idx]), gy(a.means2d[2 * idx + 1]),
          reach(a.conics[3 * idx], a.conics[3 * idx + 1], a.conics[3 * idx + 2], reach_level(opac)) {}
    bool hit(const BinArgs &a, int tx, int ty) const {
        const int x0 = tx * a.tile_size, y0 = ty * a.tile_size;
        const float xl = x0 + 0.5f, xh = std::min(x0 + a.tile_size, a.width) - 0.5f;
        const float yl = y0 + 0.5f, yh = std::min(y0 + a.tile_size, a.height) - 0.5f;
        return reach.rect(gx - xh, gx - xl, gy - yh, gy - yl);
    }
};

inline float opacity(const BinArgs &a, int64_t idx) {
    return a.opacities[(idx / a.N) * a.opac_cam_stride + idx % a.N];
}

// Calls f(tile_x, tile_y) for each tile set in a box's hit mask (bit
// (y - y0) * bw + (x - x0)), row by row: no integer division per hit.
template <class F>
inline void decode(const BoxHits &h, F &&f) {
    const uint64_t row_bits = h.bw < 64 ? (uint64_t{1} << h.bw) - 1 : ~uint64_t{0};
    for (int y = 0; y < h.bh; ++y)
        for (uint64_t row = (h.mask >> (y * h.bw)) & row_bits; row; row &= row - 1)
            f(h.x0 + __builtin_ctzll(row), h.y0 + y);
}

// Tests the tiles of Gaussian idx's box (opacity opac) and calls f(x, y) for
// each it can reach; mask is only filled for boxes up to 64 tiles.
template <class F>
inline uint64_t test_box(const BinArgs &a, int64_t idx, float opac, const Rect &r, F &&f) {
    const int bw = r.x1 - r.x0, bh = r.y1 - r.y0;
    // A box one tile wide or high has no corners: the (convex, connected)
    // ellipse spans it end to end, so testing would rarely drop a tile there;
    // keeping them all is safe and saves most tests for small Gaussians.
    const bool test = bw > 1 && bh > 1;
    const TileCull tc(a, idx, opac);
#ifdef PLR_HAVE_VEC
    if (test && bw * bh <= kLanes) {  // the common case: all tiles in one vector
        BoxHits h{r.x0, r.y0, bw, bh,
                  reach_tiles(tc.reach, tc.gx, tc.gy, r.x0, r.y0, bw, bh, a.tile_size, a.width, a.height)};
        decode(h, f);
        return h.mask;
    }
#endif
    uint64_t m = 0;
    for (int y = r.y0; y < r.y1; ++y)
        for (int x = r.x0; x < r.x1; ++x)
            if (!test || tc.hit(a, x, y)) {
                if (bw * bh <= 64) m |= uint64_t{1} << ((y - r.y0) * bw + (x - r.x0));
                f(x, y);
            }
    return m;
}

// bin_count: tests Gaussian idx's box and records it in a.boxes[idx] (the
// answers too, for boxes up to 64 tiles), so that bin_fill's two passes, which
// visit the Gaussians in depth order, read one record per Gaussian.
inline int32_t record_hits(const BinArgs &a, int64_t idx, float opac) {
    BoxHits &h = a.boxes[idx];
    h = BoxHits{0, 0, 0, 0, 0};
    if (!visible(a, idx)) return 0;
    const Rect r = tile_rect(a, idx);
    if (r.x1 <= r.x0 || r.y1 <= r.y0) return 0;
    int32_t n = 0;
    h = BoxHits{r.x0, r.y0, r.x1 - r.x0, r.y1 - r.y0, test_box(a, idx, opac, r, [&](int, int) { ++n; })};
    return n;
}

// bin_fill: f(x, y) for every tile of Gaussian idx that bin_count kept.
template <class F>
inline void for_each_hit(const BinArgs &a, int64_t idx, F &&f) {
    const BoxHits &h = a.boxes[idx];
    if (h.bw * h.bh <= 64) return decode(h, f);
    test_box(a, idx, opacity(a, idx), Rect{h.x0, h.y0, h.x0 + h.bw, h.y0 + h.bh}, f);  // rare: huge boxes
}

// Stable LSD radix sort of (float-bits key, id) pairs: equal depths keep index
// order, like gsplat's stable CUB sort of (tile|depth) keys.
void radix_sort(std::vector<uint32_t> &keys, std::vector<int32_t> &ids) {
    const size_t n = keys.size();
    std::vector<uint32_t> k2(n);
    std::vector<int32_t> i2(n);
    for (int shift = 0; shift < 32; shift += 8) {
        size_t count[257] = {0};
        for (size_t i = 0; i < n; ++i) ++count[((keys[i] >> shift) & 255u) + 1];
        if (count[1 + ((keys.empty() ? 0 : keys[0] >> shift) & 255u)] == n) continue;  // all equal
        for (int b = 0; b < 256; ++b) count[b + 1] += count[b];
        for (size_t i = 0; i < n; ++i) {
            size_t dst = count[(keys[i] >> shift) & 255u]++;
            k2[dst] = keys[i];
            i2[dst] = ids[i];
        }
        keys.swap(k2);
        ids.swap(i2);
    }
}

}  // namespace

int64_t bin_count(const BinArgs &a, int32_t *gauss_offsets) {
    const int64_t total = a.C * a.N;
    gauss_offsets[0] = 0;
    parallel_chunks(total, 8192, a.nthreads, [&](int64_t begin, int64_t end) {
    int64_t c = begin / a.N, g = begin - c * a.N;
    for (int64_t idx = begin; idx < end; ++idx, g = g + 1 == a.N ? (++c, 0) : g + 1) {
        gauss_offsets[idx + 1] = record_hits(a, idx, a.opacities[c * a.opac_cam_stride + g]);
    }
    });
    int64_t acc = 0;
    for (int64_t idx = 0; idx < total; ++idx) {
        acc += gauss_offsets[idx + 1];
        gauss_offsets[idx + 1] = static_cast<int32_t>(acc);  // caller checks overflow
    }
    return acc;
}

void bin_fill(const BinArgs &a, const int32_t *gauss_offsets, int32_t *tile_offsets,
              int32_t *flatten_ids, int32_t *pos_by_gauss) {
    const int64_t C = a.C, N = a.N;
    const int64_t tiles = static_cast<int64_t>(a.tile_w) * a.tile_h;

    // 1. per image: Gaussians with at least one tile, sorted by depth
    std::vector<std::vector<int32_t>> order(C);
    parallel_items(C, a.nthreads, [&] { return [&](int64_t c) {
        std::vector<uint32_t> keys;
        std::vector<int32_t> &ids = order[c];
        for (int64_t g = 0; g < N; ++g) {
            const int64_t idx = c * N + g;
            if (gauss_offsets[idx + 1] == gauss_offsets[idx]) continue;
            uint32_t bits;
            std::memcpy(&bits, a.depths + idx, sizeof(bits));
            keys.push_back(bits);
            ids.push_back(static_cast<int32_t>(idx));
        }
        radix_sort(keys, ids);
    }; });
    std::vector<int32_t> seq;
    for (auto &o : order) seq.insert(seq.end(), o.begin(), o.end());
    order.clear();

    // 2. chunked counting sort by global tile id, chunks in sequence order
    const int64_t S = static_cast<int64_t>(seq.size());
    const int nchunks = std::max<int64_t>(1, std::min<int64_t>(a.nthreads, S / 4096 + 1));
    std::vector<int32_t> counts(static_cast<size_t>(nchunks) * C * tiles, 0);
    auto chunk_begin = [&](int k) { return S * k / nchunks; };
    // seq is in depth order, so the per-Gaussian reads below jump around memory
    auto prefetch_ahead = [&](int64_t s) {
        if (s + 32 >= S) return;
        const int64_t ahead = seq[s + 32];
        __builtin_prefetch(a.boxes + ahead);
        __builtin_prefetch(gauss_offsets + ahead);
    };
    parallel_items(nchunks, nchunks, [&] { return [&](int64_t k) {
        int32_t *cnt = counts.data() + static_cast<size_t>(k) * C * tiles;
        for (int64_t s = chunk_begin(k); s < chunk_begin(k + 1); ++s) {
            prefetch_ahead(s);
            const int64_t idx = seq[s];
            const int64_t base = (idx / N) * tiles;
            for_each_hit(a, idx, [&](int x, int y) { ++cnt[base + y * a.tile_w + x]; });
        }
    }; });
    // exclusive scan over (tile, chunk) turns counts into write cursors
    int64_t acc = 0;
    for (int64_t t = 0; t < C * tiles; ++t) {
        tile_offsets[t] = static_cast<int32_t>(acc);
        for (int k = 0; k < nchunks; ++k) {
            int32_t &c = counts[static_cast<size_t>(k) * C * tiles + t];
            int32_t n = c;
            c = static_cast<int32_t>(acc);
            acc += n;
        }
    }
    tile_offsets[C * tiles] = static_cast<int32_t>(acc);
    parallel_items(nchunks, nchunks, [&] { return [&](int64_t k) {
        int32_t *cur = counts.data() + static_cast<size_t>(k) * C * tiles;
        for (int64_t s = chunk_begin(k); s < chunk_begin(k + 1); ++s) {
            prefetch_ahead(s);
            const int64_t idx = seq[s];
            const int64_t base = (idx / N) * tiles;
            int32_t slot = gauss_offsets[idx];
            for_each_hit(a, idx, [&](int x, int y) {
                int32_t pos = cur[base + y * a.tile_w + x]++;
                flatten_ids[pos] = static_cast<int32_t>(idx);
                pos_by_gauss[slot++] = pos;
            });
        }
    }; });
}

}  // namespace plr
