//===- HostTensor.h - A dense tensor in host memory -----------------------===//
//
// The host-side tensor of the runtime, the file formats and the reference
// backend: an element type, a shape (row-major, contiguous) and bytes. The
// bytes are either owned (shared between copies, like a NumPy array) or a
// read-only view of memory kept alive by someone else (a mapped safetensors
// file). clone() makes an independent, owned copy.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_SUPPORT_HOSTTENSOR_H
#define TRELLIS_SUPPORT_HOSTTENSOR_H

#include "trellis/Support/DType.h"

#include <cassert>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trellis {

using Shape = std::vector<int64_t>;

/// Number of elements of a shape (1 for rank 0).
int64_t numElements(const Shape &shape);
/// "[2, 3, 4]".
std::string shapeToString(const Shape &shape);

class HostTensor {
public:
  HostTensor() = default;
  /// An owned, zero-filled tensor.
  HostTensor(DType dtype, Shape shape);

  /// A read-only view of `data`; `keepAlive` owns the memory (may be null if
  /// the caller guarantees the lifetime).
  static HostTensor view(DType dtype, Shape shape, const void *data,
                         std::shared_ptr<const void> keepAlive = nullptr);

  DType dtype() const { return dtype_; }
  const Shape &shape() const { return shape_; }
  int rank() const { return int(shape_.size()); }
  int64_t dim(int i) const { return shape_[i < 0 ? i + rank() : i]; }
  int64_t numel() const { return numElements(shape_); }
  size_t nbytes() const { return size_t(numel()) * dtypeSize(dtype_); }
  bool defined() const { return data_ != nullptr || numel() == 0; }
  bool isReadOnly() const { return readOnly_; }

  const void *raw() const { return data_; }
  void *mutableRaw() {
    assert(!readOnly_ && "writing through a read-only tensor view");
    return const_cast<void *>(data_);
  }
  template <typename T> const T *data() const {
    return static_cast<const T *>(data_);
  }
  template <typename T> T *mutableData() {
    return static_cast<T *>(mutableRaw());
  }

  /// Same bytes, another shape with the same element count.
  HostTensor reshaped(Shape shape) const;
  /// An independent owned copy.
  HostTensor clone() const;
  /// A float32 copy of any floating or integer tensor (fp16 widened exactly).
  HostTensor toFloat32() const;

private:
  DType dtype_ = DType::F32;
  Shape shape_;
  std::shared_ptr<const void> storage_;
  const void *data_ = nullptr;
  bool readOnly_ = false;
};

} // namespace trellis

#endif // TRELLIS_SUPPORT_HOSTTENSOR_H
