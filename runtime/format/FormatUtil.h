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

/// A whole file mapped read-only; `keepAlive` unmaps it when the last owner
/// goes away. An empty file has size 0 and a valid (non-null) data pointer.
struct MappedFile {
  std::shared_ptr<const void> keepAlive;
  const uint8_t *data = nullptr;
  size_t size = 0;
};

/// Maps `path` (a regular file) read-only.
Result<MappedFile> mapFile(const std::string &path);

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
