// kernel_trace: where the GPU time of a benchmark goes, kernel by kernel,
// including the idle gaps between kernels that per-op event timings cannot
// see. A CUPTI injection library (the mechanism profilers use): CUDA loads it
// at initialization when CUDA_INJECTION64_PATH names it.
//
//   CUDA_INJECTION64_PATH=build-gpu/libkernel_trace.so
//   KERNEL_TRACE_WINDOW_MS=480 build-gpu/trellis-ss-bench --exe ... --reps 1
//   (both variables in the environment of the benchmark)
//
// At exit it prints, for the activities (kernels, copies, sets) that start
// within the last KERNEL_TRACE_WINDOW_MS of GPU time (default: all): the span,
// the busy time, the idle time between consecutive activities (total,
// median, p90) and the kernels by total time, with each kernel's share of the
// busy time (an interval where k activities run is split k ways, so the shares
// add up to the busy time even when streams overlap). KERNEL_TRACE_CSV=FILE
// also writes every activity of the window (start_ns, end_ns, name) for
// offline analysis. Build: bench/tools/build.sh.
#include <cupti.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

struct Activity {
  uint64_t start, end;
  std::string name;
};
std::vector<Activity> *activities = nullptr;

#define CUPTI_CHECK(call)                                                      \
  do {                                                                         \
    CUptiResult r = (call);                                                    \
    if (r != CUPTI_SUCCESS) {                                                  \
      const char *msg = nullptr;                                               \
      cuptiGetResultString(r, &msg);                                           \
      std::fprintf(stderr, "kernel_trace: %s failed: %s\n", #call,             \
                   msg ? msg : "?");                                           \
    }                                                                          \
  } while (0)

void CUPTIAPI bufferRequested(uint8_t **buffer, size_t *size,
                              size_t *maxNumRecords) {
  *size = size_t(32) << 20;
  *buffer = static_cast<uint8_t *>(std::aligned_alloc(8, *size));
  *maxNumRecords = 0;
}

void CUPTIAPI bufferCompleted(CUcontext, uint32_t, uint8_t *buffer, size_t,
                              size_t validSize) {
  CUpti_Activity *record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, validSize, &record) ==
         CUPTI_SUCCESS) {
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      auto *k = reinterpret_cast<CUpti_ActivityKernel10 *>(record);
      activities->push_back({k->start, k->end, k->name ? k->name : "?"});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto *m = reinterpret_cast<CUpti_ActivityMemcpy6 *>(record);
      activities->push_back({m->start, m->end, "[memcpy]"});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto *m = reinterpret_cast<CUpti_ActivityMemset4 *>(record);
      activities->push_back({m->start, m->end, "[memset]"});
      break;
    }
    default:
      break;
    }
  }
  std::free(buffer);
}

void report() {
  CUPTI_CHECK(cuptiActivityFlushAll(1));
  std::vector<Activity> &all = *activities;
  if (all.empty()) {
    std::fprintf(stderr, "kernel_trace: no GPU activity recorded\n");
    return;
  }
  std::sort(all.begin(), all.end(), [](const Activity &a, const Activity &b) {
    return a.start < b.start;
  });
  uint64_t last = 0;
  for (const Activity &a : all)
    last = std::max(last, a.end);
  uint64_t from = 0;
  if (const char *w = std::getenv("KERNEL_TRACE_WINDOW_MS"))
    from = last - std::min<uint64_t>(last, uint64_t(std::atof(w) * 1e6));
  std::vector<const Activity *> win;
  for (const Activity &a : all)
    if (a.start >= from)
      win.push_back(&a);
  if (win.empty())
    return;
  uint64_t busy = 0, idle = 0, frontier = win.front()->start;
  std::vector<uint64_t> gaps;
  std::map<std::string, std::pair<uint64_t, int>> byName;
  for (const Activity *a : win) {
    uint64_t gap = a->start > frontier ? a->start - frontier : 0;
    gaps.push_back(gap);
    idle += gap;
    if (a->end > frontier) {
      busy += a->end - std::max(a->start, frontier);
      frontier = a->end;
    }
    auto &e = byName[a->name.substr(0, 80)];
    e.first += a->end - a->start;
    e.second += 1;
  }
  // Each activity's share of the busy time: sweep the start/end events.
  std::map<std::string, double> share;
  {
    std::vector<std::pair<uint64_t, int>> events; // (time, +index+1 / -index-1)
    for (size_t i = 0; i < win.size(); ++i) {
      events.push_back({win[i]->start, int(i) + 1});
      events.push_back({win[i]->end, -int(i) - 1});
    }
    std::sort(events.begin(), events.end(), [](const auto &a, const auto &b) {
      return a.first != b.first ? a.first < b.first : a.second < b.second;
    });
    std::vector<int> active;
    uint64_t prev = events.empty() ? 0 : events.front().first;
    for (const auto &[t, id] : events) {
      if (!active.empty() && t > prev)
        for (int i : active)
          share[win[i]->name.substr(0, 80)] +=
              double(t - prev) / double(active.size());
      prev = t;
      if (id > 0)
        active.push_back(id - 1);
      else
        active.erase(std::find(active.begin(), active.end(), -id - 1));
    }
  }
  if (const char *csv = std::getenv("KERNEL_TRACE_CSV")) {
    if (FILE *f = std::fopen(csv, "w")) {
      std::fprintf(f, "start_ns,end_ns,name\n");
      for (const Activity *a : win)
        std::fprintf(f, "%llu,%llu,\"%s\"\n",
                     (unsigned long long)(a->start - win.front()->start),
                     (unsigned long long)(a->end - win.front()->start),
                     a->name.c_str());
      std::fclose(f);
    }
  }
  std::sort(gaps.begin(), gaps.end());
  const double span = double(frontier - win.front()->start) / 1e6;
  std::printf("\nkernel_trace: %zu GPU activities in the window: span %.2f ms, "
              "busy %.2f ms, idle between activities %.2f ms "
              "(gap median %.2f us, p90 %.2f us)\n",
              win.size(), span, double(busy) / 1e6, double(idle) / 1e6,
              double(gaps[gaps.size() / 2]) / 1e3,
              double(gaps[gaps.size() * 9 / 10]) / 1e3);
  std::vector<std::pair<std::string, std::pair<uint64_t, int>>> rows(
      byName.begin(), byName.end());
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.first > b.second.first;
  });
  std::printf("| ms | share of busy ms | calls | us/call | kernel |\n"
              "|---|---|---|---|---|\n");
  for (size_t i = 0; i < rows.size() && i < 40; ++i)
    std::printf("| %.2f | %.2f | %d | %.2f | %s |\n",
                double(rows[i].second.first) / 1e6, share[rows[i].first] / 1e6,
                rows[i].second.second,
                double(rows[i].second.first) / 1e3 / rows[i].second.second,
                rows[i].first.c_str());
  std::fflush(stdout);
}

} // namespace

extern "C" int InitializeInjection() {
  activities = new std::vector<Activity>();
  activities->reserve(size_t(1) << 20);
  CUPTI_CHECK(cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted));
  CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
  std::atexit(report);
  return 1;
}
