// Work sharing without fork-join barriers. The caller and up to nthreads-1
// pool helpers claim items from an atomic counter; the caller waits only for
// items that were actually claimed. A helper that is slow to wake up (the
// cores are busy with other processes) therefore never stalls the call: the
// caller simply does more items itself. OpenMP's join barrier waits for every
// thread and costs a scheduler time slice per parallel region under load.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

namespace plr {

// Queues `task` for nthreads-1 helper threads (created on demand, kept for
// the process lifetime, sleeping when idle).
void pool_submit(int helpers, const std::function<void()> &task);

struct ItemsState {
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    std::mutex m;
    std::condition_variable cv;
};

// Calls worker(i) for every i in [0, n). make() builds one worker per
// participant (per-thread workspaces) and is only called after that
// participant claimed an item, so nothing on the caller's stack is touched
// after parallel_items returns.
template <class Make>
void parallel_items(int64_t n, int nthreads, Make &&make) {
    if (n <= 0) return;
    if (nthreads <= 1 || n == 1) {
        auto worker = make();
        for (int64_t i = 0; i < n; ++i) worker(i);
        return;
    }
    auto st = std::make_shared<ItemsState>();
    auto participate = [st, n, &make]() {
        int64_t i = st->next++;
        if (i >= n) return;  // late helper: touches only the shared state
        auto worker = make();
        for (; i < n; i = st->next++) {
            worker(i);
            if (++st->done == n) {
                std::lock_guard<std::mutex> lock(st->m);
                st->cv.notify_all();
            }
        }
    };
    pool_submit(static_cast<int>(std::min<int64_t>(nthreads, n)) - 1, participate);
    participate();
    std::unique_lock<std::mutex> lock(st->m);
    st->cv.wait(lock, [&] { return st->done.load() == n; });
}

// Splits [0, n) into fixed chunks of `chunk` (independent of the thread
// count, so chunked reductions stay deterministic) and runs body(begin, end).
template <class Body>
void parallel_chunks(int64_t n, int64_t chunk, int nthreads, Body &&body) {
    const int64_t n_chunks = (n + chunk - 1) / chunk;
    parallel_items(n_chunks, nthreads, [&] {
        return [&](int64_t c) { body(c * chunk, std::min(n, (c + 1) * chunk)); };
    });
}

}  // namespace plr
