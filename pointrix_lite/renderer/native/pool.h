// Work sharing: the caller and up to nthreads-1 helpers claim items from an
// atomic counter, so uneven items (tiles whose costs differ by orders of
// magnitude) balance themselves and a helper that starts late just claims
// fewer.
//
// The helpers are persistent threads of our own (pool.cpp), and the caller
// waits only for the items that were actually claimed: on a loaded machine an
// OpenMP region, which waits at its end for every thread, costs a scheduler
// time slice. When torch's OpenMP workers spin between ops, they would hold
// the cores our helpers need; bindings.cpp then installs them as the thread
// runner instead (and says when and what it measured).
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

// Runs fn(ctx) on n threads (the caller's among them) and returns when all
// have returned; null (the default) means pool_submit's own threads.
using ThreadRunner = void (*)(int n, void (*fn)(void *), void *ctx);
void set_thread_runner(ThreadRunner runner);
ThreadRunner thread_runner();

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
    const int k = static_cast<int>(std::min<int64_t>(nthreads, n));
    if (ThreadRunner run = thread_runner()) {
        run(k, [](void *p) { (*static_cast<decltype(participate) *>(p))(); }, &participate);
        return;
    }
    pool_submit(k - 1, participate);
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
