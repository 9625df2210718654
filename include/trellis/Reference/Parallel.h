//===- Parallel.h - Deterministic parallel loops of the reference backend -===//
//
// The reference kernels split their outputs over a few std::threads. Results
// never depend on the thread count: every output element is computed by
// exactly one thread, and every reduction runs in a fixed order inside that
// thread. No LLVM here.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_REFERENCE_PARALLEL_H
#define TRELLIS_REFERENCE_PARALLEL_H

#include <cstdint>
#include <functional>

namespace trellis::ref {

/// Sets the number of threads the kernels use; n <= 0 restores the default
/// (the TRELLIS_REF_THREADS environment variable if set, else the number of
/// hardware threads).
void setNumThreads(int n);

/// The number of threads the kernels use now (at least 1).
int numThreads();

/// Calls body(begin, end) on disjoint ranges covering [0, n), in parallel.
/// Each range holds at least `grain` items (except when n is smaller), so
/// cheap loops stay on one thread. The ranges depend on the thread count;
/// the body must make each item's result independent of its range.
void parallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body);

} // namespace trellis::ref

#endif // TRELLIS_REFERENCE_PARALLEL_H
