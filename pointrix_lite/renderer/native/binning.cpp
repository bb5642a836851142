// Tile binning (gsplat IntersectTile.cu + radix sort + isect_offset_encode) done
// as: sort each image's visible Gaussians by depth once, then a parallel
// counting sort into tiles that preserves that order. Each tile list is then
// front-to-back without per-tile sorting.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "common.h"
#include "kernels.h"
#include "pool.h"
#include "scratch.h"
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
inline void decode(int x0, int y0, int bw, int bh, uint64_t mask, F &&f) {
    const uint64_t row_bits = bw < 64 ? (uint64_t{1} << bw) - 1 : ~uint64_t{0};
    for (int y = 0; y < bh; ++y)
        for (uint64_t row = (mask >> (y * bw)) & row_bits; row; row &= row - 1)
            f(x0 + __builtin_ctzll(row), y0 + y);
}

// Tests the tiles of Gaussian idx's box (opacity opac) and calls f(x, y) for
// each it can reach; mask is only filled for boxes up to 64 tiles.
template <class F>
inline uint64_t test_box(const BinArgs &a, int64_t idx, float opac, const Rect &r, F &&f) {
    const int bw = r.x1 - r.x0, bh = r.y1 - r.y0;
    // A box one tile wide or high has no corners: the (convex, connected)
    // ellipse spans it end to end, so testing would rarely drop a tile there;
    // keeping them all is safe and saves most tests for small Gaussians.
    if (bw == 1 || bh == 1) {
        for (int y = r.y0; y < r.y1; ++y)
            for (int x = r.x0; x < r.x1; ++x) f(x, y);
        const int n = bw * bh;
        return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
    }
    const TileCull tc(a, idx, opac);
#ifdef PLR_HAVE_VEC
    // Up to kLanes tiles per vector test: whole rows of the box while they fit
    // (the common case is the whole box in one), else row segments. Each lane
    // decides its own tile, so the grouping never changes an answer.
    const int seg = std::min(bw, kLanes), rows = bw <= kLanes ? kLanes / bw : 1;
    uint64_t m = 0;
    for (int y = r.y0; y < r.y1; y += rows) {
        const int h = std::min(rows, r.y1 - y);
        for (int x = r.x0; x < r.x1; x += seg) {
            const int w = std::min(seg, r.x1 - x);
            const uint32_t sub = reach_tiles(tc.reach, tc.gx, tc.gy, x, y, w, h, a.tile_size, a.width, a.height);
            if (bw * bh <= 64) m |= uint64_t{sub} << ((y - r.y0) * bw + (x - r.x0));  // h > 1 only when w == bw
            decode(x, y, w, h, sub, f);
        }
    }
    return m;
#else
    uint64_t m = 0;
    for (int y = r.y0; y < r.y1; ++y)
        for (int x = r.x0; x < r.x1; ++x)
            if (tc.hit(a, x, y)) {
                if (bw * bh <= 64) m |= uint64_t{1} << ((y - r.y0) * bw + (x - r.x0));
                f(x, y);
            }
    return m;
#endif
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
    const bool small = (r.x1 - r.x0) * (r.y1 - r.y0) <= 64;  // the mask holds every answer
    int32_t n = 0;
    const uint64_t m = small ? test_box(a, idx, opac, r, [](int, int) {})
                             : test_box(a, idx, opac, r, [&](int, int) { ++n; });
    if (small) n = __builtin_popcountll(m);
    h = BoxHits{static_cast<uint16_t>(r.x0), static_cast<uint16_t>(r.y0), static_cast<uint16_t>(r.x1 - r.x0),
                static_cast<uint16_t>(r.y1 - r.y0), m};
    return n;
}

// f(cell, j) for the j-th tile (row-major) of Gaussian idx (box record h)
// that bin_count kept, cell being that tile's entry of an image's per-tile
// array (row width tw).
// The callers keep what they read in locals: through references into memory
// the compiler must assume that each int32 store may change it and reload it
// per pair (this cost the fill pass 2.7x).
template <class F>
inline void for_each_cell(const BinArgs &a, int64_t idx, const BoxHits &h, int32_t *cells, int tw, F &&f) {
    const int bw = h.bw, bh = h.bh;
    if (bw * bh > 64) {  // beyond the hit mask (rare): the box is tested again
        int32_t j = 0;
        test_box(a, idx, opacity(a, idx), Rect{h.x0, h.y0, h.x0 + bw, h.y0 + bh},
                 [&](int x, int y) { f(cells[y * tw + x], j++); });
        return;
    }
    const uint64_t row_bits = bw < 64 ? (uint64_t{1} << bw) - 1 : ~uint64_t{0};
    int32_t j = 0;
    for (int y = 0; y < bh; ++y) {
        int32_t *row_cells = cells + (h.y0 + y) * tw + h.x0;
        for (uint64_t row = (h.mask >> (y * bw)) & row_bits; row; row &= row - 1)
            f(row_cells[__builtin_ctzll(row)], j++);
    }
}

// A box record in depth order, with what the fill pass needs of its Gaussian.
struct Sorted {
    BoxHits h;
    int32_t idx, slot;  // c*N + g, its first Gaussian-major slot
};

// Stable LSD radix sort of n (float-bits key, id) pairs, k2/i2 being scratch
// of n: equal depths keep index order, like gsplat's stable CUB sort of
// (tile|depth) keys. Returns where the sorted ids are: ids or i2.
int32_t *radix_sort(uint32_t *keys, int32_t *ids, uint32_t *k2, int32_t *i2, size_t n) {
    uint32_t *k = keys;
    int32_t *i = ids;
    for (int shift = 0; shift < 32; shift += 8) {
        size_t count[257] = {0};
        for (size_t j = 0; j < n; ++j) ++count[((k[j] >> shift) & 255u) + 1];
        if (n == 0 || count[1 + ((k[0] >> shift) & 255u)] == n) continue;  // all equal
        for (int d = 0; d < 256; ++d) count[d + 1] += count[d];
        for (size_t j = 0; j < n; ++j) {
            size_t dst = count[(k[j] >> shift) & 255u]++;
            k2[dst] = k[j];
            i2[dst] = i[j];
        }
        std::swap(k, k2);
        std::swap(i, i2);
    }
    return i;
}

}  // namespace

int64_t bin_count(const BinArgs &a, int32_t *gauss_offsets) {
    const int64_t total = a.C * a.N;
    gauss_offsets[0] = 0;
    parallel_chunks(total, 8192, a.nthreads, [&](int64_t begin, int64_t end) {
        const BinArgs la = a;  // a local copy: see bin_fill's count pass
        int32_t *const counts = gauss_offsets + 1;
        int64_t c = begin / la.N, g = begin - c * la.N;
        for (int64_t idx = begin; idx < end; ++idx, g = g + 1 == la.N ? (++c, 0) : g + 1)
            counts[idx] = record_hits(la, idx, la.opacities[c * la.opac_cam_stride + g]);
    });
    int64_t acc = 0;
    for (int64_t idx = 0; idx < total; ++idx) {
        acc += gauss_offsets[idx + 1];
        gauss_offsets[idx + 1] = static_cast<int32_t>(acc);  // caller checks overflow
    }
    return acc;
}

void bin_fill(const BinArgs &a, const int32_t *gauss_offsets, int32_t *tile_offsets,
              int32_t *flatten_ids, int32_t *slot_by_pos) {
    const int64_t C = a.C, N = a.N;
    const int64_t tiles = static_cast<int64_t>(a.tile_w) * a.tile_h;

    // 1. per image: Gaussians with at least one tile, sorted by depth, into
    // seq (images one after another); sized by a counting pass so that
    // nothing grows by reallocation.
    std::vector<int64_t> cam_begin(C + 1, 0);
    for (int64_t c = 0; c < C; ++c) {
        int64_t n = 0;
        for (int64_t idx = c * N; idx < (c + 1) * N; ++idx) n += gauss_offsets[idx + 1] != gauss_offsets[idx];
        cam_begin[c + 1] = cam_begin[c] + n;
    }
    const int64_t S = cam_begin[C];
    // workspaces from kept blocks (scratch.h): fresh ones cost a page fault per 4 KB every call
    const Scratch seq_mem(sizeof(int32_t) * std::max<int64_t>(S, 1));
    int32_t *const seq = seq_mem.as<int32_t>();
    parallel_items(C, a.nthreads, [&] { return [&](int64_t c) {
        const int64_t n = cam_begin[c + 1] - cam_begin[c];
        // one slot of slack: every Gaussian is written, and only the kept ones
        // advance (a branch on visibility mispredicted about every other one)
        const Scratch keys_mem(sizeof(uint32_t) * (2 * n + 1)), ids_mem(sizeof(int32_t) * (n + 1));
        uint32_t *keys = keys_mem.as<uint32_t>();
        int32_t *ids = ids_mem.as<int32_t>(), *out = seq + cam_begin[c];
        int64_t j = 0;
        for (int64_t idx = c * N; idx < (c + 1) * N; ++idx) {
            std::memcpy(&keys[j], a.depths + idx, sizeof(uint32_t));
            ids[j] = static_cast<int32_t>(idx);
            j += gauss_offsets[idx + 1] != gauss_offsets[idx];
        }
        const int32_t *sorted_ids = radix_sort(keys, ids, keys + n + 1, out, static_cast<size_t>(n));
        if (sorted_ids != out) std::memcpy(out, sorted_ids, n * sizeof(int32_t));
    }; });

    // 2. chunked counting sort by global tile id, chunks in sequence order.
    // The count pass copies each Gaussian's box record into depth order (seq
    // jumps around memory, so these reads wait on cache misses unless issued
    // well ahead); the fill pass then reads them sequentially.
    const int nchunks = std::max<int64_t>(1, std::min<int64_t>(a.nthreads, S / 4096 + 1));
    // Each chunk's counters on cache lines of their own, so that two threads never increment
    // counters on one line (one chunk's last tiles, the next one's first).
    constexpr int64_t kLine = 64 / sizeof(int32_t);
    const int64_t stride = (C * tiles + kLine - 1) / kLine * kLine;
    std::vector<int32_t> counts_mem(static_cast<size_t>(nchunks * stride + kLine), 0);
    int32_t *const counts = counts_mem.data() + (kLine - reinterpret_cast<uintptr_t>(counts_mem.data()) / sizeof(int32_t) % kLine) % kLine;
    const Scratch sorted_mem(sizeof(Sorted) * std::max<int64_t>(S, 1));
    Sorted *const sorted = sorted_mem.as<Sorted>();
    auto chunk_begin = [&](int k) { return S * k / nchunks; };
    constexpr int kAhead = 24;
    // The workers below copy what their loops read into locals first. Read through the closure,
    // those values live in the calling thread's stack frame, and every store in the loop (which
    // might alias them, as far as the compiler knows) forces a reload from that frame, whose
    // cache lines the calling thread keeps writing. With the closure reads, 200k Gaussians at
    // 400x300 (305k pairs) took this pass 3.4-8 ms on 2 threads of our pool, more than one thread
    // alone (2.0 ms), and the whole binning 10-13 ms; with the locals 1.3 ms and 6.0-6.4 ms.
    parallel_items(nchunks, nchunks, [&] { return [&](int64_t k) {
        const BinArgs la = a;
        const int32_t *const order = seq, *const offsets = gauss_offsets;
        Sorted *const out = sorted;
        const int64_t n_seq = S, n_gauss = N, n_tiles = tiles, begin = chunk_begin(k), end = chunk_begin(k + 1);
        const bool one_image = C == 1;
        int32_t *const cnt = counts + k * stride;
        for (int64_t s = begin; s < end; ++s) {
            if (s + kAhead < n_seq) {
                const int64_t ahead = order[s + kAhead];
                __builtin_prefetch(la.boxes + ahead);
                __builtin_prefetch(offsets + ahead);
            }
            const int32_t idx = order[s];
            const BoxHits h = la.boxes[idx];
            out[s] = Sorted{h, idx, offsets[idx]};
            for_each_cell(la, idx, h, cnt + (one_image ? 0 : idx / n_gauss) * n_tiles, la.tile_w,
                          [](int32_t &c, int32_t) { ++c; });
        }
    }; });
    // exclusive scan over (tile, chunk) turns counts into write cursors
    int64_t acc = 0;
    for (int64_t t = 0; t < C * tiles; ++t) {
        tile_offsets[t] = static_cast<int32_t>(acc);
        for (int k = 0; k < nchunks; ++k) {
            int32_t &c = counts[k * stride + t];
            int32_t n = c;
            c = static_cast<int32_t>(acc);
            acc += n;
        }
    }
    tile_offsets[C * tiles] = static_cast<int32_t>(acc);
    parallel_items(nchunks, nchunks, [&] { return [&](int64_t k) {
        const BinArgs la = a;  // locals, as in the count pass
        const Sorted *const in = sorted;
        int32_t *const ids = flatten_ids, *const slots = slot_by_pos;
        const int64_t n_gauss = N, n_tiles = tiles, begin = chunk_begin(k), end = chunk_begin(k + 1);
        const bool one_image = C == 1;
        int32_t *const cur = counts + k * stride;
        for (int64_t s = begin; s < end; ++s) {
            const Sorted o = in[s];
            const int32_t gid = o.idx, slot = o.slot;  // the Gaussian's rows are consecutive slots
            for_each_cell(la, gid, o.h, cur + (one_image ? 0 : gid / n_gauss) * n_tiles, la.tile_w,
                          [=](int32_t &c, int32_t j) {
                              const int32_t pos = c++;
                              ids[pos] = gid;
                              slots[pos] = slot + j;
                          });
        }
    }; });
}

}  // namespace plr
