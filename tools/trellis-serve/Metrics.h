//===- Metrics.h - The server's Prometheus metrics --------------*- C++ -*-===//
//
// GET /metrics in Prometheus' text exposition format (version 0.0.4):
//   trellis_serve_queue_depth                 gauge
//   trellis_serve_jobs_total{state}           counter: done, failed, cancelled
//   trellis_serve_requests_rejected_total{reason}  counter: invalid,
//   queue_full,
//                                             unauthorized, too_large
//   trellis_serve_steps_total{stage}          counter: sampler steps run
//   trellis_serve_stage_seconds{stage}        histogram per stage function
//   trellis_serve_generation_seconds          histogram, submitted → done
//   trellis_serve_device_memory_bytes{device} gauge (GPU memory in use after
//                                             the last run on that device)
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_TOOLS_SERVE_METRICS_H
#define TRELLIS_TOOLS_SERVE_METRICS_H

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace trellis::serve {

class Metrics {
public:
  void jobEnded(const std::string &state, double seconds);
  void rejected(const std::string &reason);
  void stage(const std::string &stage, double seconds);
  void step(const std::string &stage);
  void deviceMemory(const std::string &device, double bytes);
  /// The exposition text; `queueDepth` is read by the caller.
  std::string render(size_t queueDepth);

private:
  struct Histogram {
    std::vector<uint64_t> buckets; // cumulative at render time
    uint64_t count = 0;
    double sum = 0;
  };
  void observe(Histogram &h, double seconds);

  std::mutex mu_;
  std::map<std::string, uint64_t> jobs_, rejected_, steps_;
  std::map<std::string, Histogram> stages_;
  Histogram generation_;
  std::map<std::string, double> memory_;
};

} // namespace trellis::serve

#endif // TRELLIS_TOOLS_SERVE_METRICS_H
