// Persistent helper threads for parallel_items (see pool.h).
#include "pool.h"

#include <deque>
#include <thread>
#include <vector>

#include <unistd.h>

namespace plr {
namespace {

struct Pool {
    std::mutex m;
    std::condition_variable cv;
    std::deque<std::function<void()>> queue;
    int n_threads = 0;
    pid_t pid = getpid();

    void grow(int wanted) {
        // helpers are detached and the pool is never destroyed: no joins at
        // interpreter exit, and idle helpers just sleep on the condition variable
        for (; n_threads < wanted; ++n_threads) {
            std::thread([this] {
                for (;;) {
                    std::function<void()> task;
                    {
                        std::unique_lock<std::mutex> lock(m);
                        cv.wait(lock, [this] { return !queue.empty(); });
                        task = std::move(queue.front());
                        queue.pop_front();
                    }
                    task();
                }
            }).detach();
        }
    }
};

std::mutex g_pool_mutex;
Pool *g_pool = nullptr;

Pool &pool() {
    std::lock_guard<std::mutex> lock(g_pool_mutex);
    // after fork() the child has none of the parent's threads (and maybe a
    // locked mutex): start a fresh pool and leak the old one
    if (g_pool == nullptr || g_pool->pid != getpid()) g_pool = new Pool();
    return *g_pool;
}

}  // namespace

std::atomic<ThreadRunner> g_runner{nullptr};
void set_thread_runner(ThreadRunner runner) { g_runner = runner; }
ThreadRunner thread_runner() { return g_runner.load(std::memory_order_relaxed); }

void pool_submit(int helpers, const std::function<void()> &task) {
    if (helpers <= 0) return;
    Pool &p = pool();
    std::lock_guard<std::mutex> lock(p.m);
    p.grow(helpers);
    for (int i = 0; i < helpers; ++i) p.queue.push_back(task);
    if (helpers == 1)
        p.cv.notify_one();
    else
        p.cv.notify_all();
}

}  // namespace plr
