//===- AtomicFile.h - Output files that appear whole or not at all --------===//
//
// Every output file of trellisc is written to "<path>.tmp-<pid>" and renamed
// over <path> on commit(), so a failure never leaves a partial file behind.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_SUPPORT_ATOMICFILE_H
#define TRELLIS_SUPPORT_ATOMICFILE_H

#include "trellis/Support/Result.h"

#include <cstdio>
#include <string>

namespace trellis {

class AtomicFile {
public:
  /// Opens a temporary file next to `path`. Check status() before writing.
  explicit AtomicFile(std::string path);
  /// Removes the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;

  /// The open error, if any.
  const Status &status() const { return status_; }
  /// Appends bytes; failures are remembered and reported by commit().
  void write(const void *data, size_t size);
  void write(const std::string &s) { write(s.data(), s.size()); }
  /// Flushes, closes and renames the file into place.
  Status commit();

private:
  std::string path_, tmpPath_;
  std::FILE *file_ = nullptr;
  int registered_ = -1; // its slot in the signal handlers' list, or -1
  Status status_;
  bool committed_ = false;
};

/// Installs handlers for SIGINT, SIGTERM and SIGHUP that remove the
/// temporary files of every AtomicFile still open and end the process with
/// 128 + the signal (130, 143, 129): an interrupted run leaves no
/// "<name>.tmp-<pid>" behind. (Files already renamed into place stay.)
void exitCleanlyOnSignals();

} // namespace trellis

#endif // TRELLIS_SUPPORT_ATOMICFILE_H
