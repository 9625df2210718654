//===- AtomicFile.cpp -----------------------------------------------------===//
#include "trellis/Support/AtomicFile.h"

#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace trellis {

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)),
      tmpPath_(path_ + ".tmp-" + std::to_string(::getpid())) {
  file_ = std::fopen(tmpPath_.c_str(), "wb");
  if (!file_)
    status_ = Error{"cannot create '" + path_ + "': " + std::strerror(errno)};
}

AtomicFile::~AtomicFile() {
  if (file_)
    std::fclose(file_);
  if (!committed_)
    std::remove(tmpPath_.c_str());
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
  return Status::ok();
}

} // namespace trellis
