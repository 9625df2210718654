//===- Elementwise.cpp - Unary, binary, cast, modulation, sampler math ----===//
#include "runtime/reference/Common.h"

#include <cmath>
#include <cstring>
#include <optional>

namespace trellis::ref {
using namespace detail;

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

float unaryScalar(UnaryKind kind, float x) {
  switch (kind) {
  case UnaryKind::Silu:
    return x / (1.0f + std::exp(-x));
  case UnaryKind::Gelu: {
    // §3.6: the tanh approximation (PyTorch approximate="tanh"), everywhere.
    const float kBeta = float(0.79788456080286535588); // sqrt(2/pi)
    const float kKappa = 0.044715f;
    float inner = kBeta * (x + kKappa * x * x * x);
    return 0.5f * x * (1.0f + std::tanh(inner));
  }
  case UnaryKind::GeluErf:
    // Image conditioning spec §2.4: nn.GELU() default, the erf form.
    return 0.5f * x * (1.0f + std::erf(x * float(0.70710678118654752440)));
  case UnaryKind::Sigmoid:
    return 1.0f / (1.0f + std::exp(-x));
  case UnaryKind::Tanh:
    return std::tanh(x);
  case UnaryKind::Softplus:
    // PyTorch softplus(beta = 1, threshold = 20): linear above the threshold.
    return x > 20.0f ? x : std::log1p(std::exp(x));
  case UnaryKind::Atanh:
    return std::atanh(x);
  case UnaryKind::Exp:
    return std::exp(x);
  case UnaryKind::Log:
    return std::log(x);
  case UnaryKind::Sin:
    return std::sin(x);
  case UnaryKind::Cos:
    return std::cos(x);
  case UnaryKind::Neg:
    return -x;
  case UnaryKind::Sqrt:
    return std::sqrt(x);
  case UnaryKind::Abs:
    return std::fabs(x);
  }
  return x;
}

Result<HostTensor> unary(UnaryKind kind, const HostTensor &x) {
  TRELLIS_RETURN_IF_ERROR(expectFloat("unary", "the operand", x));
  FloatView in(x);
  FloatOut out(x.dtype(), x.shape());
  parallelFor(x.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out.set(i, unaryScalar(kind, in[i]));
  });
  return out.take();
}

Result<HostTensor> silu(const HostTensor &x) {
  return unary(UnaryKind::Silu, x);
}
Result<HostTensor> gelu(const HostTensor &x) {
  return unary(UnaryKind::Gelu, x);
}
Result<HostTensor> sigmoid(const HostTensor &x) {
  return unary(UnaryKind::Sigmoid, x);
}
Result<HostTensor> tanh(const HostTensor &x) {
  return unary(UnaryKind::Tanh, x);
}
Result<HostTensor> softplus(const HostTensor &x) {
  return unary(UnaryKind::Softplus, x);
}
Result<HostTensor> atanh(const HostTensor &x) {
  return unary(UnaryKind::Atanh, x);
}
Result<HostTensor> exp(const HostTensor &x) { return unary(UnaryKind::Exp, x); }
Result<HostTensor> log(const HostTensor &x) { return unary(UnaryKind::Log, x); }
Result<HostTensor> sin(const HostTensor &x) { return unary(UnaryKind::Sin, x); }
Result<HostTensor> cos(const HostTensor &x) { return unary(UnaryKind::Cos, x); }
Result<HostTensor> neg(const HostTensor &x) { return unary(UnaryKind::Neg, x); }
Result<HostTensor> sqrt(const HostTensor &x) {
  return unary(UnaryKind::Sqrt, x);
}
Result<HostTensor> abs(const HostTensor &x) { return unary(UnaryKind::Abs, x); }

//===----------------------------------------------------------------------===//
// Binary with NumPy broadcasting
//===----------------------------------------------------------------------===//

namespace {

/// Output shape and, per output dimension, each operand's element stride
/// (0 where the operand is broadcast).
struct BroadcastPlan {
  Shape out;
  std::vector<int64_t> strideA, strideB;

  int64_t offset(int64_t flat, const std::vector<int64_t> &stride) const {
    int64_t off = 0;
    for (int d = int(out.size()) - 1; d >= 0; --d) {
      int64_t c = flat % out[d];
      flat /= out[d];
      off += c * stride[d];
    }
    return off;
  }
};

std::optional<BroadcastPlan> planBroadcast(const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  BroadcastPlan p;
  p.out.assign(rank, 1);
  p.strideA.assign(rank, 0);
  p.strideB.assign(rank, 0);
  int64_t sa = 1, sb = 1;
  for (size_t k = 0; k < rank; ++k) { // k counts from the last dimension
    size_t d = rank - 1 - k;
    int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    p.out[d] = da == 1 ? db : da;
    p.strideA[d] = da == 1 ? 0 : sa;
    p.strideB[d] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
  }
  return p;
}

float applyFloat(BinaryKind kind, float a, float b) {
  switch (kind) {
  case BinaryKind::Add:
    return a + b;
  case BinaryKind::Sub:
    return a - b;
  case BinaryKind::Mul:
    return a * b;
  case BinaryKind::Div:
    return a / b;
  case BinaryKind::Maximum:
    // NumPy/PyTorch maximum propagates NaN.
    if (std::isnan(a) || std::isnan(b))
      return NAN;
    return a > b ? a : b;
  case BinaryKind::Pow:
    return std::pow(a, b);  // powf
  case BinaryKind::Greater: // 1 or 0; NaN compares false
    return a > b ? 1.0f : 0.0f;
  case BinaryKind::Less:
    return a < b ? 1.0f : 0.0f;
  case BinaryKind::Equal:
    return a == b ? 1.0f : 0.0f;
  }
  return 0.0f;
}

int64_t applyInt(BinaryKind kind, int64_t a, int64_t b) {
  // Wrapping arithmetic, through unsigned to keep it defined.
  switch (kind) {
  case BinaryKind::Add:
    return int64_t(uint64_t(a) + uint64_t(b));
  case BinaryKind::Sub:
    return int64_t(uint64_t(a) - uint64_t(b));
  case BinaryKind::Mul:
    return int64_t(uint64_t(a) * uint64_t(b));
  case BinaryKind::Maximum:
    return a > b ? a : b;
  case BinaryKind::Greater:
    return a > b ? 1 : 0;
  case BinaryKind::Less:
    return a < b ? 1 : 0;
  case BinaryKind::Equal:
    return a == b ? 1 : 0;
  case BinaryKind::Div:
  case BinaryKind::Pow:
    break;
  }
  return 0;
}

template <typename T>
void binaryInt(BinaryKind kind, const BroadcastPlan &plan, const HostTensor &a,
               const HostTensor &b, HostTensor &out) {
  const T *pa = a.data<T>();
  const T *pb = b.data<T>();
  T *po = out.mutableData<T>();
  parallelFor(out.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      po[i] = T(applyInt(kind, pa[plan.offset(i, plan.strideA)],
                         pb[plan.offset(i, plan.strideB)]));
  });
}

} // namespace

Result<HostTensor> binary(BinaryKind kind, const HostTensor &a,
                          const HostTensor &b) {
  const char *op = "binary";
  if (a.dtype() != b.dtype())
    return opError(op, "operands must have one dtype, got " + describe(a) +
                           " and " + describe(b));
  std::optional<BroadcastPlan> plan = planBroadcast(a.shape(), b.shape());
  if (!plan)
    return opError(op, "shapes do not broadcast: " + describe(a) + " and " +
                           describe(b));
  if (isFloat(a.dtype())) {
    FloatView va(a), vb(b);
    FloatOut out(a.dtype(), plan->out);
    parallelFor(
        numElements(plan->out), 1 << 14, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i)
            out.set(i, applyFloat(kind, va[plan->offset(i, plan->strideA)],
                                  vb[plan->offset(i, plan->strideB)]));
        });
    return out.take();
  }
  if (!isInt(a.dtype()))
    return opError(op, "unsupported dtype " + describe(a));
  if (kind == BinaryKind::Div || kind == BinaryKind::Pow)
    return opError(op, std::string(kind == BinaryKind::Div ? "div" : "pow") +
                           " needs float operands, got " + describe(a));
  HostTensor out(a.dtype(), plan->out);
  if (a.dtype() == DType::I32)
    binaryInt<int32_t>(kind, *plan, a, b, out);
  else
    binaryInt<int64_t>(kind, *plan, a, b, out);
  return out;
}

Result<HostTensor> where(const HostTensor &cond, const HostTensor &a,
                         const HostTensor &b) {
  const char *op = "where";
  if (cond.dtype() != a.dtype() || a.dtype() != b.dtype() ||
      !isFloat(a.dtype()))
    return opError(op, "operands must have one float dtype, got " +
                           describe(cond) + ", " + describe(a) + " and " +
                           describe(b));
  std::optional<BroadcastPlan> ca = planBroadcast(cond.shape(), a.shape());
  std::optional<BroadcastPlan> all =
      ca ? planBroadcast(ca->out, b.shape()) : std::nullopt;
  if (!all)
    return opError(op, "shapes do not broadcast: " + describe(cond) + ", " +
                           describe(a) + " and " + describe(b));
  // Each operand's strides over the result's shape.
  std::optional<BroadcastPlan> pc = planBroadcast(cond.shape(), all->out),
                               pa = planBroadcast(a.shape(), all->out);
  FloatView vc(cond), va(a), vb(b);
  FloatOut out(a.dtype(), all->out);
  parallelFor(numElements(all->out), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out.set(i, vc[pc->offset(i, pc->strideA)] != 0.0f
                     ? va[pa->offset(i, pa->strideA)]
                     : vb[all->offset(i, all->strideB)]);
  });
  return out.take();
}

Result<HostTensor> add(const HostTensor &a, const HostTensor &b) {
  return binary(BinaryKind::Add, a, b);
}
Result<HostTensor> sub(const HostTensor &a, const HostTensor &b) {
  return binary(BinaryKind::Sub, a, b);
}
Result<HostTensor> mul(const HostTensor &a, const HostTensor &b) {
  return binary(BinaryKind::Mul, a, b);
}
Result<HostTensor> div(const HostTensor &a, const HostTensor &b) {
  return binary(BinaryKind::Div, a, b);
}
Result<HostTensor> maximum(const HostTensor &a, const HostTensor &b) {
  return binary(BinaryKind::Maximum, a, b);
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

Result<HostTensor> cast(const HostTensor &x, DType to) {
  if (!isFloat(to))
    return opError("cast", "the target dtype must be f16 or f32, got " +
                               std::string(dtypeName(to)));
  if (!isFloat(x.dtype()) && !isInt(x.dtype()))
    return opError("cast", "unsupported source " + describe(x));
  if (x.dtype() == to)
    return x.clone();
  // toFloat32 widens f16 exactly and converts integers with round to nearest;
  // FloatOut then rounds f32 -> f16 to nearest even.
  FloatView in(x);
  FloatOut out(to, x.shape());
  parallelFor(x.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out.set(i, in[i]);
  });
  return out.take();
}

//===----------------------------------------------------------------------===//
// Modulation (§3.6): per-sample [B, C] vectors or same-shape tensors
//===----------------------------------------------------------------------===//

namespace {

/// How a modulation operand maps onto x: same shape, [B, C] broadcast over
/// the middle (token) dimensions of x [B, ..., C], or one row [1, C] for every
/// row of x [N, C].
struct PerSample {
  bool sameShape = true;
  int64_t tokens = 1;   ///< product of x's middle dimensions
  int64_t channels = 1; ///< x's last dimension

  /// Index into the operand for element i of x.
  int64_t index(int64_t i) const {
    if (sameShape)
      return i;
    int64_t c = i % channels;
    int64_t b = i / (channels * tokens);
    return b * channels + c;
  }
};

Result<PerSample> perSample(const char *op, const char *what,
                            const HostTensor &x, const HostTensor &v) {
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, what, v));
  PerSample p;
  if (v.shape() == x.shape())
    return p;
  if (x.rank() >= 3 && v.rank() == 2 && v.dim(0) == x.dim(0) &&
      v.dim(1) == x.dim(-1)) {
    p.sameShape = false;
    p.channels = x.dim(-1);
    p.tokens = x.numel() / std::max<int64_t>(1, x.dim(0) * p.channels);
    return p;
  }
  if (x.rank() == 2 && v.rank() == 2 && v.dim(0) == 1 && v.dim(1) == x.dim(1)) {
    p.sameShape = false;
    p.channels = x.dim(1);
    p.tokens = x.dim(0); // all rows are tokens of the one sample
    return p;
  }
  return opError(op, std::string(what) + " must have the shape of x " +
                         shapeToString(x.shape()) +
                         " or be [B, C] for x [B, ..., C] or [1, C] for x [N, "
                         "C], got " +
                         describe(v));
}

} // namespace

Result<HostTensor> modulate(const HostTensor &x, const HostTensor &shift,
                            const HostTensor &scale) {
  const char *op = "modulate";
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "x", x));
  Result<PerSample> ps = perSample(op, "shift", x, shift);
  if (!ps)
    return ps.takeError();
  Result<PerSample> pc = perSample(op, "scale", x, scale);
  if (!pc)
    return pc.takeError();
  FloatView vx(x), vshift(shift), vscale(scale);
  FloatOut out(x.dtype(), x.shape());
  parallelFor(x.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out.set(i, vx[i] * (1.0f + vscale[pc->index(i)]) + vshift[ps->index(i)]);
  });
  return out.take();
}

Result<HostTensor> gatedResidual(const HostTensor &x, const HostTensor &h,
                                 const HostTensor &gate) {
  const char *op = "gated_residual";
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "x", x));
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "h", h));
  TRELLIS_RETURN_IF_ERROR(expectShape(op, "h", h, x.shape()));
  Result<PerSample> pg = perSample(op, "gate", x, gate);
  if (!pg)
    return pg.takeError();
  FloatView vx(x), vg(gate), vh(h);
  FloatOut out(x.dtype(), x.shape());
  parallelFor(x.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out.set(i, vx[i] + vg[pg->index(i)] * vh[i]);
  });
  return out.take();
}

//===----------------------------------------------------------------------===//
// Sampler arithmetic (§3.2, §3.3)
//===----------------------------------------------------------------------===//

Result<HostTensor> cfgCombine(const HostTensor &vc, const HostTensor &vu,
                              double w) {
  const char *op = "cfg_combine";
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "vc", vc));
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "vu", vu));
  TRELLIS_RETURN_IF_ERROR(expectShape(op, "vu", vu, vc.shape()));
  // TRELLIS: (1 + w) * v_cond - w * v_uncond with Python floats; PyTorch
  // applies each scalar as f32 (1 + w is formed in double first).
  const float a = float(1.0 + w), b = float(w);
  FloatView c(vc), u(vu);
  FloatOut out(vc.dtype(), vc.shape());
  parallelFor(vc.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out.set(i, a * c[i] - b * u[i]);
  });
  return out.take();
}

Result<HostTensor> eulerUpdate(const HostTensor &x, const HostTensor &v,
                               double dt) {
  const char *op = "euler_update";
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "x", x));
  TRELLIS_RETURN_IF_ERROR(expectFloat(op, "v", v));
  TRELLIS_RETURN_IF_ERROR(expectShape(op, "v", v, x.shape()));
  // §3.2: x − (t − t_prev)·v; the double dt is applied as an f32 scalar.
  const float step = float(dt);
  FloatView vx(x), vv(v);
  FloatOut out(x.dtype(), x.shape());
  parallelFor(x.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out.set(i, vx[i] - step * vv[i]);
  });
  return out.take();
}

std::vector<double> timeGrid(int steps, double rescaleT) {
  std::vector<double> t;
  if (steps < 1)
    return t;
  // numpy.linspace(1, 0, steps + 1): y_i = i·step + 1 with step = −1/steps,
  // the last value set to exactly 0 (this is NumPy's formula, bit for bit).
  const double step = (0.0 - 1.0) / double(steps);
  for (int i = 0; i <= steps; ++i) {
    double u = i == steps ? 0.0 : double(i) * step + 1.0;
    // §3.2: the shift t = r·u / (1 + (r − 1)·u), in NumPy's evaluation order.
    t.push_back(rescaleT * u / (1.0 + (rescaleT - 1.0) * u));
  }
  return t;
}

bool isGuidedStep(double t, double lo, double hi) {
  // §3.3: inclusive on both ends, on the unscaled t in [0, 1].
  return lo <= t && t <= hi;
}

float modelTime(double t) { return float(1000.0 * t); }

Result<HostTensor> timeGridTable(int64_t rows, int64_t steps, double rescaleT) {
  const char *op = "time_grid";
  if (steps < 1 || rescaleT <= 0)
    return opError(op, "steps must be >= 1 and rescale_t > 0");
  if (steps > rows)
    return opError(op, "the sampler runs " + std::to_string(steps) +
                           " steps, but the program's time tables hold " +
                           std::to_string(rows) +
                           " (trellis-hoist-time's capacity: max(the "
                           "compiled steps, 64); compile with that many "
                           "steps in pipeline.json)");
  HostTensor out(DType::F32, {rows});
  std::vector<double> t = timeGrid(int(steps), rescaleT);
  for (int64_t i = 0; i < rows; ++i)
    out.mutableData<float>()[i] = i < steps ? modelTime(t[size_t(i)]) : 0.0f;
  return out;
}

int64_t timeGridIndex(const HostTensor &grid, float tau) {
  for (int64_t k = 0; k < grid.numel(); ++k)
    if (grid.data<float>()[k] == tau)
      return k;
  return -1;
}

Result<HostTensor> timeRow(const HostTensor &table, const HostTensor &grid,
                           const HostTensor &tau) {
  const char *op = "time_row";
  if (grid.dtype() != DType::F32 || grid.rank() != 1 ||
      tau.dtype() != DType::F32 || tau.rank() != 1 || table.rank() < 2 ||
      table.dim(0) != grid.dim(0))
    return opError(op, "expects table [S, D...], grid [S] f32, tau [B] f32; "
                       "found " +
                           describe(table) + ", " + describe(grid) + ", " +
                           describe(tau));
  Shape shape = table.shape();
  shape[0] = tau.dim(0);
  HostTensor out(table.dtype(), shape);
  size_t rowBytes = table.nbytes() / size_t(std::max<int64_t>(1, grid.dim(0)));
  for (int64_t b = 0; b < tau.dim(0); ++b) {
    float t = tau.data<float>()[b];
    int64_t k = timeGridIndex(grid, t);
    if (k < 0)
      return opError(op,
                     "tau = " + std::to_string(t) + " is not on the time grid");
    std::memcpy(static_cast<char *>(out.mutableRaw()) + size_t(b) * rowBytes,
                static_cast<const char *>(table.raw()) + size_t(k) * rowBytes,
                rowBytes);
  }
  return out;
}

} // namespace trellis::ref
