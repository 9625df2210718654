//===- HostTensor.cpp -----------------------------------------------------===//
#include "trellis/Support/HostTensor.h"
#include "trellis/Support/Half.h"

#include <cstring>

namespace trellis {

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeToString(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

HostTensor::HostTensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  size_t bytes = nbytes();
  // One spare byte so that empty tensors still have a distinct, valid pointer.
  std::shared_ptr<uint8_t[]> buf(new uint8_t[bytes + 1]());
  data_ = buf.get();
  storage_ = std::shared_ptr<const void>(buf, buf.get());
}

HostTensor HostTensor::view(DType dtype, Shape shape, const void *data,
                            std::shared_ptr<const void> keepAlive) {
  HostTensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.storage_ = std::move(keepAlive);
  t.data_ = data;
  t.readOnly_ = true;
  return t;
}

HostTensor HostTensor::reshaped(Shape shape) const {
  assert(numElements(shape) == numel() && "reshape changes the element count");
  HostTensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

HostTensor HostTensor::clone() const {
  HostTensor t(dtype_, shape_);
  if (nbytes())
    std::memcpy(t.mutableRaw(), data_, nbytes());
  return t;
}

HostTensor HostTensor::toFloat32() const {
  HostTensor out(DType::F32, shape_);
  float *dst = out.mutableData<float>();
  int64_t n = numel();
  switch (dtype_) {
  case DType::F32:
    std::memcpy(dst, data_, nbytes());
    break;
  case DType::F16:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = halfToFloat(data<uint16_t>()[i]);
    break;
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits = uint32_t(data<uint16_t>()[i]) << 16;
      std::memcpy(&dst[i], &bits, 4);
    }
    break;
  case DType::F64:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = float(data<double>()[i]);
    break;
  case DType::I8:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = float(data<int8_t>()[i]);
    break;
  case DType::U8:
  case DType::Bool:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = float(data<uint8_t>()[i]);
    break;
  case DType::I16:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = float(data<int16_t>()[i]);
    break;
  case DType::I32:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = float(data<int32_t>()[i]);
    break;
  case DType::I64:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = float(data<int64_t>()[i]);
    break;
  }
  return out;
}

} // namespace trellis
