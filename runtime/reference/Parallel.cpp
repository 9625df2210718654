//===- Parallel.cpp - Deterministic parallel loops ------------------------===//
#include "trellis/Reference/Parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

namespace trellis::ref {

static std::atomic<int> requestedThreads{0};

void setNumThreads(int n) { requestedThreads = n; }

int numThreads() {
  int n = requestedThreads;
  if (n > 0)
    return n;
  if (const char *env = std::getenv("TRELLIS_REF_THREADS")) {
    int e = std::atoi(env);
    if (e > 0)
      return e;
  }
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

void parallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(numThreads(), (n + grain - 1) / grain);
  if (chunks <= 1) {
    body(0, n);
    return;
  }
  // Chunk c covers [c·n/chunks, (c+1)·n/chunks); chunk 0 runs here.
  auto bound = [&](int64_t c) { return c * n / chunks; };
  std::vector<std::thread> workers;
  workers.reserve(size_t(chunks - 1));
  for (int64_t c = 1; c < chunks; ++c)
    workers.emplace_back([&, c] { body(bound(c), bound(c + 1)); });
  body(0, bound(1));
  for (std::thread &t : workers)
    t.join();
}

} // namespace trellis::ref
