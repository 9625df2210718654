//===- Jobs.h - Queued generations and the engines that run them -*- C++
//-*-===//
//
// A Job is one generation: its request, its state (queued → running → done
// | failed | cancelled), its event log (what GET /v1/jobs/{id}/events
// streams, kept whole so that a late subscriber sees every event from the
// start) and its files in <work>/<id>/.
//
// The Scheduler owns one Engine per device (a GPU ordinal, or the CPU
// reference) and one worker thread per engine; workers take jobs in
// submission order from a bounded queue. A job's files are written by the
// engine's writer thread while the next job computes (as trellis.exe does);
// the worker's finisher thread waits for them and only then marks the job
// done. A job is cancelled between sampler
// steps (PipelineObserver::cancelled) or when its deadline passes; an engine
// whose run failed for another reason is rebuilt before its next job (its
// state is unknown). Finished jobs and their files are dropped `keep`
// seconds after they end.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_TOOLS_SERVE_JOBS_H
#define TRELLIS_TOOLS_SERVE_JOBS_H

#include "tools/trellis-serve/JobRequest.h"
#include "tools/trellis-serve/Metrics.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace trellis::serve {

enum class JobState { Queued, Running, Done, Failed, Cancelled };
const char *stateName(JobState s);

/// One server-sent event: its type and its JSON data.
struct JobEvent {
  std::string type;
  nlohmann::json data;
};

class Job {
public:
  Job(std::string id, JobSpec spec, std::string dir,
      std::chrono::steady_clock::time_point deadline);

  const std::string id;
  const std::string dir; ///< the job's files
  const std::chrono::steady_clock::time_point submittedAt;
  JobSpec spec;

  /// {"id", "state", "files", "error"?, "voxels"?, "formats", "seed"}.
  nlohmann::json describe() const;
  JobState state() const;
  bool finished() const;
  /// The files written, by name (a failed or cancelled job has none).
  std::vector<std::string> files() const;

  /// Appends an event and wakes the subscribers.
  void publish(std::string type, nlohmann::json data);
  /// Events from index `from` on; waits up to `timeout` for one when there
  /// is none yet. `ended` is set when the log is complete (done / failed).
  std::vector<JobEvent>
  eventsFrom(size_t from, std::chrono::milliseconds timeout, bool &ended) const;
  /// Waits until the job has finished (or `timeout` passes).
  bool waitFinished(std::chrono::milliseconds timeout) const;

  /// Asks a queued or running job to stop; false when it had finished.
  bool cancel();
  bool cancelRequested() const { return cancel_.load(); }
  bool pastDeadline() const {
    return std::chrono::steady_clock::now() > deadline_;
  }

  // The scheduler's transitions.
  void setRunning();
  /// The final state and its event (done: the files and `seconds`, the
  /// run's wall time; else failed: the error and the state).
  void finish(JobState state, std::vector<std::string> files, std::string error,
              double seconds = 0);
  void setVoxels(int64_t n);
  std::chrono::steady_clock::time_point endedAt() const;

private:
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  JobState state_ = JobState::Queued;
  std::vector<JobEvent> events_;
  std::vector<std::string> files_;
  std::string error_;
  int64_t voxels_ = -1;
  std::atomic<bool> cancel_{false};
  std::chrono::steady_clock::time_point deadline_, ended_;
};

struct SchedulerOptions {
  std::string modelDir;
  std::string workDir;
  /// GPU ordinals, one engine each; empty: one engine on the CPU reference.
  std::vector<int> devices;
  size_t queueLimit = 16;
  std::chrono::seconds keep{3600}, deadline{600};
  /// Each engine's device memory budget (0: its GPU's free memory) and the
  /// voxel count its plan assumes (EngineOptions::memoryPlanVoxels).
  size_t memoryBudget = 0;
  int64_t maxVoxels = 32768;
};

class Scheduler {
public:
  Scheduler(const LoadedBundle &bundle, SchedulerOptions options,
            Metrics &metrics);
  ~Scheduler();

  /// Creates the engines (one per device), then starts the workers. The
  /// error names the device that failed.
  Status start();
  /// True once every engine is up (GET /v1/health/ready).
  bool ready() const { return ready_.load(); }

  /// Queues a job; nullptr when the queue is full (429).
  std::shared_ptr<Job> submit(JobSpec spec);
  std::shared_ptr<Job> find(const std::string &id);
  /// Cancels: a queued job at once, a running one at its next sampler step.
  /// False when there is no such job.
  bool cancel(const std::string &id);

  size_t queueDepth();
  /// Stops taking jobs from the queue once the running ones end, cancels the
  /// queued ones, joins the workers.
  void shutdown();

private:
  struct Worker;
  void work(Worker &w);
  void run(Worker &w, const std::shared_ptr<Job> &job);
  void finishing(Worker &w);
  void expire();
  Status createEngine(Worker &w);

  const LoadedBundle &bundle_;
  SchedulerOptions options_;
  Metrics &metrics_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::thread sweeper_;
  std::mutex mu_;
  std::condition_variable wake_;      ///< the workers: a job or stopping
  std::condition_variable sweepWake_; ///< the sweeper: stopping
  std::deque<std::shared_ptr<Job>> queue_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;
  bool stopping_ = false;
  std::atomic<bool> ready_{false};
  uint64_t nextId_ = 0;
};

} // namespace trellis::serve

#endif // TRELLIS_TOOLS_SERVE_JOBS_H
