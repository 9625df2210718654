//===- OutputUtil.h - Shared checks of the output writers (internal) ------===//
#ifndef TRELLIS_RUNTIME_OUTPUT_OUTPUTUTIL_H
#define TRELLIS_RUNTIME_OUTPUT_OUTPUTUTIL_H

#include "trellis/Support/HostTensor.h"
#include "trellis/Support/Result.h"

#include <string>

namespace trellis::output::detail {

/// "<kind> '<name>' must be <dtype> <shape>, found <dtype> <shape>" unless
/// `t` is defined with exactly that dtype and shape.
inline Status checkTensor(const std::string &kind, const std::string &name,
                          const HostTensor &t, DType dtype,
                          const Shape &shape) {
  std::string want = std::string(dtypeName(dtype)) + " " + shapeToString(shape);
  if (!t.defined())
    return Error{kind + " '" + name + "' is missing (expected " + want + ")"};
  if (t.dtype() != dtype || t.shape() != shape)
    return Error{kind + " '" + name + "' must be " + want + ", found " +
                 std::string(dtypeName(t.dtype())) + " " +
                 shapeToString(t.shape())};
  return Status::ok();
}

} // namespace trellis::output::detail

#endif // TRELLIS_RUNTIME_OUTPUT_OUTPUTUTIL_H
