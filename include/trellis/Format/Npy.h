//===- Npy.h - NumPy .npy and .npz files ----------------------------------===//
//
// The conditioning input and most outputs of trellis.exe are NumPy files.
//
// .npy: "\x93NUMPY", version (1.0, 2.0 or 3.0), header length (u16 for 1.0,
// u32 otherwise), a Python dict literal
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and a newline, then the C-ordered array bytes.
// Supported descrs: <f2 <f4 <f8 |i1 |u1 <i2 <i4 <i8 |b1 (for one-byte types
// any byte-order mark is accepted, as NumPy does). Big-endian, object,
// structured and Fortran-ordered arrays are refused with a message saying so.
// The writer produces exactly the bytes of numpy.save.
//
// .npz: a zip archive with one "<key>.npy" member per array, stored
// (numpy.savez) or deflate-compressed (numpy.savez_compressed).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_FORMAT_NPY_H
#define TRELLIS_FORMAT_NPY_H

#include "trellis/Support/HostTensor.h"
#include "trellis/Support/Result.h"

#include <string>
#include <utility>
#include <vector>

namespace trellis {

/// Reads a whole .npy file into an owned tensor.
Result<HostTensor> readNpy(const std::string &path);

/// Parses the bytes of a .npy file into an owned tensor. `whatForErrors`
/// names the source in messages (a path, or "a.npz member 'x.npy'").
Result<HostTensor> parseNpy(const void *data, size_t size,
                            const std::string &whatForErrors);

/// The NumPy descr of a dtype ("<f4", "|b1", ...); fails for BF16, which
/// NumPy has no type for.
Result<std::string> npyDescr(DType dtype);

/// The complete header numpy.save writes for an array of this dtype and
/// shape (magic, version, length, dict, padding): the data follows directly.
Result<std::string> npyHeader(DType dtype, const Shape &shape);

/// Writes a .npy file (through an AtomicFile), byte-identical to numpy.save.
Status writeNpy(const std::string &path, const HostTensor &tensor);

using NamedTensors = std::vector<std::pair<std::string, HostTensor>>;

/// Reads every array of an .npz file, in archive order; keys are the member
/// names without ".npy".
Result<NamedTensors> readNpz(const std::string &path);

/// Parses the bytes of an .npz file (see readNpz).
Result<NamedTensors> parseNpz(const void *data, size_t size,
                              const std::string &whatForErrors);

/// Writes an .npz file like numpy.savez (compress = false: stored members) or
/// numpy.savez_compressed (compress = true: deflate), members "<key>.npy" in
/// the given order, through an AtomicFile. Keys must be unique and non-empty.
Status writeNpz(const std::string &path, const NamedTensors &entries,
                bool compress);

} // namespace trellis

#endif // TRELLIS_FORMAT_NPY_H
