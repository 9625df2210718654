//===- MeshUtil.h - Face index access of the mesh writers (internal) ------===//
#ifndef TRELLIS_RUNTIME_OUTPUT_MESHUTIL_H
#define TRELLIS_RUNTIME_OUTPUT_MESHUTIL_H

#include "trellis/Support/HostTensor.h"

#include <cstdint>
#include <vector>

namespace trellis::output::detail {

/// Flat element `i` of an I32 or I64 face tensor.
inline int64_t faceIndex(const HostTensor &faces, int64_t i) {
  return faces.dtype() == DType::I64 ? faces.data<int64_t>()[i]
                                     : int64_t(faces.data<int32_t>()[i]);
}

/// All face indices as uint32 (the caller has validated the range).
inline std::vector<uint32_t> facesAsU32(const HostTensor &faces) {
  std::vector<uint32_t> out(size_t(faces.numel()));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = uint32_t(faceIndex(faces, int64_t(i)));
  return out;
}

/// [0,1] -> 0..255, rounded to nearest; clamped, NaN -> 0.
uint8_t colorToByte(float c);

} // namespace trellis::output::detail

#endif // TRELLIS_RUNTIME_OUTPUT_MESHUTIL_H
