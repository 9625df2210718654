//===- Ops.cpp - Functional ops of the C++ tracing API ----------------------===//
#include "trellis/Trace/Ops.h"

#include "dialect/TrellisOps.h"

namespace trellis::trace {

namespace td = mlir::trellis;

/// The single result of an op traced with inferred types.
template <typename OpTy, typename... Args>
static Tensor inferred(Tracer &t, Where where, Args &&...args) {
  auto results = t.create<OpTy>(where, mlir::TypeRange{},
                                std::forward<Args>(args)...);
  return results.empty() ? Tensor() : results.front();
}

Tensor linear(const Tensor &x, const Tensor &w, const Tensor &b, Where where) {
  if (Tracer::anyAbsent({x, w}))
    return Tensor();
  return inferred<td::LinearOp>(x.tracer(), where, x.value(), w.value(),
                                b ? b.value() : mlir::Value());
}

Tensor silu(const Tensor &x, Where where) {
  if (Tracer::anyAbsent({x}))
    return Tensor();
  // SameOperandsAndResultType: the result type is the operand's.
  auto results = x.tracer().create<td::SiluOp>(where, mlir::TypeRange{x.type()},
                                               x.value());
  return results.front();
}

Tensor add(const Tensor &a, const Tensor &b, Where where) {
  if (Tracer::anyAbsent({a, b}))
    return Tensor();
  return inferred<td::AddOp>(a.tracer(), where, a.value(), b.value());
}

} // namespace trellis::trace
