//===- BatchOutput.h - A manifest's jobs as resumable folders ---*- C++ -*-===//
//
// Private to runtime/app. With --inputs, trellis.exe is a batch worker (one
// Slurm array task, say): it takes its shard of the manifest and writes each
// job's folder atomically, so that a task killed at any point and run again
// neither loses nor redoes finished work:
//
//   OUT/.<id>.tmp-<host>-<pid>/  a job being computed (removed by a later
//                          run on the same host once that process is gone;
//                          the job starts again)
//   OUT/<id>/done.json     complete: the outputs and their record (timings,
//                          voxels, versions, the program's CRC-32)
//   OUT/<id>/failed.json   the job could not run (its message)
//
// A folder appears by renaming the finished temporary one. A later run skips
// the ids that have a record (--retry-failed: not the failed ones).
// `trellis.exe --summarize OUT` merges the records into one table.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_APP_BATCHOUTPUT_H
#define TRELLIS_RUNTIME_APP_BATCHOUTPUT_H

#include "trellis/Support/Result.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>

namespace trellis {

/// Which lines of the manifest this process takes: index ≡ shard (mod count).
struct Shard {
  int64_t index = 0, count = 1;
  std::string str() const {
    return std::to_string(index) + "/" + std::to_string(count);
  }
};

/// --shard I/N, else SLURM_ARRAY_TASK_ID − SLURM_ARRAY_TASK_MIN of
/// SLURM_ARRAY_TASK_COUNT when Slurm set them, else 0/1.
Result<Shard> shardOf(const std::string &option);

enum class JobRecord { None, Done, Failed };
/// The record in a job's final folder (OUT/<id>).
JobRecord recordOf(const std::string &jobDir);

/// Removes the temporary job folders in `out` of this host's processes that
/// no longer run.
Status removeStaleTemporaries(const std::string &out);

/// A new, empty OUT/.<id>.tmp-<host>-<pid>.
Result<std::string> makeTemporary(const std::string &out,
                                  const std::string &id);

/// Writes `record` as `<tmp>/<name>` and renames `tmp` to `jobDir`
/// (replacing the folder of an earlier failed attempt).
Status commitJob(const std::string &tmp, const std::string &jobDir,
                 const std::string &name, const nlohmann::json &record);

/// The CRC-32 (hex) of a file's bytes: the compiled program's identity.
std::string fileCrc32(const std::string &path);

/// "2026-11-26T17:03:04Z".
std::string utcNow();

/// The table of `trellis.exe --summarize OUT`; 1 when a job failed, 2 when
/// `out` has no record at all.
int summarizeBatch(const std::string &out, std::ostream &os);

} // namespace trellis

#endif // TRELLIS_RUNTIME_APP_BATCHOUTPUT_H
