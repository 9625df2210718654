//===- AtomicFile.cpp -----------------------------------------------------===//
#include "trellis/Support/AtomicFile.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <unistd.h>

namespace trellis {

namespace {

/// The temporary files open now, readable from a signal handler: a slot's
/// path is complete before `state` says so (release / acquire).
constexpr int kSlots = 256;
constexpr size_t kMaxPath = 4096;
struct TemporarySlot {
  std::atomic<int> state{0}; // 0 free, 1 being filled or emptied, 2 a path
  char path[kMaxPath];
};
TemporarySlot temporaries[kSlots];

int registerTemporary(const std::string &path) {
  if (path.size() >= kMaxPath)
    return -1;
  for (int i = 0; i < kSlots; ++i) {
    int free = 0;
    if (temporaries[i].state.compare_exchange_strong(free, 1)) {
      std::memcpy(temporaries[i].path, path.c_str(), path.size() + 1);
      temporaries[i].state.store(2, std::memory_order_release);
      return i;
    }
  }
  return -1; // more than kSlots open at once: not removed on a signal
}

void unregisterTemporary(int slot) {
  if (slot >= 0)
    temporaries[slot].state.store(0, std::memory_order_release);
}

extern "C" void removeTemporariesAndExit(int signal) {
  for (TemporarySlot &t : temporaries)
    if (t.state.load(std::memory_order_acquire) == 2)
      ::unlink(t.path); // async-signal-safe
  ::_exit(128 + signal);
}

} // namespace

void exitCleanlyOnSignals() {
  struct sigaction action = {};
  action.sa_handler = removeTemporariesAndExit;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGHUP})
    ::sigaction(signal, &action, nullptr);
}

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)),
      tmpPath_(path_ + ".tmp-" + std::to_string(::getpid())) {
  registered_ = registerTemporary(tmpPath_);
  file_ = std::fopen(tmpPath_.c_str(), "wb");
  if (!file_)
    status_ = Error{"cannot create '" + path_ + "': " + std::strerror(errno)};
}

AtomicFile::~AtomicFile() {
  if (file_)
    std::fclose(file_);
  if (!committed_)
    std::remove(tmpPath_.c_str());
  unregisterTemporary(registered_);
}

void AtomicFile::write(const void *data, size_t size) {
  if (!status_ || size == 0)
    return;
  if (std::fwrite(data, 1, size, file_) != size)
    status_ = Error{"cannot write '" + path_ + "': " + std::strerror(errno)};
}

Status AtomicFile::commit() {
  if (!status_)
    return status_;
  int rc = std::fflush(file_);
  rc |= std::fclose(file_);
  file_ = nullptr;
  if (rc != 0)
    return Error{"cannot write '" + path_ + "': " + std::strerror(errno)};
  if (std::rename(tmpPath_.c_str(), path_.c_str()) != 0)
    return Error{"cannot rename '" + tmpPath_ + "' to '" + path_ +
                 "': " + std::strerror(errno)};
  committed_ = true;
  unregisterTemporary(registered_);
  registered_ = -1;
  return Status::ok();
}

} // namespace trellis
