#include "scratch.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace plr {
namespace {

struct Kept {
    void *p;
    size_t bytes;
    uint64_t released;  // Store::clock when it came back
};

// A training step's large blocks: the renderer's outputs and saved tensors
// (images, per-pair and per-Gaussian arrays), its workspaces, the gradients,
// SSIM's maps: ~25-30 requests over 2 MB per step at 1080x1920. Beyond this
// many blocks, or this many bytes in all, the oldest go back to the system, and
// so does a block no request took in the last kMaxAge (scratch.h) requests (sizes change as
// densification grows the model or a schedule changes the resolution: a block
// too small or more than twice too large for every request would stay forever).
constexpr size_t kKeepBlocks = 64;
constexpr size_t kKeepBytes = size_t(2) << 30;

struct Store {
    std::mutex m;
    std::vector<Kept> kept;  // oldest first
    uint64_t clock = 0;      // requests over 2 MB so far
};
Store &store() {
    static Store *s = new Store;  // never destroyed: tensors may be freed at exit
    return *s;
}

}  // namespace

void *acquire_block(size_t bytes, size_t *have) {
    if (bytes < kHugePage) {
        void *p = nullptr;
        *have = bytes;
        return posix_memalign(&p, 64, std::max<size_t>(bytes, 64)) == 0 ? p : nullptr;  // cache-line aligned
    }
    const size_t want = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    {
        Store &s = store();
        std::lock_guard<std::mutex> lock(s.m);
        ++s.clock;
        // the smallest kept block that fits, if no more than half of it goes unused
        auto best = s.kept.end();
        for (auto it = s.kept.begin(); it != s.kept.end(); ++it)
            if (it->bytes >= want && it->bytes / 2 <= want && (best == s.kept.end() || it->bytes < best->bytes)) best = it;
        if (best != s.kept.end()) {
            void *p = best->p;
            *have = best->bytes;
            s.kept.erase(best);
            return p;
        }
    }
    void *p = nullptr;
    if (posix_memalign(&p, kHugePage, want) != 0) return nullptr;
#ifdef MADV_HUGEPAGE
    madvise(p, want, MADV_HUGEPAGE);
#endif
    *have = want;
    return p;
}

void release_block(void *p, size_t have) {
    if (!p) return;
    if (have < kHugePage) return std::free(p);
    std::vector<void *> drop;
    {
        Store &s = store();
        std::lock_guard<std::mutex> lock(s.m);
        s.kept.push_back({p, have, s.clock});
        size_t total = 0;
        for (const Kept &k : s.kept) total += k.bytes;
        while (!s.kept.empty() && (s.kept.size() > kKeepBlocks || total > kKeepBytes ||
                                   s.clock - s.kept.front().released > kMaxAge)) {
            total -= s.kept.front().bytes;
            drop.push_back(s.kept.front().p);
            s.kept.erase(s.kept.begin());
        }
    }
    for (void *q : drop) std::free(q);
}

void kept_blocks(size_t *blocks, size_t *bytes, uint64_t *requests) {
    Store &s = store();
    std::lock_guard<std::mutex> lock(s.m);
    *requests = s.clock;
    *blocks = s.kept.size();
    *bytes = 0;
    for (const Kept &k : s.kept) *bytes += k.bytes;
}

Scratch::Scratch(size_t bytes) {
    // in the body: a member initialiser would run before have_'s default one resets it
    p_ = acquire_block(bytes, &have_);
    if (!p_) throw std::bad_alloc();
}

}  // namespace plr
