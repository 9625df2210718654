//===- OutputWriter.h - Files written off the critical path -----*- C++ -*-===//
//
// One background thread that writes a generation's files while the GPU computes
// the next stage or the next generation. Each job writes one file (atomically,
// through AtomicFile, as the writers in runtime/output do); a failed job's
// error names the file. Jobs run in the order they were submitted.
//
// Errors are collected per *mark*: `mark()` returns a ticket for everything
// submitted so far, and `wait(ticket)` blocks until those jobs are done and
// returns the first error among them — so a caller can let generation g's files
// be written while generation g+1 runs, and still report g's failure as g's.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_OUTPUTWRITER_H
#define TRELLIS_RUNTIME_OUTPUTWRITER_H

#include "trellis/Support/Result.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace trellis {

class OutputWriter {
public:
  using Job = std::function<Status()>;

  OutputWriter();
  /// Finishes every submitted job, then stops the thread.
  ~OutputWriter();
  OutputWriter(const OutputWriter &) = delete;
  OutputWriter &operator=(const OutputWriter &) = delete;

  /// Queues `job`, which writes `file` (named in its error).
  void submit(std::string file, Job job);
  /// A ticket for every job submitted so far.
  uint64_t mark();
  /// Waits for the jobs before `ticket`; the first of their errors (in
  /// submission order), else ok. Each error is returned once.
  Status wait(uint64_t ticket);
  /// Waits for everything submitted so far.
  Status drain() { return wait(mark()); }
  /// Waits for the jobs before `to` and drops the errors of jobs [from, to)
  /// (those of a failed generation, whose files are removed anyway); the
  /// errors of earlier jobs stay for their wait().
  void discard(uint64_t from, uint64_t to);

private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<std::pair<uint64_t, Job>> queue_;
  // Errors of finished jobs not yet returned by wait(): (job index, error).
  std::vector<std::pair<uint64_t, std::string>> errors_;
  uint64_t submitted_ = 0, finished_ = 0;
  bool stopping_ = false;
  std::thread thread_; // last: starts after the members above exist
};

} // namespace trellis

#endif // TRELLIS_RUNTIME_OUTPUTWRITER_H
