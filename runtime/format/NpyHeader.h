//===- NpyHeader.h - The header of a .npy array (private) -----------------===//
//
// What the .npy header of an array declares, parsed on its own so that a
// reader can check an array's size before it has (or inflates) the data:
// the .npz reader bounds every member by its header.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_FORMAT_NPYHEADER_H
#define TRELLIS_RUNTIME_FORMAT_NPYHEADER_H

#include "trellis/Support/HostTensor.h"
#include "trellis/Support/Result.h"

#include <cstdint>
#include <string>

namespace trellis::format {

/// The fixed prefix a .npy header starts with, enough to know the header's
/// length: magic (6), version (2), length (2 for version 1.0, else 4).
inline constexpr size_t kNpyPrefixMax = 12;

/// An array's layout as its .npy header declares it.
struct NpyLayout {
  DType dtype = DType::F32;
  Shape shape;
  std::string descr;
  /// Bytes of the header: prefix, dict and padding; the data follows.
  uint64_t headerBytes = 0;
  /// Bytes of the array data (shape x dtype).
  uint64_t dataBytes = 0;
};

/// The length of the whole header (prefix + dict) from the first `size`
/// bytes of a .npy file, which must hold the prefix (10 or 12 bytes).
Result<uint64_t> npyHeaderBytes(const void *data, size_t size,
                                const std::string &what);

/// Parses the header at the start of `data`; `size` must cover at least the
/// whole header (npyHeaderBytes). Errors name `what`.
Result<NpyLayout> parseNpyHeader(const void *data, size_t size,
                                 const std::string &what);

} // namespace trellis::format

#endif // TRELLIS_RUNTIME_FORMAT_NPYHEADER_H
