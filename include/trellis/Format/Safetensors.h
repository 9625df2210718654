//===- Safetensors.h - Mapped safetensors files and a streaming writer ----===//
//
// The weights of every TRELLIS checkpoint are `.safetensors` files:
//
//   [8 bytes: N, little-endian u64] [N bytes: JSON header] [data section]
//
// The header maps each tensor name to {"dtype", "shape", "data_offsets"}
// (offsets relative to the data section) plus an optional "__metadata__"
// string map. SafetensorsFile maps a file read-only and validates the header
// completely before anything is handed out; tensors are zero-copy views into
// the mapping, which stays alive as long as any view does, or owned copies
// made with checked reads (load(), read()): what the runtime uses, since a
// file truncated under a mapping makes every access to the lost pages a
// SIGBUS, and a file rewritten in place changes under a view.
//
// writeSafetensors() writes the exact bytes Python's `safetensors` library
// writes for the same tensors: compact JSON, tensors laid out by descending
// dtype rank then by name, header padded with spaces to a multiple of 8. It
// streams one tensor at a time, so multi-GB files need little memory.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_FORMAT_SAFETENSORS_H
#define TRELLIS_FORMAT_SAFETENSORS_H

#include "trellis/Support/DType.h"
#include "trellis/Support/HostTensor.h"
#include "trellis/Support/Result.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace trellis {

/// The largest header the reference library accepts (100 MB).
inline constexpr uint64_t kSafetensorsMaxHeaderSize = 100'000'000;

/// One tensor of a safetensors file.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  /// Byte range [begin, end) relative to the start of the data section.
  uint64_t begin = 0, end = 0;

  uint64_t nbytes() const { return end - begin; }
};

class SafetensorsFile {
public:
  /// Maps `path` read-only and validates it. Every failure names the file and
  /// the tensor or field at fault.
  static Result<std::shared_ptr<const SafetensorsFile>>
  open(const std::string &path);

  /// Validates an in-memory file image (the bytes of a whole file). Tensor
  /// views point into `data`; `keepAlive` (may be null) owns it. `path` is
  /// only used in messages. open() is this on top of mmap; the fuzzer and
  /// the tests call it directly.
  static Result<std::shared_ptr<const SafetensorsFile>>
  fromMemory(const void *data, size_t size, std::string path,
             std::shared_ptr<const void> keepAlive = nullptr);

  ~SafetensorsFile();

  const std::string &path() const { return path_; }
  /// All tensors, ordered by their position in the data section.
  const std::vector<SafetensorsEntry> &entries() const { return entries_; }
  /// The entry called `name`, or null.
  const SafetensorsEntry *find(std::string_view name) const;
  /// The "__metadata__" map (empty when the file has none).
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  /// The JSON header length N (including any padding).
  uint64_t headerSize() const { return headerSize_; }
  /// File offset of the data section (8 + N).
  uint64_t dataOffset() const { return 8 + headerSize_; }
  /// Size of the whole file in bytes.
  uint64_t fileSize() const { return size_; }

  /// A read-only view of the entry's bytes that keeps the mapping alive.
  /// Zero-copy when the bytes are aligned for the element type (always for
  /// files written by the safetensors library, whose header is padded to 8
  /// bytes); otherwise an aligned owned copy. `entry` must come from this
  /// file.
  HostTensor tensor(const SafetensorsEntry &entry) const;

  /// Copies the entry's bytes (entry.nbytes()) into `dst` with checked
  /// reads from the file opened by open() (pread, not the mapping): a file
  /// whose size or modification time changed since open() (truncated or
  /// rewritten in place), or that ends before the tensor does, is an error
  /// naming the file, the tensor and its byte range, what the file was and
  /// what it is now. (A file replaced by a new one through a rename is
  /// read as it was: the descriptor holds the old one.) For fromMemory()
  /// files a plain copy. `entry` must come from this file.
  Status read(const SafetensorsEntry &entry, void *dst) const;
  /// An owned tensor holding the entry's bytes, read with read().
  Result<HostTensor> load(const SafetensorsEntry &entry) const;

  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

private:
  SafetensorsFile() = default;

  /// Whether the file still is what open() validated: its size and
  /// modification time unchanged. `what` names the read for the message.
  Status checkUnchanged(const std::string &what) const;

  std::string path_;
  std::shared_ptr<const void> keepAlive_;
  /// open(): the descriptor kept for read(), and the file's size and
  /// modification time (ns) when it was opened. -1 for fromMemory().
  int fd_ = -1;
  int64_t openedMtimeNs_ = 0;
  const uint8_t *base_ = nullptr;
  uint64_t size_ = 0;
  uint64_t headerSize_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

/// What writeSafetensors() writes for one tensor.
struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
};

/// The layout of a safetensors file as the reference library lays it out.
struct SafetensorsLayout {
  /// The JSON header, padded with spaces to a multiple of 8 bytes.
  std::string header;
  /// Indices into the specs, in data-section order.
  std::vector<size_t> order;
  /// Byte range of each spec (indexed like the specs) in the data section.
  std::vector<uint64_t> begin, end;
  /// Total bytes of the data section.
  uint64_t dataSize = 0;

  uint64_t fileSize() const { return 8 + header.size() + dataSize; }
};

/// Computes the header and layout writeSafetensors() would produce: tensors
/// sorted by descending dtype rank (the reference library's enum order:
/// I64, F64, F32, I32, BF16, F16, I16, I8, U8, BOOL), then by name (bytewise);
/// "__metadata__" first and only when `metadata` is not empty. Fails on
/// duplicate or invalid names, negative dims and size overflow.
Result<SafetensorsLayout>
planSafetensors(const std::vector<TensorSpec> &specs,
                const std::map<std::string, std::string> &metadata = {});

/// Writes a safetensors file through an AtomicFile (the file appears whole or
/// not at all). `fill(index, dst)` is called exactly once per spec, in data
/// order, and must write the spec's nbytes into `dst` (`index` indexes
/// `specs`). Only one tensor's bytes are in memory at a time.
Status
writeSafetensors(const std::string &path, const std::vector<TensorSpec> &specs,
                 const std::function<void(size_t index, void *dst)> &fill,
                 const std::map<std::string, std::string> &metadata = {});

} // namespace trellis

#endif // TRELLIS_FORMAT_SAFETENSORS_H
