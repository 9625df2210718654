//===- FormatUtil.h - Helpers shared by the file-format readers (private) -===//
#ifndef TRELLIS_RUNTIME_FORMAT_FORMATUTIL_H
#define TRELLIS_RUNTIME_FORMAT_FORMATUTIL_H

#include "trellis/Support/HostTensor.h"
#include "trellis/Support/Result.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace trellis::format {

/// What fstat says of an open file that a reader relies on staying the
/// same while it reads: its size and modification time.
struct FileStamp {
  uint64_t size = 0;
  int64_t mtimeNs = 0;
  bool operator==(const FileStamp &) const = default;
};

/// The stamp of an open file descriptor.
Result<FileStamp> stampOf(int fd, const std::string &path);

/// A whole file mapped read-only; `keepAlive` unmaps it when the last owner
/// goes away. An empty file has size 0 and a valid (non-null) data pointer.
struct MappedFile {
  std::shared_ptr<const void> keepAlive;
  const uint8_t *data = nullptr;
  size_t size = 0;
  /// With mapFile(path, true): the open descriptor (the caller closes it)
  /// and the file's stamp when it was mapped.
  int fd = -1;
  FileStamp stamp;
};

/// Maps `path` (a regular file) read-only; with `keepOpen` the descriptor
/// stays open for checked reads (MappedFile::fd).
Result<MappedFile> mapFile(const std::string &path, bool keepOpen = false);

/// Quotes a string taken from a file for an error message: '...' with
/// control and non-ASCII bytes escaped as \xHH, cut after `maxLen` bytes.
std::string quote(std::string_view s, size_t maxLen = 120);

/// Whether `s` is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF).
bool isValidUtf8(std::string_view s);

/// a * b, or false on overflow.
inline bool checkedMul(uint64_t a, uint64_t b, uint64_t &out) {
  return !__builtin_mul_overflow(a, b, &out);
}

/// The byte size of `shape` with `itemSize`-byte elements. False when a
/// dimension is negative, or when the product of the non-zero dimensions
/// times itemSize exceeds INT64_MAX, so that element counts, strides and
/// byte offsets fit in int64 even for empty tensors (NumPy's rule).
inline bool shapeBytes(const Shape &shape, uint64_t itemSize, uint64_t &bytes) {
  uint64_t product = itemSize;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0)
      return false;
    if (d == 0)
      empty = true;
    else if (!checkedMul(product, uint64_t(d), product) ||
             product > uint64_t(INT64_MAX))
      return false;
  }
  bytes = empty ? 0 : product;
  return true;
}

} // namespace trellis::format

#endif // TRELLIS_RUNTIME_FORMAT_FORMATUTIL_H
