//===- Jobs.cpp - Queued generations and the engines that run them --------===//
#include "tools/trellis-serve/Jobs.h"

#include "trellis/Runtime/GpuExecutor.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <random>

namespace trellis::serve {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

const char *stateName(JobState s) {
  switch (s) {
  case JobState::Queued:
    return "queued";
  case JobState::Running:
    return "running";
  case JobState::Done:
    return "done";
  case JobState::Failed:
    return "failed";
  case JobState::Cancelled:
    return "cancelled";
  }
  return "unknown";
}

//===----------------------------------------------------------------------===//
// Job
//===----------------------------------------------------------------------===//

Job::Job(std::string id, JobSpec spec, std::string dir,
         Clock::time_point deadline)
    : id(std::move(id)), dir(std::move(dir)), submittedAt(Clock::now()),
      spec(std::move(spec)), deadline_(deadline) {}

json Job::describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  json j = {{"id", id},
            {"state", stateName(state_)},
            {"files", files_},
            {"formats", spec.formats},
            {"seed", spec.request.seed}};
  if (!error_.empty())
    j["error"] = error_;
  if (voxels_ >= 0)
    j["voxels"] = voxels_;
  return j;
}

JobState Job::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

bool Job::finished() const {
  JobState s = state();
  return s != JobState::Queued && s != JobState::Running;
}

std::vector<std::string> Job::files() const {
  std::lock_guard<std::mutex> lock(mu_);
  return files_;
}

void Job::publish(std::string type, json data) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back({std::move(type), std::move(data)});
  }
  changed_.notify_all();
}

std::vector<JobEvent> Job::eventsFrom(size_t from,
                                      std::chrono::milliseconds timeout,
                                      bool &ended) const {
  std::unique_lock<std::mutex> lock(mu_);
  auto done = [&] {
    return state_ != JobState::Queued && state_ != JobState::Running;
  };
  changed_.wait_for(lock, timeout,
                    [&] { return events_.size() > from || done(); });
  std::vector<JobEvent> out;
  for (size_t i = from; i < events_.size(); ++i)
    out.push_back(events_[i]);
  ended = done();
  return out;
}

bool Job::waitFinished(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, timeout, [&] {
    return state_ != JobState::Queued && state_ != JobState::Running;
  });
}

bool Job::cancel() {
  if (finished())
    return false;
  cancel_ = true;
  return true;
}

void Job::setRunning() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = JobState::Running;
  }
  changed_.notify_all();
}

void Job::setVoxels(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  voxels_ = n;
}

void Job::finish(JobState state, std::vector<std::string> files,
                 std::string error, double seconds) {
  json event;
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = state;
    files_ = std::move(files);
    error_ = std::move(error);
    ended_ = Clock::now();
    // The last event, in the same critical section as the state: a
    // subscriber that sees the job finished has seen its last event too.
    if (state == JobState::Done)
      events_.push_back({"done", {{"files", files_}, {"seconds", seconds}}});
    else
      events_.push_back(
          {"failed", {{"error", error_}, {"state", stateName(state)}}});
  }
  changed_.notify_all();
}

Clock::time_point Job::endedAt() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ended_;
}

//===----------------------------------------------------------------------===//
// Scheduler
//===----------------------------------------------------------------------===//

struct Scheduler::Worker {
  int device = -1; ///< GPU ordinal, -1: the CPU reference
  std::string name;
  std::unique_ptr<Engine> engine;
  bool rebuild = false; ///< the last run failed: the engine's state is unknown
  std::thread thread;

  /// Jobs whose run returned and whose files are being written, in order
  /// (the finisher thread's queue).
  struct Writing {
    std::shared_ptr<Job> job;
    GenerationStats stats;
    double seconds;
  };
  std::thread finisher;
  std::mutex mu;
  std::condition_variable changed;
  std::deque<Writing> writing;
  bool stop = false;
  /// Waits until the finisher has settled every job handed to it.
  void waitWritten() {
    std::unique_lock<std::mutex> lock(mu);
    changed.wait(lock, [&] { return writing.empty(); });
  }
};

namespace {

/// Forwards a run's progress to its job's event log and the metrics, and
/// stops it between sampler steps when it was cancelled or is past its
/// deadline.
class JobObserver : public PipelineObserver {
public:
  JobObserver(Job &job, Metrics &metrics) : job_(job), metrics_(metrics) {}
  void stageBegin(const std::string &fn, const std::string &title) override {
    job_.publish("stage",
                 {{"stage", fn}, {"title", title}, {"phase", "begin"}});
  }
  void stageEnd(const std::string &fn, const std::string &title,
                double seconds) override {
    job_.publish("stage", {{"stage", fn},
                           {"title", title},
                           {"phase", "end"},
                           {"seconds", seconds}});
    metrics_.stage(fn, seconds);
  }
  void step(const std::string &fn, int64_t k, int64_t n) override {
    job_.publish("step", {{"stage", fn}, {"step", k}, {"steps", n}});
    metrics_.step(fn);
  }
  void coords(const HostTensor &coords) override {
    job_.setVoxels(coords.dim(0));
    job_.publish("coords", {{"voxels", coords.dim(0)}});
  }
  bool cancelled() const override {
    return job_.cancelRequested() || job_.pastDeadline();
  }

private:
  Job &job_;
  Metrics &metrics_;
};

std::string newJobId() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(rng()));
  return buf;
}

} // namespace

Scheduler::Scheduler(const LoadedBundle &bundle, SchedulerOptions options,
                     Metrics &metrics)
    : bundle_(bundle), options_(std::move(options)), metrics_(metrics) {}

Scheduler::~Scheduler() { shutdown(); }

Status Scheduler::createEngine(Worker &w) {
  EngineOptions eo;
  eo.modelDir = options_.modelDir;
  if (w.device < 0) {
    eo.gpu.mode = GpuMode::Off;
  } else {
    eo.gpu.mode = GpuMode::Require;
    eo.gpu.options.device = w.device;
    eo.gpu.options.memoryBudget = options_.memoryBudget;
    eo.memoryPlanVoxels = options_.maxVoxels;
    // The timed GEMM picks of earlier processes (trellis.exe's too): an
    // engine's first generation need not tune.
    eo.gpu.options.gemmTuningCache = defaultGemmTuningCache();
  }
  const std::string name = w.name;
  eo.notice = [name](const std::string &line) {
    std::cerr << "trellis-serve: " << name << ": " << line << "\n";
  };
  auto engine = Engine::create(bundle_, std::move(eo));
  if (!engine)
    return Error{name + ": " + engine.message()};
  w.engine = std::move(*engine);
  w.rebuild = false;
  return Status::ok();
}

Status Scheduler::start() {
  std::vector<int> devices = options_.devices;
  if (devices.empty())
    devices.push_back(-1);
  for (int d : devices) {
    auto w = std::make_unique<Worker>();
    w->device = d;
    w->name = d < 0 ? "cpu" : "cuda:" + std::to_string(d);
    TRELLIS_RETURN_IF_ERROR(createEngine(*w));
    std::cerr << "trellis-serve: engine ready on " << w->name << "\n";
    workers_.push_back(std::move(w));
  }
  for (auto &w : workers_) {
    w->finisher = std::thread([this, &w] { finishing(*w); });
    w->thread = std::thread([this, &w] { work(*w); });
  }
  sweeper_ = std::thread([this] { expire(); });
  ready_ = true;
  return Status::ok();
}

std::shared_ptr<Job> Scheduler::submit(JobSpec spec) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || queue_.size() >= options_.queueLimit)
    return nullptr;
  std::string id;
  do
    id = newJobId();
  while (jobs_.count(id));
  auto job = std::make_shared<Job>(id, std::move(spec),
                                   (fs::path(options_.workDir) / id).string(),
                                   Clock::now() + options_.deadline);
  queue_.push_back(job);
  jobs_[id] = job;
  job->publish("queued", {{"position", queue_.size()}});
  wake_.notify_one();
  return job;
}

std::shared_ptr<Job> Scheduler::find(const std::string &id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second;
}

bool Scheduler::cancel(const std::string &id) {
  std::shared_ptr<Job> job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end())
      return false;
    job = it->second;
    auto q = std::find(queue_.begin(), queue_.end(), job);
    if (q != queue_.end()) { // not started: it ends now
      queue_.erase(q);
      job->cancel();
      job->finish(JobState::Cancelled, {}, "cancelled before it started");
      metrics_.jobEnded("cancelled", 0);
      return true;
    }
  }
  job->cancel(); // running: stops at its next sampler step
  return true;
}

size_t Scheduler::queueDepth() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void Scheduler::work(Worker &w) {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty())
        break; // stopping
      job = queue_.front();
      queue_.pop_front();
    }
    if (w.rebuild) {
      w.waitWritten(); // the finisher still waits on the old engine's writer
      w.engine.reset();
      if (Status s = createEngine(w); !s) {
        job->finish(JobState::Failed, {},
                    "the engine could not be rebuilt: " + s.message());
        metrics_.jobEnded("failed", 0);
        continue;
      }
    }
    run(w, job);
  }
  {
    std::lock_guard<std::mutex> lock(w.mu);
    w.stop = true;
  }
  w.changed.notify_all();
  w.finisher.join(); // after the last job's files
}

void Scheduler::finishing(Worker &w) {
  for (;;) {
    Worker::Writing item;
    {
      std::unique_lock<std::mutex> lock(w.mu);
      w.changed.wait(lock, [&] { return w.stop || !w.writing.empty(); });
      if (w.writing.empty())
        return;
      item = w.writing.front();
    }
    Job &job = *item.job;
    if (Status written = w.engine->finishWrites(item.stats); !written) {
      // (finishWrites removed the generation's files.)
      job.finish(JobState::Failed, {},
                 "writing the files failed: " + written.message());
      metrics_.jobEnded("failed", item.seconds);
    } else {
      std::vector<std::string> files;
      std::error_code ec;
      for (const auto &entry : fs::directory_iterator(job.dir, ec))
        if (entry.is_regular_file())
          files.push_back(entry.path().filename().string());
      std::sort(files.begin(), files.end());
      job.finish(JobState::Done, std::move(files), "", item.seconds);
      metrics_.jobEnded(
          "done", std::chrono::duration<double>(Clock::now() - job.submittedAt)
                      .count());
    }
    {
      std::lock_guard<std::mutex> lock(w.mu);
      w.writing.pop_front();
    }
    w.changed.notify_all();
  }
}

void Scheduler::run(Worker &w, const std::shared_ptr<Job> &jobPtr) {
  Job &job = *jobPtr;
  const auto start = Clock::now();
  job.setRunning();
  GenerationRequest req = job.spec.request;
  req.outDir = job.dir;
  req.asyncWrites = true; // written while the next job computes
  JobObserver observer(job, metrics_);
  auto result = w.engine->run(req, &observer);
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  if (const GpuReport *report = w.engine->gpuReport())
    metrics_.deviceMemory(w.name, double(report->deviceBytesInUse));
  if (result) {
    {
      std::lock_guard<std::mutex> lock(w.mu);
      w.writing.push_back({jobPtr, w.engine->lastStats(), seconds});
    }
    w.changed.notify_all();
    return;
  }
  std::error_code ec;
  fs::remove_all(job.dir, ec); // a failed run leaves no files; nor its dir
  if (job.cancelRequested()) {
    job.finish(JobState::Cancelled, {}, "cancelled");
    metrics_.jobEnded("cancelled", seconds);
  } else if (job.pastDeadline()) {
    job.finish(JobState::Failed, {},
               "deadline exceeded (" +
                   std::to_string(options_.deadline.count()) +
                   " s; --deadline)");
    metrics_.jobEnded("failed", seconds);
  } else {
    job.finish(JobState::Failed, {}, result.message());
    metrics_.jobEnded("failed", seconds);
    w.rebuild = true; // the engine's state after a failed run is unknown
  }
}

void Scheduler::expire() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    sweepWake_.wait_for(lock, std::chrono::seconds(1));
    const auto now = Clock::now();
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      Job &job = *it->second;
      if (job.finished() && now - job.endedAt() > options_.keep) {
        std::error_code ec;
        fs::remove_all(job.dir, ec);
        it = jobs_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void Scheduler::shutdown() {
  std::deque<std::shared_ptr<Job>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && workers_.empty())
      return;
    stopping_ = true;
    dropped.swap(queue_);
  }
  for (auto &job : dropped) {
    job->cancel();
    job->finish(JobState::Cancelled, {}, "the server is shutting down");
    metrics_.jobEnded("cancelled", 0);
  }
  wake_.notify_all();
  sweepWake_.notify_all();
  for (auto &w : workers_)
    if (w->thread.joinable())
      w->thread.join(); // the running jobs finish
  if (sweeper_.joinable())
    sweeper_.join();
  workers_.clear();
}

} // namespace trellis::serve
