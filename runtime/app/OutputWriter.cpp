//===- OutputWriter.cpp - Output files written off the critical path ------===//
//
// See OutputWriter.h. One thread, one FIFO queue; jobs finish in submission
// order, so "finished_ >= ticket" means every job before the ticket is done.
//
//===----------------------------------------------------------------------===//
#include "trellis/Runtime/OutputWriter.h"

#include <algorithm>

namespace trellis {

OutputWriter::OutputWriter() : thread_([this] { loop(); }) {}

OutputWriter::~OutputWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void OutputWriter::submit(std::string file, Job job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t index = submitted_++;
    queue_.emplace_back(
        index, [file = std::move(file), job = std::move(job)]() -> Status {
          Status s = Status::ok();
          try {
            s = job();
          } catch (const std::exception &e) {
            s = Error{std::string("internal error: ") + e.what()};
          }
          if (!s && s.message().find(file) == std::string::npos)
            return Error{"writing " + file + ": " + s.message()};
          return s;
        });
  }
  wake_.notify_one();
}

uint64_t OutputWriter::mark() {
  std::lock_guard<std::mutex> lock(mutex_);
  return submitted_;
}

Status OutputWriter::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return finished_ >= ticket; });
  auto first = std::find_if(errors_.begin(), errors_.end(),
                            [&](const auto &e) { return e.first < ticket; });
  if (first == errors_.end())
    return Status::ok();
  std::string message = first->second;
  errors_.erase(std::remove_if(errors_.begin(), errors_.end(),
                               [&](const auto &e) { return e.first < ticket; }),
                errors_.end());
  return Error{message};
}

void OutputWriter::discard(uint64_t from, uint64_t to) {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return finished_ >= to; });
  errors_.erase(std::remove_if(errors_.begin(), errors_.end(),
                               [&](const auto &e) {
                                 return e.first >= from && e.first < to;
                               }),
                errors_.end());
}

void OutputWriter::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty())
      return; // stopping, and nothing left to write
    auto [index, job] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Status s = job(); // never throws: submit() wraps it
    lock.lock();
    if (!s)
      errors_.emplace_back(index, s.message());
    finished_ = index + 1;
    done_.notify_all();
  }
}

} // namespace trellis
