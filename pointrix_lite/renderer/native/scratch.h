// Large blocks (per-call workspaces and big outputs) on transparent huge pages,
// kept for the next call. A fresh block of tens of MB costs a page fault per
// 4 KB page and the kernel zeroes every page it hands out; training asks for
// the same sizes every step, so blocks that come back are kept and reused.
#pragma once

#include <cstddef>
#include <cstdint>

namespace plr {

// Requests below this go to the allocator, which recycles them anyway.
constexpr size_t kHugePage = size_t(2) << 20;

// A block of at least `bytes` (64-byte aligned, 2 MB from kHugePage on; *have: its size), a kept one
// when one fits (at most twice the size asked), else a fresh one advised onto
// huge pages. nullptr when the system has no memory.
void *acquire_block(size_t bytes, size_t *have);

// Gives a block from acquire_block back: kept for the next request (at most 64
// blocks and 2 GiB, the oldest freed first; one unused for kMaxAge requests freed).
void release_block(void *p, size_t have);

// The blocks kept now, their bytes and the requests over 2 MB so far (for tests).
void kept_blocks(size_t *blocks, size_t *bytes, uint64_t *requests);

// A kept block that no request took in this many requests is freed.
constexpr uint64_t kMaxAge = 256;  // ~8 training steps at 1080x1920

// A workspace for the length of one call.
class Scratch {
   public:
    explicit Scratch(size_t bytes);
    ~Scratch() { release_block(p_, have_); }
    Scratch(const Scratch &) = delete;
    Scratch &operator=(const Scratch &) = delete;
    template <class T>
    T *as() const {
        return static_cast<T *>(p_);
    }

   private:
    void *p_ = nullptr;
    size_t have_ = 0;
};

}  // namespace plr
