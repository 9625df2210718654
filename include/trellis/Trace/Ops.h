//===- Ops.h - Functional ops of the C++ tracing API ------------*- C++ -*-===//
//
// One function per trellis op, Python-style: `y = linear(x, w, b)`. Each
// takes the caller's source line as its last (defaulted) argument, which
// becomes the "builder" part of the op's location. If an input is absent
// (an earlier op failed and recorded its error), the result is absent too.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_TRACE_OPS_H
#define TRELLIS_TRACE_OPS_H

#include "trellis/Trace/Tracer.h"

namespace trellis::trace {

using Where = std::source_location;

/// y = x·Wᵀ + b over the last dimension (b optional).
Tensor linear(const Tensor &x, const Tensor &w, const Tensor &b = Tensor(),
              Where where = Where::current());

/// Elementwise x·sigmoid(x).
Tensor silu(const Tensor &x, Where where = Where::current());

/// a + b with NumPy broadcasting.
Tensor add(const Tensor &a, const Tensor &b, Where where = Where::current());

} // namespace trellis::trace

#endif // TRELLIS_TRACE_OPS_H
