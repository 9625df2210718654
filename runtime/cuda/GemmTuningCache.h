//===- GemmTuningCache.h - GEMM picks kept across processes -----*- C++ -*-===//
//
// The GPU executor times cuBLASLt's split-K-free candidates for every distinct
// GEMM at a stage's first run (GpuOptions::tuneGemms). That costs 0.2-0.8 s
// per stage, mostly loading the candidates' kernels; this file keeps the
// winners (the algorithm per GEMM key, as the hex text of cuBLASLt's
// algorithm struct) in a JSON file, one section per device and cuBLASLt
// version, so that later processes skip the timing.
// Plain C++ (no CUDA): unit-tested without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_CUDA_GEMMTUNINGCACHE_H
#define TRELLIS_RUNTIME_CUDA_GEMMTUNINGCACHE_H

#include "trellis/Support/Result.h"

#include <map>
#include <string>

namespace trellis::gpuexec {

/// GEMM key (shape, layouts, dtypes, epilogue) -> the winning algorithm
/// (lower-case hex text; the executor only uses it where cuBLASLt's
/// heuristic offers that very algorithm).
using GemmPicks = std::map<std::string, std::string>;

/// The picks of `section` in the cache file at `path`; empty when the file
/// is missing, unreadable or not a cache (it is then replaced at the next
/// write).
GemmPicks readGemmTuningCache(const std::string &path,
                              const std::string &section);

/// Merges `picks` into `section` of the file at `path` (other sections and
/// keys written meanwhile by other processes are kept; `picks` wins on the
/// same key) and replaces the file whole (AtomicFile), creating its
/// directory.
Status writeGemmTuningCache(const std::string &path, const std::string &section,
                            const GemmPicks &picks);

} // namespace trellis::gpuexec

#endif // TRELLIS_RUNTIME_CUDA_GEMMTUNINGCACHE_H
