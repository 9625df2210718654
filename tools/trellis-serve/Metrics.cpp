//===- Metrics.cpp - The server's Prometheus metrics ----------------------===//
#include "tools/trellis-serve/Metrics.h"

#include <sstream>

namespace trellis::serve {

namespace {
/// Upper bounds (seconds) of the histograms' buckets: a tiny CPU generation
/// takes about a second, an image-large GPU stage tenths to seconds.
const std::vector<double> kBounds = {0.05, 0.1, 0.25, 0.5, 1,   2.5,
                                     5,    10,  25,   60,  120, 300};

std::string le(double b) {
  std::ostringstream s;
  s << b;
  return s.str();
}
} // namespace

void Metrics::observe(Histogram &h, double seconds) {
  if (h.buckets.empty())
    h.buckets.assign(kBounds.size(), 0);
  for (size_t i = 0; i < kBounds.size(); ++i)
    if (seconds <= kBounds[i]) {
      ++h.buckets[i];
      break;
    }
  ++h.count;
  h.sum += seconds;
}

void Metrics::jobEnded(const std::string &state, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++jobs_[state];
  if (state == "done")
    observe(generation_, seconds);
}

void Metrics::rejected(const std::string &reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++rejected_[reason];
}

void Metrics::stage(const std::string &stage, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  observe(stages_[stage], seconds);
}

void Metrics::step(const std::string &stage) {
  std::lock_guard<std::mutex> lock(mu_);
  ++steps_[stage];
}

void Metrics::deviceMemory(const std::string &device, double bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  memory_[device] = bytes;
}

std::string Metrics::render(size_t queueDepth) {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream o;
  auto histogram = [&](const std::string &name, const std::string &labels,
                       const Histogram &h) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kBounds.size(); ++i) {
      cumulative += h.buckets.empty() ? 0 : h.buckets[i];
      o << name << "_bucket{" << labels << (labels.empty() ? "" : ",")
        << "le=\"" << le(kBounds[i]) << "\"} " << cumulative << "\n";
    }
    o << name << "_bucket{" << labels << (labels.empty() ? "" : ",")
      << "le=\"+Inf\"} " << h.count << "\n";
    std::string braces = labels.empty() ? "" : "{" + labels + "}";
    o << name << "_sum" << braces << " " << h.sum << "\n";
    o << name << "_count" << braces << " " << h.count << "\n";
  };
  o << "# HELP trellis_serve_queue_depth Jobs waiting for an engine.\n"
    << "# TYPE trellis_serve_queue_depth gauge\n"
    << "trellis_serve_queue_depth " << queueDepth << "\n";
  o << "# HELP trellis_serve_jobs_total Jobs that ended, by final state.\n"
    << "# TYPE trellis_serve_jobs_total counter\n";
  for (const char *s : {"done", "failed", "cancelled"})
    o << "trellis_serve_jobs_total{state=\"" << s << "\"} "
      << (jobs_.count(s) ? jobs_.at(s) : 0) << "\n";
  o << "# HELP trellis_serve_requests_rejected_total Requests refused, by "
       "reason.\n"
    << "# TYPE trellis_serve_requests_rejected_total counter\n";
  for (const char *r : {"invalid", "queue_full", "unauthorized", "too_large"})
    o << "trellis_serve_requests_rejected_total{reason=\"" << r << "\"} "
      << (rejected_.count(r) ? rejected_.at(r) : 0) << "\n";
  o << "# HELP trellis_serve_steps_total Sampler steps run, by stage.\n"
    << "# TYPE trellis_serve_steps_total counter\n";
  for (const auto &[stage, n] : steps_)
    o << "trellis_serve_steps_total{stage=\"" << stage << "\"} " << n << "\n";
  o << "# HELP trellis_serve_stage_seconds Wall time of each pipeline stage "
       "function.\n"
    << "# TYPE trellis_serve_stage_seconds histogram\n";
  for (const auto &[stage, h] : stages_)
    histogram("trellis_serve_stage_seconds", "stage=\"" + stage + "\"", h);
  o << "# HELP trellis_serve_generation_seconds Time from submission to done.\n"
    << "# TYPE trellis_serve_generation_seconds histogram\n";
  histogram("trellis_serve_generation_seconds", "", generation_);
  o << "# HELP trellis_serve_device_memory_bytes GPU memory in use after the "
       "device's last run.\n"
    << "# TYPE trellis_serve_device_memory_bytes gauge\n";
  for (const auto &[device, bytes] : memory_)
    o << "trellis_serve_device_memory_bytes{device=\"" << device << "\"} "
      << bytes << "\n";
  return o.str();
}

} // namespace trellis::serve
