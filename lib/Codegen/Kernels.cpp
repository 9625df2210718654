//===- Kernels.cpp - gpu.func emitters of the generated ops ---------------===//
//
// Every kernel is 1-D: 256 threads per block, one element group per thread.
// Index math is on `index` (lowered to i32: every generated tensor has fewer
// than 2^31 elements, checked here; a dynamic one is addressed up to that
// limit, addressableRows). The math of each op is the CPU
// reference's (runtime/reference): f32 arithmetic in the same order, one
// rounding to the result dtype at the store. Families:
//  * elementwise (casts, unary, binary with NumPy broadcasting, modulation,
//    the sampler update): V consecutive elements per thread with 16-byte
//    vector loads/stores when the innermost size allows (four such groups
//    per thread on large tensors, all loads before the first store);
//    broadcast operands are loaded as scalars and splatted;
//  * row reductions over the last axis (layer_norm, head_rms_norm, softmax,
//    layer_norm_modulate): G lanes (≤ 32, a power of two) per row, each
//    holding K vectors of V elements in registers, statistics in f32 reduced
//    with gpu.shuffle xor; the per-column parameters are loaded with x (a
//    layer norm's f32 γ / β staged in workgroup memory by the block); rows
//    too long for registers loop over the row;
//  * layer norm over another axis (the SS decoder's channel-first norm): the
//    block's threads split positions (vector accesses along the contiguous
//    inner axis) and channels, x held in registers, partial sums combined in
//    workgroup memory; one thread per position looping over the axis where
//    that does not fit (and for softmax);
//  * data movement (split, concat, permute, pixel shuffle, im2col), the
//    sparse row-index kernels (gather_rows, segment_mean, subdivide) and the
//    sparse conv's neighbour gather and tap sum;
//  * timestep embedding, with its frequency table baked in as the reference
//    computes it.
//
// Dynamic rows (the sparse stages, docs/design/gpu-backend.md): a tensor
// dynamic in dimension 0 is generated for its #trellis.bounds bound and the
// kernel takes a trailing `i64 rows`. Each family maps a fixed number T of
// threads to one dimension-0 row (elementwise: one group of V elements per
// thread, V dividing the row; row kernels: G lanes per reduced row), so the
// runtime launches rows·T threads and the guards compare against that.
// Static kernels are built exactly as without this.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"

#include "dialect/TrellisOps.h"
#include "dialect/TrellisTypes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <functional>
#include <numeric>

using namespace mlir;

namespace trellis::codegen::detail {
namespace {

constexpr int64_t kBlock = 256;
constexpr int64_t kMaxElements = (int64_t(1) << 31) - 1;
/// Scratch of a sparse conv's gathered neighbour rows (one chunk of output
/// rows at a time) and of its taps-first f32 products; the runtime takes the
/// taps-first order only where the products fit (annotated on the op).
constexpr int64_t kSparseConvGatherBytes = int64_t(128) << 20;
constexpr int64_t kSparseConvTapsBytes = int64_t(512) << 20;
/// Dense convs with at most this many output channels run as one direct
/// kernel (emitDirectConvKernel) instead of im2col + GEMM.
constexpr int64_t kMaxDirectConvOutputs = 4;
/// Elementwise kernels of at least this many vector groups take 4 per thread
/// (2^18 groups: 4 MiB of f16 at 8 elements a group).
constexpr int64_t kUnrollMinGroups = int64_t(1) << 18;
/// Layer norms stage f32 γ / β in workgroup memory up to this many channels
/// (16 KiB of static shared memory, well under the 48 KiB limit).
constexpr int64_t kMaxStagedAffine = 2048;

int64_t elemBytes(Type t) { return (t.getIntOrFloatBitWidth() + 7) / 8; }

int64_t product(ArrayRef<int64_t> s) {
  return std::accumulate(s.begin(), s.end(), int64_t(1),
                         std::multiplies<int64_t>());
}

/// Largest power of two <= cap dividing n (1 for n = 0).
int64_t pow2Divisor(int64_t n, int64_t cap) {
  int64_t v = 1;
  while (v * 2 <= cap && n % (v * 2) == 0)
    v *= 2;
  return v;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

Launch launch1d(int64_t threads) {
  Launch l;
  l.block = {kBlock, 1, 1};
  l.grid = {std::max<int64_t>(1, ceilDiv(threads, kBlock)), 1, 1};
  return l;
}

/// Builds one gpu.func and offers the value helpers the emitters share.
class KernelBuilder {
public:
  KernelBuilder(gpu::GPUModuleOp module, StringRef name,
                ArrayRef<Type> argTypes, Location loc)
      : b(module.getContext()), loc(loc) {
    b.setInsertionPointToEnd(module.getBody());
    auto fnType = b.getFunctionType(argTypes, {});
    func = gpu::GPUFuncOp::create(b, loc, name, fnType);
    func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({int32_t(kBlock), 1, 1}));
    Block &entry = func.getBody().front();
    b.setInsertionPointToStart(&entry);
    gpu::ReturnOp::create(b, loc);
    b.setInsertionPointToStart(&entry);
  }

  Value arg(unsigned i) { return func.getArgument(i); }

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value i32(int32_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
  }

  /// An f32 constant of the shape of `like` (scalar or vector).
  Value f32(double v, Type like) {
    Type f = b.getF32Type();
    if (auto vt = dyn_cast<VectorType>(like))
      return arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(vt, b.getFloatAttr(f, v)));
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(f, v));
  }
  Value zeroOf(Type t) {
    if (auto vt = dyn_cast<VectorType>(t))
      return arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(vt, b.getZeroAttr(vt.getElementType())));
    return arith::ConstantOp::create(b, loc, b.getZeroAttr(t));
  }

  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value mul(Value x, int64_t c) {
    if (c == 1)
      return x;
    return arith::MulIOp::create(b, loc, x, idx(c));
  }
  Value div(Value x, int64_t c) {
    if (c == 1)
      return x;
    return arith::DivUIOp::create(b, loc, x, idx(c));
  }
  Value rem(Value x, int64_t c) {
    if (c == 1)
      return idx(0);
    return arith::RemUIOp::create(b, loc, x, idx(c));
  }
  Value ult(Value x, int64_t c) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, idx(c));
  }
  Value ult(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, y);
  }
  /// 0 <= c < size for a signed coordinate (a conv tap's input position:
  /// index arithmetic wraps below zero, so compare as signed).
  Value inRange(Value c, int64_t size) {
    Value ge =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, c, idx(0));
    Value lt =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, c, idx(size));
    return arith::AndIOp::create(b, loc, ge, lt);
  }

  /// Dynamic rows: reads the trailing `i64 rows` argument `argNo` as an index
  /// (clamped to `bound`, so that the 32-bit index math cannot wrap).
  void bindRows(unsigned argNo, int64_t bound) {
    Value r = arg(argNo);
    r = arith::MinUIOp::create(
        b, loc, r, arith::ConstantIntOp::create(b, loc, b.getI64Type(), bound));
    rows = arith::IndexCastOp::create(b, loc, b.getIndexType(), r);
  }
  /// rows · perRow (the number of active threads, or kernel rows).
  Value rowsTimes(int64_t perRow) { return mul(rows, perRow); }

  /// One thread per group of `v` elements, `groups` groups per row of
  /// `numRows`: moves the insertion point into `if (thread < numRows ·
  /// groups)` and returns (the thread's row, the first element of its group).
  std::pair<Value, Value> rowGroup(Value numRows, int64_t groups, int64_t v) {
    Value gid = globalId();
    guard(ult(gid, mul(numRows, groups)));
    return {div(gid, groups), mul(rem(gid, groups), v)};
  }

  /// Element `at` of an integer buffer, as an index.
  Value loadIndex(Value mem, Value at) {
    Value i = memref::LoadOp::create(b, loc, mem, ValueRange{at});
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), i);
  }

  /// blockIdx.x · 256 + threadIdx.x.
  Value globalId() {
    Value bid = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
    Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    return add(mul(bid, kBlock), tid);
  }

  /// Moves the insertion point into `if (cond) { ... }`.
  void guard(Value cond) {
    auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
    b.setInsertionPointToStart(ifOp.thenBlock());
  }

  /// Loads V elements at `off` (a vector when V > 1, aligned to its size up
  /// to 16 bytes: offsets are multiples of V and buffers 16-byte aligned).
  Value load(Value mem, Value off, int64_t v) {
    Type et = cast<MemRefType>(mem.getType()).getElementType();
    if (v == 1)
      return memref::LoadOp::create(b, loc, mem, ValueRange{off});
    auto vt = VectorType::get({v}, et);
    return vector::LoadOp::create(
        b, loc, vt, mem, ValueRange{off}, /*nontemporal=*/false,
        llvm::MaybeAlign(std::min<int64_t>(16, v * elemBytes(et))));
  }
  void store(Value val, Value mem, Value off) {
    auto vt = dyn_cast<VectorType>(val.getType());
    if (!vt) {
      memref::StoreOp::create(b, loc, val, mem, ValueRange{off});
      return;
    }
    int64_t bytes = vt.getNumElements() * elemBytes(vt.getElementType());
    vector::StoreOp::create(b, loc, val, mem, ValueRange{off},
                            /*nontemporal=*/false,
                            llvm::MaybeAlign(std::min<int64_t>(16, bytes)));
  }
  /// A scalar splatted to V lanes (V = 1: the scalar).
  Value splat(Value s, int64_t v) {
    if (v == 1)
      return s;
    return vector::BroadcastOp::create(b, loc,
                                       VectorType::get({v}, s.getType()), s);
  }

  /// Widens f16 (exactly) or converts integers (round to nearest) to f32.
  Value toF32(Value x) {
    Type t = getElementTypeOrSelf(x.getType());
    Type f = b.getF32Type();
    Type target = f;
    if (auto vt = dyn_cast<VectorType>(x.getType()))
      target = VectorType::get(vt.getShape(), f);
    if (t.isF32())
      return x;
    if (isa<FloatType>(t))
      return arith::ExtFOp::create(b, loc, target, x);
    return arith::SIToFPOp::create(b, loc, target, x);
  }
  /// Rounds f32 to `et` (f16: to nearest even); f32 stays.
  Value fromF32(Value x, Type et) {
    if (et.isF32())
      return x;
    Type target = et;
    if (auto vt = dyn_cast<VectorType>(x.getType()))
      target = VectorType::get(vt.getShape(), et);
    return arith::TruncFOp::create(b, loc, target, x);
  }

  /// A workgroup (shared memory) buffer of n f32, 16-byte aligned for
  /// vector accesses.
  Value workgroupF32(int64_t n) {
    auto ty =
        MemRefType::get({n}, b.getF32Type(), AffineMap(),
                        gpu::AddressSpaceAttr::get(
                            b.getContext(), gpu::AddressSpace::Workgroup));
    Value buf = func.addWorkgroupAttribution(ty, loc);
    func.setWorkgroupAttributionAttr(func.getNumWorkgroupAttributions() - 1,
                                     "llvm.align", b.getI64IntegerAttr(16));
    return buf;
  }

  Value lane(Value vec, int64_t i) {
    if (!isa<VectorType>(vec.getType()))
      return vec;
    return vector::ExtractOp::create(b, loc, vec, ArrayRef<int64_t>{i});
  }

  OpBuilder b;
  Location loc;
  gpu::GPUFuncOp func;
  /// The actual dimension-0 size (index) of a dynamic-row kernel, or null.
  Value rows;
};

/// The shape of `t` with a dynamic dimension 0 replaced by `bound`.
SmallVector<int64_t> boundShape(Type t, int64_t bound) {
  SmallVector<int64_t> shape(cast<RankedTensorType>(t).getShape());
  if (!shape.empty() && ShapedType::isDynamic(shape[0]))
    shape[0] = bound;
  return shape;
}

/// A flat memref of the (bound) size of `t`.
MemRefType flatMemRef(Type t, int64_t bound = 0) {
  auto rt = cast<RankedTensorType>(t);
  return MemRefType::get({product(boundShape(t, bound))}, rt.getElementType());
}

/// Kernel argument types: one flat memref per tensor operand, then result,
/// then `i64 rows` for a dynamic-row kernel (`bound` > 0).
SmallVector<Type> tensorArgs(Operation *op, int64_t bound) {
  SmallVector<Type> types;
  for (Type t : op->getOperandTypes())
    types.push_back(flatMemRef(t, bound));
  for (Type t : op->getResultTypes())
    types.push_back(flatMemRef(t, bound));
  if (bound > 0)
    types.push_back(IntegerType::get(op->getContext(), 64));
  return types;
}

/// The rows a kernel addresses for a tensor with dynamic rows: its
/// #trellis.bounds bound, capped so that the tensor has fewer than 2^31
/// elements (the kernels index with 32 bits). The bounds of the decoders'
/// subdivided levels pass that cap (16.7M rows at 256³); the runtime refuses
/// a binding whose actual tensor reaches it (GpuExecutor's
/// checkAddressable), so the cap never truncates silently.
int64_t addressableRows(RankedTensorType t) {
  int64_t bound = mlir::trellis::getDimUpperBound(t, 0);
  int64_t row = std::max<int64_t>(1, product(t.getShape().drop_front()));
  return std::min(bound, kMaxElements / row);
}

/// A tensor's own kernel rows: addressableRows when dimension 0 is dynamic,
/// 0 (static) otherwise.
int64_t ownRows(Type t) {
  auto rt = cast<RankedTensorType>(t);
  return rt.hasStaticShape() ? int64_t(0) : addressableRows(rt);
}

/// The rows of the dynamic dimension 0 that `op`'s kernel is built for: the
/// smallest addressable bound (addressableRows) of its dynamic tensors (they
/// all have the same actual rows), 0 when every tensor is static. Fails on a
/// dynamic dimension other than 0 or a missing bound.
FailureOr<int64_t> rowBound(Operation *op) {
  int64_t bound = 0;
  auto visit = [&](Type t) -> LogicalResult {
    auto rt = dyn_cast<RankedTensorType>(t);
    if (!rt || rt.hasStaticShape())
      return success();
    for (int64_t d = 1; d < rt.getRank(); ++d)
      if (rt.isDynamicDim(d))
        return op->emitError()
               << "has no GPU implementation for the dynamic shape " << t
               << " (only dimension 0 may be dynamic)";
    int64_t b = mlir::trellis::getDimUpperBound(rt, 0);
    if (ShapedType::isDynamic(b))
      return op->emitError() << "has no GPU implementation for " << t
                             << ": dimension 0 has no #trellis.bounds bound";
    b = addressableRows(rt);
    bound = bound ? std::min(bound, b) : b;
    return success();
  };
  for (Type t : op->getResultTypes())
    if (failed(visit(t)))
      return failure();
  for (Type t : op->getOperandTypes())
    if (failed(visit(t)))
      return failure();
  return bound;
}

/// Checks one tensor type of `op`'s kernel: a supported element type,
/// static except (when `bound` > 0) a dynamic dimension 0, fewer than 2^31
/// elements at the bound.
LogicalResult checkKernelTensor(Operation *op, Type t, int64_t bound) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt)
    return op->emitError() << "has no GPU implementation: operand type " << t
                           << " is not a tensor";
  if (!rt.hasStaticShape() && bound == 0)
    return op->emitError() << "has no GPU implementation for the dynamic shape "
                           << t << " (sparse tensors run on the host)";
  if (product(boundShape(rt, bound)) > kMaxElements)
    return op->emitError() << "has no GPU implementation: " << t
                           << " has 2^31 or more elements"
                           << (bound ? " at its bound" : "");
  Type et = rt.getElementType();
  if (!et.isF16() && !et.isF32() && !et.isInteger(32) && !et.isInteger(64))
    return op->emitError() << "has no GPU implementation for element type "
                           << et;
  return success();
}

/// checkKernelTensor for every operand and result of `op`, with one bound.
LogicalResult checkStatic(Operation *op, int64_t bound = 0) {
  for (Type t : op->getOperandTypes())
    if (failed(checkKernelTensor(op, t, bound)))
      return failure();
  for (Type t : op->getResultTypes())
    if (failed(checkKernelTensor(op, t, bound)))
      return failure();
  return success();
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
Type elemOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

double floatAttrOr(Operation *op, StringRef name, double dflt) {
  if (auto a = op->getAttrOfType<FloatAttr>(name))
    return a.getValueAsDouble();
  return dflt;
}
int64_t intAttrOr(Operation *op, StringRef name, int64_t dflt) {
  if (auto a = op->getAttrOfType<IntegerAttr>(name))
    return a.getInt();
  return dflt;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// An operand of an elementwise kernel: the kernel argument and its element
/// strides over the output's dimensions (0 where broadcast).
struct EwOperand {
  unsigned arg;
  SmallVector<int64_t> strides;
};

/// NumPy broadcasting of `in` against `out` (trailing dimensions aligned).
SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> in,
                                      ArrayRef<int64_t> out) {
  SmallVector<int64_t> strides(out.size(), 0);
  int64_t s = 1;
  for (size_t k = 0; k < in.size() && k < out.size(); ++k) {
    size_t di = in.size() - 1 - k, d = out.size() - 1 - k;
    strides[d] = in[di] == 1 && out[d] != 1 ? 0 : s;
    s *= in[di];
  }
  return strides;
}

/// [B, C] broadcast over the tokens of x [B, ..., C], or x's own shape.
SmallVector<int64_t> perSampleStrides(ArrayRef<int64_t> v,
                                      ArrayRef<int64_t> x) {
  if (v == x)
    return broadcastStrides(v, x);
  SmallVector<int64_t> strides(x.size(), 0);
  strides.front() = x.back();
  strides.back() = 1;
  return strides;
}

/// Dynamic rows: whether a modulation vector `v` of x is per sample ([B, C]
/// over x [B, L, C], B dynamic or equal), rather than x-shaped or broadcast
/// by NumPy rules ([1, C], [C]).
bool isPerSampleVector(RankedTensorType v, RankedTensorType x) {
  return v.getRank() == 2 && x.getRank() == 3 && v.getDimSize(0) != 1 &&
         (v.isDynamicDim(0) || v.getDimSize(0) == x.getDimSize(0));
}

/// The f32 (or integer) result from the operands' values at the group that
/// starts at flat output offset `flat`.
using EwBody = std::function<Value(
    KernelBuilder &, ArrayRef<Value> /*operands*/, Value /*flat*/)>;

/// out[i] = body(operands at i): V consecutive elements per thread.
/// `computeF32`: operands are widened to f32 and the result rounded once.
/// Dynamic rows (kb.rows set, `outShape` the bound shape): V also divides
/// the elements of one dimension-0 row, one group per thread (T = row / V).
Launch emitElementwise(KernelBuilder &kb, ArrayRef<int64_t> outShape,
                       ArrayRef<EwOperand> operands, unsigned outArg,
                       bool computeF32, const EwBody &body) {
  // Drop size-1 dimensions and merge dimensions contiguous in every operand.
  SmallVector<int64_t> shape;
  SmallVector<SmallVector<int64_t>> strides(operands.size());
  for (size_t d = 0; d < outShape.size(); ++d) {
    if (outShape[d] == 1)
      continue;
    bool merge = !shape.empty();
    for (size_t i = 0; merge && i < operands.size(); ++i)
      merge = strides[i].back() == operands[i].strides[d] * outShape[d];
    if (merge) {
      shape.back() *= outShape[d];
      for (size_t i = 0; i < operands.size(); ++i)
        strides[i].back() = operands[i].strides[d];
      continue;
    }
    shape.push_back(outShape[d]);
    for (size_t i = 0; i < operands.size(); ++i)
      strides[i].push_back(operands[i].strides[d]);
  }
  if (shape.empty()) {
    shape.push_back(1);
    for (auto &s : strides)
      s.push_back(0);
  }
  // Vector width: 16 bytes of the narrowest type accessed contiguously.
  auto memTy = [&](unsigned a) {
    return cast<MemRefType>(kb.arg(a).getType()).getElementType();
  };
  int64_t minBytes = elemBytes(memTy(outArg));
  for (size_t i = 0; i < operands.size(); ++i)
    if (strides[i].back() == 1)
      minBytes = std::min(minBytes, elemBytes(memTy(operands[i].arg)));
  const bool dynamic = bool(kb.rows);
  const int64_t rowElems = dynamic ? product(outShape.drop_front()) : 0;
  int64_t v = pow2Divisor(shape.back(), 16 / minBytes);
  if (dynamic)
    v = std::min(v, pow2Divisor(rowElems, 16 / minBytes));
  const int64_t total = product(shape);
  const int64_t groups = total / v;
  // Large tensors: U groups per thread, T = groups / U apart (each access
  // still coalesced across the warp), every load issued before the first
  // store: more bytes in flight per thread and a single wave of blocks.
  // Dynamic rows: one group per thread (the spacing would depend on rows).
  const int64_t u =
      !dynamic && groups >= kUnrollMinGroups && groups % 4 == 0 ? 4 : 1;
  const int64_t threads = groups / u;

  Value gid = kb.globalId();
  kb.guard(dynamic ? kb.ult(gid, kb.rowsTimes(rowElems / v))
                   : kb.ult(gid, threads));
  auto loadAt = [&](Value flat) {
    // Multi-index of the group's first element, innermost first.
    SmallVector<Value> index(shape.size());
    Value rest = flat;
    for (int d = int(shape.size()) - 1; d >= 0; --d) {
      index[d] = d == 0 ? rest : kb.rem(rest, shape[d]);
      if (d > 0)
        rest = kb.div(rest, shape[d]);
    }
    SmallVector<Value> vals;
    for (size_t i = 0; i < operands.size(); ++i) {
      Value off = kb.idx(0);
      bool first = true;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (strides[i][d] == 0)
          continue;
        Value term = kb.mul(index[d], strides[i][d]);
        off = first ? term : kb.add(off, term);
        first = false;
      }
      Value mem = kb.arg(operands[i].arg);
      Value x = strides[i].back() == 1 ? kb.load(mem, off, v)
                                       : kb.splat(kb.load(mem, off, 1), v);
      vals.push_back(computeF32 ? kb.toF32(x) : x);
    }
    return vals;
  };
  SmallVector<Value> flats;
  SmallVector<SmallVector<Value>> vals;
  for (int64_t k = 0; k < u; ++k) {
    flats.push_back(kb.mul(kb.add(gid, kb.idx(k * threads)), v));
    vals.push_back(loadAt(flats.back()));
  }
  for (int64_t k = 0; k < u; ++k) {
    Value r = body(kb, vals[k], flats[k]);
    if (computeF32)
      r = kb.fromF32(r, memTy(outArg));
    kb.store(r, kb.arg(outArg), flats[k]);
  }
  Launch l = launch1d(threads);
  if (dynamic)
    l.threadsPerRow = rowElems / v;
  return l;
}

/// The reference's f32 formula of a unary op (runtime/reference/Elementwise).
Value unaryF32(KernelBuilder &kb, StringRef name, Value x) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type t = x.getType();
  auto one = [&] { return kb.f32(1.0, t); };
  auto sigmoidDenom = [&] { // 1 + exp(-x)
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
    return arith::AddFOp::create(b, loc, one(), e);
  };
  if (name == "silu")
    return arith::DivFOp::create(b, loc, x, sigmoidDenom());
  if (name == "sigmoid")
    return arith::DivFOp::create(b, loc, one(), sigmoidDenom());
  if (name == "gelu") {
    // 0.5·x·(1 + tanh(β·(x + κ·x·x·x))), in the reference's order.
    Value k = arith::MulFOp::create(b, loc, kb.f32(double(0.044715f), t), x);
    k = arith::MulFOp::create(b, loc, k, x);
    k = arith::MulFOp::create(b, loc, k, x);
    Value inner = arith::AddFOp::create(b, loc, x, k);
    inner = arith::MulFOp::create(
        b, loc, kb.f32(double(float(0.79788456080286535588)), t), inner);
    Value th = math::TanhOp::create(b, loc, inner);
    Value h = arith::MulFOp::create(b, loc, kb.f32(0.5, t), x);
    return arith::MulFOp::create(b, loc, h,
                                 arith::AddFOp::create(b, loc, one(), th));
  }
  if (name == "tanh")
    return math::TanhOp::create(b, loc, x);
  if (name == "softplus") {
    Value lin = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x,
                                      kb.f32(20.0, t));
    Value sp = math::Log1pOp::create(b, loc, math::ExpOp::create(b, loc, x));
    return arith::SelectOp::create(b, loc, lin, x, sp);
  }
  if (name == "atanh")
    return math::AtanhOp::create(b, loc, x);
  if (name == "exp")
    return math::ExpOp::create(b, loc, x);
  if (name == "log")
    return math::LogOp::create(b, loc, x);
  if (name == "sin")
    return math::SinOp::create(b, loc, x);
  if (name == "cos")
    return math::CosOp::create(b, loc, x);
  if (name == "neg")
    return arith::NegFOp::create(b, loc, x);
  if (name == "sqrt")
    return math::SqrtOp::create(b, loc, x);
  if (name == "abs")
    return math::AbsFOp::create(b, loc, x);
  return {};
}

bool isUnaryName(StringRef n) {
  return llvm::is_contained({"silu", "gelu", "sigmoid", "tanh", "softplus",
                             "atanh", "exp", "log", "sin", "cos", "neg", "sqrt",
                             "abs"},
                            n);
}

Value binary(KernelBuilder &kb, StringRef name, Value x, Value y, bool isInt) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  if (isInt) {
    if (name == "add")
      return arith::AddIOp::create(b, loc, x, y);
    if (name == "sub")
      return arith::SubIOp::create(b, loc, x, y);
    if (name == "mul")
      return arith::MulIOp::create(b, loc, x, y);
    if (name == "maximum")
      return arith::MaxSIOp::create(b, loc, x, y);
    return {};
  }
  if (name == "add")
    return arith::AddFOp::create(b, loc, x, y);
  if (name == "sub")
    return arith::SubFOp::create(b, loc, x, y);
  if (name == "mul")
    return arith::MulFOp::create(b, loc, x, y);
  if (name == "div")
    return arith::DivFOp::create(b, loc, x, y);
  if (name == "maximum") // NaN propagates, as torch.maximum
    return arith::MaximumFOp::create(b, loc, x, y);
  return {};
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

enum class RowKind { LayerNorm, HeadRms, Softmax, LayerNormModulate };

struct RowSpec {
  RowKind kind;
  int64_t rows, n;            ///< rows of n elements (the reduced axis)
  float eps = 0;              ///< layer norms
  int gamma = -1, beta = -1;  ///< argument numbers of the f32 affine vectors
  int64_t heads = 1;          ///< head_rms_norm: gamma row = row % heads
  int shift = -1, scale = -1; ///< layer_norm_modulate
  int64_t tokens = 1;         ///< rows per sample (modulate's [B, C] vectors)
  bool shiftPerRow = false, scalePerRow = false; ///< x-shaped, not [B, C]
  unsigned x = 0, out = 1;
  /// Dynamic rows (kb.rows set): reduced rows per dimension-0 row (`rows` is
  /// then the bound's).
  int64_t rowsPerItem = 0;
  /// gated_residual_norm: the row is first x + gate·h (the gated_residual
  /// kernel's expression) rounded to x's type, then (with `plus`) + plus
  /// rounded again (the add kernel's), stored to argument `residualOut` and
  /// normalized from that rounded value.
  int h = -1, gate = -1, plus = -1, residualOut = -1;
  int64_t gateTokens = 1, plusTokens = 1;      ///< rows per vector row ([B, C])
  bool gatePerRow = false, plusPerRow = false; ///< x-shaped vectors
};

/// How a row kernel holds its row: G lanes (a power of two ≤ 32) per row and
/// K vectors of V elements per lane in registers, or (long rows) a loop of 32
/// lanes over the row.
struct RowTiling {
  int64_t v, g, k;
  bool inRegisters;
};
RowTiling rowTiling(Type xTy, int64_t n) {
  int64_t v = pow2Divisor(n, 16 / elemBytes(xTy));
  int64_t g = pow2Divisor(n / v, 32);
  int64_t k = n / (v * g);
  // Long rows with few lanes (C = 2^m·odd): trade vector width for lanes.
  while (k > 16 && v > 1 && g < 32 && (n / (v / 2)) % (g * 2) == 0) {
    v /= 2;
    g *= 2;
    k = n / (v * g);
  }
  if (k <= 32)
    return {v, g, k, true};
  return {1, 32, k, false};
}

Value warpAllReduce(KernelBuilder &kb, Value v, int64_t lanes, bool isMax) {
  for (int64_t off = lanes / 2; off >= 1; off /= 2) {
    auto sh = gpu::ShuffleOp::create(kb.b, kb.loc, v, int32_t(off), 32,
                                     gpu::ShuffleMode::XOR);
    Value o = sh.getShuffleResult();
    v = isMax ? Value(arith::MaximumFOp::create(kb.b, kb.loc, v, o))
              : Value(arith::AddFOp::create(kb.b, kb.loc, v, o));
  }
  return v;
}

/// The row statistics the per-element output uses.
struct RowStats {
  Value mean, rstd; ///< layer norms
  Value denom;      ///< head_rms_norm: max(‖u‖, 1e-12)
  Value max, sum;   ///< softmax
};

/// The per-column parameters of a row kernel's output at V columns from
/// `col`, as loaded (f32 affine / head_rms_norm γ, the modulation's vectors
/// in their dtype). Loaded with the row, before the reduction, so that their
/// latency overlaps x's instead of following the statistics.
struct RowParams {
  Value gamma, beta, scale, shift;
};

/// `affine`: γ and β staged in workgroup memory by stageAffine, or null.
RowParams loadRowParams(KernelBuilder &kb, const RowSpec &s, Value row,
                        Value col, int64_t v, Value affine = {}) {
  RowParams p;
  switch (s.kind) {
  case RowKind::LayerNorm:
  case RowKind::LayerNormModulate: {
    if (s.gamma >= 0)
      p.gamma =
          affine ? kb.load(affine, col, v) : kb.load(kb.arg(s.gamma), col, v);
    if (s.beta >= 0)
      p.beta = affine ? kb.load(affine, kb.add(col, kb.idx(s.n)), v)
                      : kb.load(kb.arg(s.beta), col, v);
    if (s.kind == RowKind::LayerNormModulate) {
      auto off = [&](bool perRow) {
        return perRow ? kb.add(kb.mul(row, s.n), col)
                      : kb.add(kb.mul(kb.div(row, s.tokens), s.n), col);
      };
      p.scale = kb.load(kb.arg(s.scale), off(s.scalePerRow), v);
      p.shift = kb.load(kb.arg(s.shift), off(s.shiftPerRow), v);
    }
    break;
  }
  case RowKind::HeadRms:
    p.gamma = kb.load(kb.arg(s.gamma),
                      kb.add(kb.mul(kb.rem(row, s.heads), s.n), col), v);
    break;
  case RowKind::Softmax:
    break;
  }
  return p;
}

/// The per-element output of a row kernel from the f32 value x, the row
/// statistics and the column parameters of its V elements.
Value rowOutput(KernelBuilder &kb, const RowSpec &s, Value x,
                const RowStats &st, const RowParams &p, int64_t v) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type t = x.getType();
  auto bc = [&](Value scalar) { return kb.splat(scalar, v); };
  switch (s.kind) {
  case RowKind::LayerNorm:
  case RowKind::LayerNormModulate: {
    Value y = arith::MulFOp::create(
        b, loc, arith::SubFOp::create(b, loc, x, bc(st.mean)), bc(st.rstd));
    if (p.gamma)
      y = arith::MulFOp::create(b, loc, y, p.gamma);
    if (p.beta)
      y = arith::AddFOp::create(b, loc, y, p.beta);
    if (s.kind == RowKind::LayerNormModulate) {
      Value sc = kb.toF32(p.scale);
      Value sh = kb.toF32(p.shift);
      y = arith::MulFOp::create(
          b, loc, y, arith::AddFOp::create(b, loc, kb.f32(1, t), sc));
      y = arith::AddFOp::create(b, loc, y, sh);
    }
    return y;
  }
  case RowKind::HeadRms: {
    // u / max(‖u‖, 1e-12) · γ[h] · √d, in that order.
    Value y = arith::DivFOp::create(b, loc, x, bc(st.denom));
    y = arith::MulFOp::create(b, loc, y, p.gamma);
    return arith::MulFOp::create(
        b, loc, y, kb.f32(double(float(std::sqrt(double(s.n)))), t));
  }
  case RowKind::Softmax: {
    Value e = math::ExpOp::create(b, loc,
                                  arith::SubFOp::create(b, loc, x, bc(st.max)));
    return arith::DivFOp::create(b, loc, e, bc(st.sum));
  }
  }
  return {};
}

/// Sum (or max) of the V lanes of x, in lane order.
/// A layer norm's 1 / sqrt(Σ(x − mean)² / n + eps), f32 (the reference's
/// order of operations).
Value rstdOf(KernelBuilder &kb, Value sumSquares, Value n, float eps) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type f32 = b.getF32Type();
  Value var = arith::DivFOp::create(b, loc, sumSquares, n);
  Value sd = math::SqrtOp::create(
      b, loc, arith::AddFOp::create(b, loc, var, kb.f32(double(eps), f32)));
  return arith::DivFOp::create(b, loc, kb.f32(1.0, f32), sd);
}

Value horizontal(KernelBuilder &kb, Value x, int64_t v, bool isMax) {
  Value acc = kb.lane(x, 0);
  for (int64_t i = 1; i < v; ++i) {
    Value e = kb.lane(x, i);
    acc = isMax ? Value(arith::MaximumFOp::create(kb.b, kb.loc, acc, e))
                : Value(arith::AddFOp::create(kb.b, kb.loc, acc, e));
  }
  return acc;
}

/// Copies a layer norm's f32 γ (to [0, n)) and β (to [n, 2n)) into a
/// workgroup buffer, the block's threads sharing the copy; readable after the
/// next gpu.barrier. Per-thread registers for them would cost as much as x
/// (and halve the blocks per SM), and loads from global memory issued after
/// the first store of the output could not be moved above it.
Value stageAffine(KernelBuilder &kb, const RowSpec &s) {
  OpBuilder &b = kb.b;
  Value affine = kb.workgroupF32(2 * s.n);
  const int64_t vs = pow2Divisor(s.n, 4);
  Value tid = gpu::ThreadIdOp::create(b, kb.loc, gpu::Dimension::x);
  for (int64_t i = 0; i < ceilDiv(s.n, kBlock * vs); ++i) {
    OpBuilder::InsertionGuard ig(b);
    Value c = kb.add(kb.mul(tid, vs), kb.idx(i * kBlock * vs));
    if ((i + 1) * kBlock * vs > s.n)
      kb.guard(kb.ult(c, s.n));
    if (s.gamma >= 0)
      kb.store(kb.load(kb.arg(s.gamma), c, vs), affine, c);
    if (s.beta >= 0)
      kb.store(kb.load(kb.arg(s.beta), c, vs), affine, kb.add(c, kb.idx(s.n)));
  }
  return affine;
}

Launch emitRowKernel(KernelBuilder &kb, const RowSpec &s) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type xTy = cast<MemRefType>(kb.arg(s.x).getType()).getElementType();
  Type outTy = cast<MemRefType>(kb.arg(s.out).getType()).getElementType();
  const RowTiling tiling = rowTiling(xTy, s.n);
  const int64_t v = tiling.v, g = tiling.g, k = tiling.k;
  const bool inRegisters = tiling.inRegisters;
  assert((inRegisters || s.h < 0) && "a residual row kernel needs registers");
  const int64_t threads = s.rows * g;

  Value gid = kb.globalId();
  Value row = kb.div(gid, g);
  Value laneId = kb.rem(gid, g);
  // Every lane takes part in the shuffles: rows past the end are clamped and
  // only the stores are guarded. Dynamic rows: clamped to the actual rows,
  // and with no rows the whole (one-block) grid returns at once.
  Value valid, rowc;
  if (kb.rows) {
    kb.guard(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, kb.rows,
                                   kb.idx(0)));
    Value n = kb.rowsTimes(s.rowsPerItem);
    valid = kb.ult(row, n);
    rowc = arith::MinUIOp::create(b, loc, row,
                                  arith::SubIOp::create(b, loc, n, kb.idx(1)));
  } else {
    valid = kb.ult(row, s.rows);
    rowc = arith::MinUIOp::create(b, loc, row, kb.idx(s.rows - 1));
  }
  Value base = kb.mul(rowc, s.n);
  RowStats st;
  if (inRegisters) {
    SmallVector<Value> xs, cols, residuals;
    SmallVector<RowParams> params;
    for (int64_t j = 0; j < k; ++j) {
      Value col = kb.add(kb.mul(laneId, v), kb.idx(j * g * v));
      cols.push_back(col);
      Value x = kb.toF32(kb.load(kb.arg(s.x), kb.add(base, col), v));
      if (s.h >= 0) { // x + gate·h, rounded as the gated_residual kernel does
        Value h = kb.toF32(kb.load(kb.arg(s.h), kb.add(base, col), v));
        Value gateOff =
            s.gatePerRow ? kb.add(base, col)
                         : kb.add(kb.mul(kb.div(rowc, s.gateTokens), s.n), col);
        Value gate = kb.toF32(kb.load(kb.arg(s.gate), gateOff, v));
        Value r =
            kb.fromF32(arith::AddFOp::create(
                           b, loc, x, arith::MulFOp::create(b, loc, gate, h)),
                       xTy);
        if (s.plus >= 0) {
          Value plusOff =
              s.plusPerRow
                  ? kb.add(base, col)
                  : kb.add(kb.mul(kb.div(rowc, s.plusTokens), s.n), col);
          Value plus = kb.toF32(kb.load(kb.arg(s.plus), plusOff, v));
          r = kb.fromF32(arith::AddFOp::create(b, loc, kb.toF32(r), plus), xTy);
        }
        residuals.push_back(r);
        x = kb.toF32(r);
      }
      xs.push_back(x);
    }
    // The column parameters are loaded with x, so that their latency
    // overlaps x's instead of following the statistics; a layer norm's f32
    // γ / β go through workgroup memory (stageAffine).
    Value affine;
    if (s.kind == RowKind::LayerNorm && (s.gamma >= 0 || s.beta >= 0) &&
        s.n <= kMaxStagedAffine)
      affine = stageAffine(kb, s);
    else
      for (int64_t j = 0; j < k; ++j)
        params.push_back(loadRowParams(kb, s, rowc, cols[j], v));
    auto reduce = [&](function_ref<Value(Value)> f, bool isMax) {
      Value acc;
      for (Value x : xs) {
        Value h = horizontal(kb, f(x), v, isMax);
        acc = !acc    ? h
              : isMax ? Value(arith::MaximumFOp::create(b, loc, acc, h))
                      : Value(arith::AddFOp::create(b, loc, acc, h));
      }
      return warpAllReduce(kb, acc, g, isMax);
    };
    Value nF = kb.f32(double(s.n), b.getF32Type());
    switch (s.kind) {
    case RowKind::LayerNorm:
    case RowKind::LayerNormModulate: {
      Value sum = reduce([](Value x) { return x; }, false);
      st.mean = arith::DivFOp::create(b, loc, sum, nF);
      Value meanV = kb.splat(st.mean, v);
      Value sq = reduce(
          [&](Value x) {
            Value d = arith::SubFOp::create(b, loc, x, meanV);
            return Value(arith::MulFOp::create(b, loc, d, d));
          },
          false);
      st.rstd = rstdOf(kb, sq, nF, s.eps);
      break;
    }
    case RowKind::HeadRms: {
      Value ss = reduce(
          [&](Value x) { return Value(arith::MulFOp::create(b, loc, x, x)); },
          false);
      Value norm = math::SqrtOp::create(b, loc, ss);
      st.denom = arith::MaximumFOp::create(
          b, loc, norm, kb.f32(double(1e-12f), b.getF32Type()));
      break;
    }
    case RowKind::Softmax: {
      st.max = reduce([](Value x) { return x; }, true);
      Value maxV = kb.splat(st.max, v);
      st.sum = reduce(
          [&](Value x) {
            return Value(math::ExpOp::create(
                b, loc, arith::SubFOp::create(b, loc, x, maxV)));
          },
          false);
      break;
    }
    }
    if (affine) {
      gpu::BarrierOp::create(b, loc);
      for (int64_t j = 0; j < k; ++j)
        params.push_back(loadRowParams(kb, s, rowc, cols[j], v, affine));
    }
    kb.guard(valid);
    for (int64_t j = 0; j < k; ++j) {
      Value y = rowOutput(kb, s, xs[j], st, params[j], v);
      kb.store(kb.fromF32(y, outTy), kb.arg(s.out), kb.add(base, cols[j]));
      if (s.residualOut >= 0)
        kb.store(residuals[j], kb.arg(s.residualOut), kb.add(base, cols[j]));
    }
    Launch l = launch1d(threads);
    if (kb.rows)
      l.threadsPerRow = s.rowsPerItem * g;
    return l;
  }

  // Loop path (long rows): 32 lanes stride over the row, reading it again
  // for each statistic.
  auto loopReduce = [&](function_ref<Value(Value)> f, bool isMax) {
    Value init = kb.f32(isMax ? -INFINITY : 0.0, b.getF32Type());
    auto loop = scf::ForOp::create(
        b, loc, laneId, kb.idx(s.n), kb.idx(g), ValueRange{init},
        [&](OpBuilder &nb, Location l, Value j, ValueRange acc) {
          OpBuilder::InsertionGuard ig(kb.b);
          kb.b.setInsertionPoint(nb.getInsertionBlock(),
                                 nb.getInsertionPoint());
          Value x = kb.toF32(kb.load(kb.arg(s.x), kb.add(base, j), 1));
          Value fx = f(x);
          Value next =
              isMax ? Value(arith::MaximumFOp::create(kb.b, l, acc[0], fx))
                    : Value(arith::AddFOp::create(kb.b, l, acc[0], fx));
          scf::YieldOp::create(kb.b, l, next);
        });
    return warpAllReduce(kb, loop.getResult(0), g, isMax);
  };
  Value nF = kb.f32(double(s.n), b.getF32Type());
  switch (s.kind) {
  case RowKind::LayerNorm:
  case RowKind::LayerNormModulate: {
    st.mean = arith::DivFOp::create(
        b, loc, loopReduce([](Value x) { return x; }, false), nF);
    Value mean = st.mean;
    Value sq = loopReduce(
        [&](Value x) {
          Value d = arith::SubFOp::create(kb.b, kb.loc, x, mean);
          return Value(arith::MulFOp::create(kb.b, kb.loc, d, d));
        },
        false);
    st.rstd = rstdOf(kb, sq, nF, s.eps);
    break;
  }
  case RowKind::HeadRms: {
    Value ss = loopReduce(
        [&](Value x) {
          return Value(arith::MulFOp::create(kb.b, kb.loc, x, x));
        },
        false);
    st.denom =
        arith::MaximumFOp::create(b, loc, math::SqrtOp::create(b, loc, ss),
                                  kb.f32(double(1e-12f), b.getF32Type()));
    break;
  }
  case RowKind::Softmax: {
    st.max = loopReduce([](Value x) { return x; }, true);
    Value mx = st.max;
    st.sum = loopReduce(
        [&](Value x) {
          return Value(math::ExpOp::create(
              kb.b, kb.loc, arith::SubFOp::create(kb.b, kb.loc, x, mx)));
        },
        false);
    break;
  }
  }
  kb.guard(valid);
  scf::ForOp::create(
      b, loc, laneId, kb.idx(s.n), kb.idx(g), ValueRange{},
      [&](OpBuilder &nb, Location l, Value j, ValueRange) {
        OpBuilder::InsertionGuard ig(kb.b);
        kb.b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
        Value x = kb.toF32(kb.load(kb.arg(s.x), kb.add(base, j), 1));
        Value y = rowOutput(kb, s, x, st, loadRowParams(kb, s, rowc, j, 1), 1);
        kb.store(kb.fromF32(y, outTy), kb.arg(s.out), kb.add(base, j));
        scf::YieldOp::create(kb.b, l);
      });
  Launch l = launch1d(threads);
  if (kb.rows)
    l.threadsPerRow = s.rowsPerItem * g;
  return l;
}

/// Normalization / softmax over a non-last axis of x viewed as
/// [outer, n, inner]: one thread per (outer, inner) position.
Launch emitAxisKernel(KernelBuilder &kb, const RowSpec &s, int64_t outer,
                      int64_t inner) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type outTy = cast<MemRefType>(kb.arg(s.out).getType()).getElementType();
  const int64_t items = outer * inner;
  Value gid = kb.globalId();
  kb.guard(kb.ult(gid, items));
  Value base =
      kb.add(kb.mul(kb.div(gid, inner), s.n * inner), kb.rem(gid, inner));
  Type f32 = b.getF32Type();
  auto at = [&](Value j) { return kb.add(base, kb.mul(j, inner)); };
  auto loopReduce = [&](function_ref<Value(Value)> f, bool isMax) {
    Value init = kb.f32(isMax ? -INFINITY : 0.0, f32);
    auto loop = scf::ForOp::create(
        b, loc, kb.idx(0), kb.idx(s.n), kb.idx(1), ValueRange{init},
        [&](OpBuilder &nb, Location l, Value j, ValueRange acc) {
          OpBuilder::InsertionGuard ig(kb.b);
          kb.b.setInsertionPoint(nb.getInsertionBlock(),
                                 nb.getInsertionPoint());
          Value fx = f(kb.toF32(kb.load(kb.arg(s.x), at(j), 1)));
          Value next =
              isMax ? Value(arith::MaximumFOp::create(kb.b, l, acc[0], fx))
                    : Value(arith::AddFOp::create(kb.b, l, acc[0], fx));
          scf::YieldOp::create(kb.b, l, next);
        });
    return loop.getResult(0);
  };
  Value nF = kb.f32(double(s.n), f32);
  RowStats st;
  if (s.kind == RowKind::Softmax) {
    st.max = loopReduce([](Value x) { return x; }, true);
    Value mx = st.max;
    st.sum = loopReduce(
        [&](Value x) {
          return Value(math::ExpOp::create(
              kb.b, kb.loc, arith::SubFOp::create(kb.b, kb.loc, x, mx)));
        },
        false);
  } else {
    st.mean = arith::DivFOp::create(
        b, loc, loopReduce([](Value x) { return x; }, false), nF);
    Value mean = st.mean;
    Value sq = loopReduce(
        [&](Value x) {
          Value d = arith::SubFOp::create(kb.b, kb.loc, x, mean);
          return Value(arith::MulFOp::create(kb.b, kb.loc, d, d));
        },
        false);
    st.rstd = rstdOf(kb, sq, nF, s.eps);
  }
  scf::ForOp::create(
      b, loc, kb.idx(0), kb.idx(s.n), kb.idx(1), ValueRange{},
      [&](OpBuilder &nb, Location l, Value j, ValueRange) {
        OpBuilder::InsertionGuard ig(kb.b);
        kb.b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
        Value x = kb.toF32(kb.load(kb.arg(s.x), at(j), 1));
        Value y =
            rowOutput(kb, s, x, st, loadRowParams(kb, s, Value(), j, 1), 1);
        kb.store(kb.fromF32(y, outTy), kb.arg(s.out), at(j));
        scf::YieldOp::create(kb.b, l);
      });
  return launch1d(items);
}

/// Layer norm over a non-last axis of x viewed as [outer, n, inner], the
/// channels split across the block: P threads of a block take P position
/// groups (V consecutive inner positions each, one vector access), the
/// 256 / P = S slices of the block split the n channels (channel c to slice
/// c % S), so a thread holds kc = n / S vectors in registers and x is read
/// once. Partial sums meet in workgroup memory. Returns failure when no
/// configuration keeps kc · V ≤ 32 values per thread, or γ / β are too long
/// to stage.
FailureOr<Launch> emitChannelSplitLayerNorm(KernelBuilder &kb, const RowSpec &s,
                                            int64_t outer, int64_t inner) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  Type xTy = cast<MemRefType>(kb.arg(s.x).getType()).getElementType();
  Type outTy = cast<MemRefType>(kb.arg(s.out).getType()).getElementType();
  const int64_t eb = std::max(elemBytes(xTy), elemBytes(outTy));
  const int64_t vMax = pow2Divisor(inner, 16 / eb);
  // Most contiguous bytes per channel and warp (up to a 128-byte line), then
  // the fewest slices (the cross-slice sum reads one vector per slice), each
  // P with its widest vector.
  int64_t p = 0, v = 0, bestScore = -1;
  for (int64_t pc = kBlock; pc >= 1; pc /= 2) {
    const int64_t slices = kBlock / pc;
    if (s.n % slices)
      continue;
    for (int64_t vc = vMax; vc >= 1; vc /= 2) {
      if (s.n / slices * vc > 32)
        continue;
      int64_t score =
          std::min<int64_t>(std::min<int64_t>(pc, 32) * vc * eb, 128);
      if (score > bestScore) {
        bestScore = score;
        p = pc;
        v = vc;
      }
      break;
    }
  }
  if (bestScore < 0 ||
      ((s.gamma >= 0 || s.beta >= 0) && s.n > kMaxStagedAffine))
    return failure();
  const int64_t slices = kBlock / p, kc = s.n / slices;
  const int64_t groupsPerOuter = inner / v, groups = outer * groupsPerOuter;
  Type f32 = b.getF32Type();
  auto vecTy = v == 1 ? f32 : Type(VectorType::get({v}, f32));
  Value smem = kb.workgroupF32(2 * kBlock * v);

  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value bid = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value pos = kb.rem(tid, p), slice = kb.div(tid, p);
  Value group = kb.add(kb.mul(bid, p), pos);
  // Every thread takes part in the barriers: groups past the end are
  // clamped and only the stores are guarded.
  Value valid = kb.ult(group, groups);
  Value groupc = arith::MinUIOp::create(b, loc, group, kb.idx(groups - 1));
  Value base = kb.add(kb.mul(kb.div(groupc, groupsPerOuter), s.n * inner),
                      kb.mul(kb.rem(groupc, groupsPerOuter), v));
  SmallVector<Value> xs, offs;
  for (int64_t i = 0; i < kc; ++i) {
    Value c = kb.add(slice, kb.idx(i * slices));
    offs.push_back(kb.add(base, kb.mul(c, inner)));
    xs.push_back(kb.toF32(kb.load(kb.arg(s.x), offs.back(), v)));
  }
  // γ / β through workgroup memory (stageAffine; the first blockSum's
  // barrier publishes them).
  Value affine;
  if (s.gamma >= 0 || s.beta >= 0)
    affine = stageAffine(kb, s);
  // The block-wide sum over the channels of f(x), per position (lane order:
  // each slice's channels in order, then the slices in order).
  auto blockSum = [&](function_ref<Value(Value)> f, int64_t half) {
    Value acc;
    for (Value x : xs) {
      Value fx = f(x);
      acc = acc ? Value(arith::AddFOp::create(b, loc, acc, fx)) : fx;
    }
    kb.store(acc, smem, kb.add(kb.mul(tid, v), kb.idx(half * kBlock * v)));
    gpu::BarrierOp::create(b, loc);
    Value total;
    for (int64_t j = 0; j < slices; ++j) {
      Value part = kb.load(
          smem, kb.add(kb.mul(pos, v), kb.idx((half * kBlock + j * p) * v)), v);
      total = total ? Value(arith::AddFOp::create(b, loc, total, part)) : part;
    }
    return total;
  };
  Value nF = kb.f32(double(s.n), vecTy);
  Value mean =
      arith::DivFOp::create(b, loc, blockSum([](Value x) { return x; }, 0), nF);
  Value sq = blockSum(
      [&](Value x) {
        Value d = arith::SubFOp::create(b, loc, x, mean);
        return Value(arith::MulFOp::create(b, loc, d, d));
      },
      1);
  Value var = arith::DivFOp::create(b, loc, sq, nF);
  Value sd = math::SqrtOp::create(
      b, loc, arith::AddFOp::create(b, loc, var, kb.f32(double(s.eps), vecTy)));
  Value rstd = arith::DivFOp::create(b, loc, kb.f32(1.0, vecTy), sd);
  kb.guard(valid);
  for (int64_t i = 0; i < kc; ++i) {
    Value y = arith::MulFOp::create(
        b, loc, arith::SubFOp::create(b, loc, xs[i], mean), rstd);
    Value c = kb.add(slice, kb.idx(i * slices));
    if (s.gamma >= 0)
      y = arith::MulFOp::create(b, loc, y, kb.splat(kb.load(affine, c, 1), v));
    if (s.beta >= 0)
      y = arith::AddFOp::create(
          b, loc, y, kb.splat(kb.load(affine, kb.add(c, kb.idx(s.n)), 1), v));
    kb.store(kb.fromF32(y, outTy), kb.arg(s.out), offs[i]);
  }
  Launch l;
  l.block = {kBlock, 1, 1};
  l.grid = {ceilDiv(groups, p), 1, 1};
  return l;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// Split (toPieces) or concat along `axis` of a row-major tensor viewed as
/// [outer, dim, inner]: the thread walks the whole (input or output) tensor
/// in groups of V elements and picks its piece with an if-chain. Dynamic
/// rows (axis >= 1): `outer` is for the bound `bound` of dimension 0.
Launch emitSplitConcat(KernelBuilder &kb, bool toPieces, unsigned whole,
                       ArrayRef<unsigned> pieces, ArrayRef<int64_t> sizes,
                       int64_t outer, int64_t inner, int64_t bound = 0) {
  const int64_t dim = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
  Type et = cast<MemRefType>(kb.arg(whole).getType()).getElementType();
  int64_t v = 16 / elemBytes(et);
  for (int64_t s : sizes)
    v = pow2Divisor(s * inner, v);
  const int64_t rowLen = dim * inner;
  const int64_t groups = outer * rowLen / v;
  // Groups per dimension-0 row (V divides every piece's row).
  const int64_t perRow = kb.rows ? groups / bound : 0;
  Value gid = kb.globalId();
  kb.guard(kb.rows ? kb.ult(gid, kb.rowsTimes(perRow)) : kb.ult(gid, groups));
  Value flat = kb.mul(gid, v);
  Value o = kb.div(flat, rowLen);
  Value col = kb.rem(flat, rowLen);
  Value data;
  if (toPieces)
    data = kb.load(kb.arg(whole), flat, v);
  std::function<void(size_t, int64_t)> piece = [&](size_t i, int64_t at) {
    const int64_t len = sizes[i] * inner;
    auto emit = [&] {
      Value local = kb.add(
          kb.mul(o, len), arith::SubIOp::create(kb.b, kb.loc, col, kb.idx(at)));
      if (toPieces)
        kb.store(data, kb.arg(pieces[i]), local);
      else
        kb.store(kb.load(kb.arg(pieces[i]), local, v), kb.arg(whole), flat);
    };
    if (i + 1 == pieces.size()) {
      emit();
      return;
    }
    auto ifOp = scf::IfOp::create(kb.b, kb.loc, kb.ult(col, at + len),
                                  /*withElseRegion=*/true);
    OpBuilder::InsertionGuard ig(kb.b);
    kb.b.setInsertionPointToStart(ifOp.thenBlock());
    emit();
    kb.b.setInsertionPointToStart(ifOp.elseBlock());
    piece(i + 1, at + len);
  };
  piece(0, 0);
  Launch l = launch1d(groups);
  l.threadsPerRow = perRow;
  return l;
}

/// out[i] = in[src(i)] for every output element (V elements per thread when
/// `v` > 1: src(i) of a group's first element, the group contiguous in both).
Launch emitGather(KernelBuilder &kb, ArrayRef<int64_t> outShape, int64_t v,
                  function_ref<Value(ArrayRef<Value>)> src) {
  const int64_t groups = product(outShape) / v;
  Value gid = kb.globalId();
  kb.guard(kb.ult(gid, groups));
  Value flat = kb.mul(gid, v);
  SmallVector<Value> index(outShape.size());
  Value rest = flat;
  for (int d = int(outShape.size()) - 1; d >= 0; --d) {
    index[d] = d == 0 ? rest : kb.rem(rest, outShape[d]);
    if (d > 0)
      rest = kb.div(rest, outShape[d]);
  }
  kb.store(kb.load(kb.arg(0), src(index), v), kb.arg(1), flat);
  return launch1d(groups);
}

/// The row-index kernels of the sparse resampling ops (trellis.gather_rows,
/// trellis.segment_mean, trellis.sparse.subdivide_features): each output row
/// reads whole rows of x picked by an index (subdivide: row r / 8, its
/// parent's, spec §6.5). Every tensor is flattened at
/// its own bound (x, the index and the result have different row counts);
/// the actual rows (the result's) come last. V elements per thread, V the
/// largest power of two dividing the row up to 16 bytes.
FailureOr<Launch> emitRowIndexKernel(Operation *op, StringRef n,
                                     gpu::GPUModuleOp module, StringRef name) {
  // (rowBound checks that only dimension 0 is dynamic, and bounded.)
  if (failed(rowBound(op)))
    return failure();
  SmallVector<Type> types(op->getOperandTypes());
  types.push_back(op->getResult(0).getType());
  for (Type t : types)
    if (failed(checkKernelTensor(op, t, ownRows(t))))
      return failure();
  SmallVector<Type> args;
  for (Type t : op->getOperandTypes())
    args.push_back(flatMemRef(t, ownRows(t)));
  Type outTy = op->getResult(0).getType();
  args.push_back(flatMemRef(outTy, ownRows(outTy)));
  const int64_t bound = ownRows(outTy);
  if (bound)
    args.push_back(IntegerType::get(op->getContext(), 64));
  KernelBuilder kb(module, name, args, op->getLoc());
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  const unsigned outArg = op->getNumOperands();
  ArrayRef<int64_t> outShape = shapeOf(op->getResult(0));
  const int64_t rowElems = product(outShape.drop_front());
  const int64_t v =
      pow2Divisor(rowElems, 16 / elemBytes(elemOf(op->getOperand(0))));
  const int64_t perRow = rowElems / v;
  Value rows;
  if (bound) {
    kb.bindRows(outArg + 1, bound);
    rows = kb.rows;
  } else {
    rows = kb.idx(outShape[0]);
  }
  auto [r, e] = kb.rowGroup(rows, perRow, v);
  auto indexAt = [&](unsigned arg, Value at) {
    return kb.loadIndex(kb.arg(arg), at);
  };
  auto rowStart = [&](Value row) { return kb.mul(row, rowElems); };
  Value result;
  if (n == "gather_rows") {
    result = kb.load(kb.arg(0), kb.add(rowStart(indexAt(1, r)), e), v);
  } else if (n == "sparse.subdivide_features") {
    result = kb.load(kb.arg(0), kb.add(rowStart(kb.div(r, 8)), e), v);
  } else { // segment_mean
    Value begin = indexAt(1, r), end = indexAt(1, kb.add(r, kb.idx(1)));
    Type accTy = v == 1 ? Type(b.getF32Type())
                        : Type(VectorType::get({v}, b.getF32Type()));
    auto loop = scf::ForOp::create(
        b, loc, begin, end, kb.idx(1), ValueRange{kb.zeroOf(accTy)},
        [&](OpBuilder &nb, Location l, Value j, ValueRange acc) {
          OpBuilder::InsertionGuard ig(kb.b);
          kb.b.setInsertionPoint(nb.getInsertionBlock(),
                                 nb.getInsertionPoint());
          Value x = kb.toF32(
              kb.load(kb.arg(0), kb.add(rowStart(indexAt(2, j)), e), v));
          scf::YieldOp::create(kb.b, l,
                               Value(arith::AddFOp::create(kb.b, l, acc[0], x)));
        });
    // n_s + extra_count, exact in f32 (below 2^24).
    Value count = arith::AddIOp::create(
        b, loc, arith::SubIOp::create(b, loc, end, begin),
        kb.idx(intAttrOr(op, "extra_count", 0)));
    Value countF = arith::UIToFPOp::create(
        b, loc, b.getF32Type(),
        arith::IndexCastOp::create(b, loc, b.getI32Type(), count));
    Value sum = loop.getResult(0);
    result = kb.fromF32(
        arith::DivFOp::create(b, loc, sum, kb.splat(countF, v)),
        elemOf(op->getResult(0)));
  }
  kb.store(result, kb.arg(outArg), kb.add(rowStart(r), e));
  Launch l = launch1d(bound ? bound * perRow : outShape[0] * perRow);
  if (bound)
    l.threadsPerRow = perRow;
  return l;
}

/// The elementwise half of trellis.sparse.group_norm: parameters (x,/// The
/// elementwise half of trellis.sparse.group_norm: parameters (x, coords, γ, β,
/// out, stats, rows). The runtime's reduction kernels write stats f32 [B · G,
/// 2] = (mean, 1/√(var + eps)) per (sample, group) first; then y = (x − mean) ·
/// rstd · γ[c] + β[c] in f32, one rounding, the row's sample from the
/// coordinates' batch column (coords int32 [N, 4]). V channels per thread, V
/// dividing the group width (one statistics pair).
FailureOr<Launch> emitGroupNormApplyKernel(Operation *op,
                                           gpu::GPUModuleOp module,
                                           StringRef name) {
  auto norm = cast<mlir::trellis::SparseGroupNormOp>(op);
  auto xTy = cast<RankedTensorType>(norm.getFeats().getType());
  auto coordsTy = cast<mlir::trellis::CoordsType>(norm.getCoords().getType());
  if (failed(rowBound(op)))
    return failure();
  for (Value v :
       {norm.getFeats(), norm.getWeight(), norm.getBias(), norm.getResult()})
    if (failed(checkKernelTensor(op, v.getType(), ownRows(v.getType()))))
      return failure();
  const int64_t rows = ownRows(xTy), c = xTy.getDimSize(1),
                groups = norm.getGroups();
  if (groups < 1 || c % groups != 0)
    return op->emitError() << "has no GPU implementation: " << c
                           << " channels in " << groups << " groups";
  Type et = xTy.getElementType();
  MLIRContext *ctx = op->getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32);
  // At most one sample per row: B ≤ the coordinates' bound.
  const int64_t coordRows = std::min(coordsTy.getBound(), kMaxElements / 4);
  const int64_t statRows =
      std::min(coordsTy.getBound(), kMaxElements / (2 * groups));
  KernelBuilder kb(
      module, name,
      {flatMemRef(xTy, rows), MemRefType::get({coordRows * 4}, i32),
       MemRefType::get({c}, f32), MemRefType::get({c}, f32),
       flatMemRef(xTy, rows), MemRefType::get({statRows * groups * 2}, f32),
       IntegerType::get(ctx, 64)},
      op->getLoc());
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  kb.bindRows(6, rows);
  const int64_t width = c / groups;
  const int64_t v = pow2Divisor(width, 16 / elemBytes(et));
  const int64_t perRow = c / v;
  auto [r, e] = kb.rowGroup(kb.rows, perRow, v);
  Value sample = kb.loadIndex(kb.arg(1), kb.mul(r, 4));
  Value item = kb.add(kb.mul(sample, groups), kb.div(e, width));
  Value mean =
      memref::LoadOp::create(b, loc, kb.arg(5), ValueRange{kb.mul(item, 2)});
  Value rstd = memref::LoadOp::create(
      b, loc, kb.arg(5), ValueRange{kb.add(kb.mul(item, 2), kb.idx(1))});
  Value x = kb.toF32(kb.load(kb.arg(0), kb.add(kb.mul(r, c), e), v));
  Value y = arith::MulFOp::create(
      b, loc, arith::SubFOp::create(b, loc, x, kb.splat(mean, v)),
      kb.splat(rstd, v));
  y = arith::MulFOp::create(b, loc, y, kb.load(kb.arg(2), e, v));
  y = arith::AddFOp::create(b, loc, y, kb.load(kb.arg(3), e, v));
  kb.store(kb.fromF32(y, et), kb.arg(4), kb.add(kb.mul(r, c), e));
  Launch l = launch1d(rows * perRow);
  l.threadsPerRow = perRow;
  return l;
}

//===----------------------------------------------------------------------===//
// Per-op dispatch
//===----------------------------------------------------------------------===//

/// `shape`: x's (bound) shape.
FailureOr<Launch> emitLayerNorm(Operation *op, KernelBuilder &kb,
                                ArrayRef<int64_t> shape) {
  int64_t rank = int64_t(shape.size());
  int64_t axis = intAttrOr(op, "axis", -1);
  if (axis < 0)
    axis += rank;
  RowSpec s{RowKind::LayerNorm, 0, shape[axis]};
  s.eps = float(floatAttrOr(op, "eps", 1e-5));
  if (op->getNumOperands() == 3) {
    s.gamma = 1;
    s.beta = 2;
  }
  s.x = 0;
  s.out = op->getNumOperands();
  int64_t outer = product(shape.take_front(axis));
  int64_t inner = product(shape.drop_front(axis + 1));
  if (inner == 1) {
    s.rows = outer;
    if (kb.rows)
      s.rowsPerItem = outer / shape.front();
    return emitRowKernel(kb, s);
  }
  if (kb.rows) {
    kb.func.erase();
    return op->emitError() << "has no GPU implementation with dynamic rows "
                              "over a non-last axis";
  }
  FailureOr<Launch> split = emitChannelSplitLayerNorm(kb, s, outer, inner);
  if (succeeded(split))
    return split;
  return emitAxisKernel(kb, s, outer, inner);
}

FailureOr<Launch> emitTimestepEmbedding(Operation *op, KernelBuilder &kb,
                                        gpu::GPUModuleOp module,
                                        StringRef name) {
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  const int64_t batch = shapeOf(op->getOperand(0))[0];
  const int64_t dim = intAttrOr(op, "dim", 256);
  const double maxPeriod = floatAttrOr(op, "max_period", 10000.0);
  const int64_t half = dim / 2;
  // The reference's table: (f32(−ln P)·j)/half in f32, exp in double,
  // rounded once to f32.
  SmallVector<float> freq;
  const float negLog = float(-std::log(maxPeriod));
  for (int64_t j = 0; j < half; ++j)
    freq.push_back(float(std::exp(double((negLog * float(j)) / float(half)))));
  std::string table = (name + "_freq").str();
  {
    OpBuilder mb(module.getContext());
    mb.setInsertionPointToStart(module.getBody());
    auto ty = MemRefType::get({std::max<int64_t>(1, half)}, mb.getF32Type());
    if (freq.empty())
      freq.push_back(0.0f);
    memref::GlobalOp::create(
        mb, loc, table, mb.getStringAttr("private"), ty,
        DenseElementsAttr::get(
            RankedTensorType::get(ty.getShape(), mb.getF32Type()),
            ArrayRef<float>(freq)),
        /*constant=*/true, /*alignment=*/IntegerAttr());
  }
  Value gid = kb.globalId();
  kb.guard(kb.ult(gid, batch * half));
  Value bi = kb.div(gid, half), j = kb.rem(gid, half);
  auto ty = MemRefType::get({std::max<int64_t>(1, half)}, b.getF32Type());
  Value tab = memref::GetGlobalOp::create(b, loc, ty, table);
  Value f = memref::LoadOp::create(b, loc, tab, ValueRange{j});
  Value t = memref::LoadOp::create(b, loc, kb.arg(0), ValueRange{bi});
  Value arg = arith::MulFOp::create(b, loc, t, f); // the f32 product τ·f_j
  // cos/sin of the f32 argument in double, rounded once (as the reference).
  Value argD = arith::ExtFOp::create(b, loc, b.getF64Type(), arg);
  Value c = arith::TruncFOp::create(b, loc, b.getF32Type(),
                                    math::CosOp::create(b, loc, argD));
  Value sn = arith::TruncFOp::create(b, loc, b.getF32Type(),
                                     math::SinOp::create(b, loc, argD));
  Value row = kb.mul(bi, dim);
  kb.store(c, kb.arg(1), kb.add(row, j));
  kb.store(sn, kb.arg(1), kb.add(row, kb.add(j, kb.idx(half))));
  if (dim % 2 == 1) { // the reference's zero pad column
    Value first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, j, kb.idx(0));
    kb.guard(first);
    kb.store(kb.f32(0, b.getF32Type()), kb.arg(1),
             kb.add(row, kb.idx(dim - 1)));
  }
  return launch1d(batch * half);
}

FailureOr<Launch> emitPermute(Operation *op, KernelBuilder &kb) {
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  auto permAttr = op->getAttrOfType<DenseI64ArrayAttr>("perm");
  if (!permAttr)
    return op->emitError() << "has no GPU implementation: missing 'perm'";
  ArrayRef<int64_t> perm = permAttr.asArrayRef();
  const int64_t rank = int64_t(in.size());
  SmallVector<int64_t> inStride(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    inStride[d] = inStride[d + 1] * in[d + 1];
  int64_t v = 1;
  if (rank > 0 && perm.back() == rank - 1)
    v = pow2Divisor(out.back(), 16 / elemBytes(elemOf(op->getOperand(0))));
  return emitGather(kb, out, v, [&](ArrayRef<Value> index) {
    Value off = kb.idx(0);
    for (int64_t d = 0; d < rank; ++d)
      if (out[d] != 1)
        off = kb.add(off, kb.mul(index[d], inStride[perm[d]]));
    return off;
  });
}

FailureOr<Launch> emitPixelShuffle(Operation *op, KernelBuilder &kb) {
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  const int64_t f = intAttrOr(op, "factor", 2);
  const int64_t c = out[1], d = in[2], h = in[3], w = in[4];
  // out[b, c, f·x+s1, f·y+s2, f·z+s3] = in[b, c·f³ + s1·f² + s2·f + s3, x, y,
  // z]
  return emitGather(kb, out, 1, [&](ArrayRef<Value> i) {
    Value ic =
        kb.add(kb.mul(i[1], f * f * f),
               kb.add(kb.mul(kb.rem(i[2], f), f * f),
                      kb.add(kb.mul(kb.rem(i[3], f), f), kb.rem(i[4], f))));
    Value ch = kb.add(kb.mul(i[0], c * f * f * f), ic);
    Value off =
        kb.add(kb.mul(ch, d * h * w),
               kb.add(kb.mul(kb.div(i[2], f), h * w),
                      kb.add(kb.mul(kb.div(i[3], f), w), kb.div(i[4], f))));
    return off;
  });
}

} // namespace

FailureOr<Launch> emitWindowRowsKernel(Operation *attention, Type rowsType,
                                       bool scatter, gpu::GPUModuleOp module,
                                       StringRef name) {
  auto rt = dyn_cast<RankedTensorType>(rowsType);
  if (!rt || rt.getRank() < 2 || !rt.isDynamicDim(0))
    return attention->emitError()
           << "has no GPU implementation of its window rows for " << rowsType;
  if (failed(checkKernelTensor(attention, rt, ownRows(rt))))
    return failure();
  MLIRContext *ctx = attention->getContext();
  Type et = rt.getElementType(), i64 = IntegerType::get(ctx, 64);
  const int64_t rows = ownRows(rt), width = product(rt.getShape().drop_front());
  auto index = MemRefType::get({rows}, IntegerType::get(ctx, 32));
  // The gather's source may be a strided view of a wider packed row (the q,
  // k or v columns of a qkv projection): addressed up to 2^31 elements, the
  // runtime checks its extent.
  auto dense = flatMemRef(rt, rows);
  auto source = scatter ? dense : MemRefType::get({kMaxElements}, et);
  SmallVector<Type> args = {source, index, dense};
  if (!scatter)
    args.push_back(i64); // the source's row stride in elements
  args.push_back(i64);   // rows
  KernelBuilder kb(module, name, args, attention->getLoc());
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  kb.bindRows(scatter ? 3 : 4, rows);
  const int64_t v = pow2Divisor(width, 16 / elemBytes(et));
  const int64_t perRow = width / v;
  auto [r, e] = kb.rowGroup(kb.rows, perRow, v);
  Value other = kb.loadIndex(kb.arg(1), r);
  if (scatter) {
    // out[rows[r]] = x[r]
    Value x = kb.load(kb.arg(0), kb.add(kb.mul(r, width), e), v);
    kb.store(x, kb.arg(2), kb.add(kb.mul(other, width), e));
  } else {
    // out[r] = x[rows[r] · stride]
    Value stride =
        arith::IndexCastOp::create(b, loc, b.getIndexType(), kb.arg(3));
    Value at = kb.add(arith::MulIOp::create(b, loc, other, stride), e);
    kb.store(kb.load(kb.arg(0), at, v), kb.arg(2), kb.add(kb.mul(r, width), e));
  }
  Launch l = launch1d(rows * perRow);
  l.threadsPerRow = perRow;
  return l;
}

OpClass classify(Operation *op) {
  StringRef n = op->getName().getStringRef();
  if (isa<func::CallOp, func::ReturnOp>(op))
    return OpClass::View;
  if (!n.consume_front("trellis."))
    return OpClass::Unsupported;
  if (n == "linear" || n == "matmul" || n == "attention")
    return OpClass::Library;
  // A GEMM with the residual and the LayerNorm as its epilogue: the
  // runtime's in-tree kernel (or cuBLASLt and a row kernel).
  if (n == "linear_residual_norm")
    return OpClass::Library;
  // The time tables of trellis-hoist-time: runtime commands (the grid
  // written from the host, a row copied at the table offset of the step).
  if (n == "time_grid" || n == "time_row")
    return OpClass::Library;
  if (n == "conv3d")
    return OpClass::Conv;
  if (n == "reshape" || n == "weight" || n == "constant" || n == "yield" ||
      n == "shared_yield")
    return OpClass::View;
  if (n == "flow_sample")
    return OpClass::Sampler;
  // A 3×3×3 sparse conv: generated neighbour gather and tap sum around the
  // runtime's GEMMs (or its implicit-GEMM kernel); a 1×1×1 one is a GEMM.
  if (n == "sparse.conv3d") {
    auto w = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
    bool pointwise = w && w.getRank() == 5 && w.getDimSize(1) == 1;
    return pointwise ? OpClass::Library : OpClass::SparseConv;
  }
  // The attention over voxels: the attention kernels.
  if (n == "sparse.attention" || n == "sparse.cross_attention")
    return OpClass::Library;
  // Coordinate values, evaluated on the host when the runtime binds a sparse
  // function (and the dense stage's occupancy, the mesh extraction).
  if (llvm::is_contained(
          {"sparse.from_tensor", "sparse.coarsen", "sparse.subdivide",
           "sparse.neighbor_map", "sparse.parent_neighbor_map",
           "sparse.batch_segments", "sparse.window_segments", "sparse.xyz",
           "sparse.to_tensor", "sparse.unique_mean", "sparse.parent_rows",
           "sparse.child_rows", "sparse.batch_index", "ape", "occupancy"},
          n) ||
      n.starts_with("mesh."))
    return OpClass::Host;
  if (isUnaryName(n) ||
      llvm::is_contained(
          {"cast", "add", "sub", "mul", "div", "maximum", "modulate",
           "gated_residual", "cfg_combine", "euler_update", "layer_norm",
           "head_rms_norm", "softmax", "timestep_embedding", "pixel_shuffle_3d",
           "permute", "concat", "split", "layer_norm_modulate",
           "gated_residual_norm", "broadcast_rows", "gather_rows",
           "segment_mean", "sparse.subdivide_features",
           // (its elementwise half; the
           // statistics are the runtime's)
           "sparse.group_norm"},
          n))
    return OpClass::Generated;
  return OpClass::Unsupported;
}

/// The ops whose kernels take dynamic rows (docs/design/gpu-backend.md).
bool supportsDynamicRows(Operation *op, StringRef n) {
  if (isUnaryName(n) ||
      llvm::is_contained({"cast", "add", "sub", "mul", "div", "maximum",
                          "modulate", "gated_residual", "layer_norm",
                          "layer_norm_modulate", "gated_residual_norm",
                          "head_rms_norm"},
                         n))
    return true;
  if (n == "split" || n == "concat") {
    int64_t axis = intAttrOr(op, "axis", 0);
    Value whole = n == "split" ? op->getOperand(0) : op->getResult(0);
    if (axis < 0)
      axis += cast<RankedTensorType>(whole.getType()).getRank();
    return axis >= 1;
  }
  return false;
}

FailureOr<Launch> emitOpKernel(Operation *op, gpu::GPUModuleOp module,
                               StringRef name) {
  StringRef n = op->getName().getStringRef();
  n.consume_front("trellis.");
  if (n == "gather_rows" || n == "segment_mean" ||
      n == "sparse.subdivide_features")
    return emitRowIndexKernel(op, n, module, name);
  if (n == "sparse.group_norm")
    return emitGroupNormApplyKernel(op, module, name);
  FailureOr<int64_t> bound = rowBound(op);
  if (failed(bound))
    return failure();
  if (*bound && !supportsDynamicRows(op, n))
    return op->emitError() << "has no GPU implementation for dynamic rows "
                              "(dimension 0 of "
                           << op->getResult(0).getType() << ")";
  if (failed(checkStatic(op, *bound)))
    return failure();
  KernelBuilder kb(module, name, tensorArgs(op, *bound), op->getLoc());
  const unsigned nIn = op->getNumOperands();
  if (*bound)
    kb.bindRows(nIn + op->getNumResults(), *bound);
  // Shapes with a dynamic dimension 0 at the bound (static: as they are).
  auto shp = [&](Value v) { return boundShape(v.getType(), *bound); };
  SmallVector<int64_t> outShape = shp(op->getResult(0));
  auto same = [&](unsigned i) {
    return EwOperand{i, broadcastStrides(shp(op->getOperand(i)), outShape)};
  };

  if (n == "cast")
    return emitElementwise(
        kb, outShape, {same(0)}, 1, true,
        [](KernelBuilder &, ArrayRef<Value> x, Value) { return x[0]; });
  if (isUnaryName(n))
    return emitElementwise(kb, outShape, {same(0)}, 1, true,
                           [n](KernelBuilder &k, ArrayRef<Value> x, Value) {
                             return unaryF32(k, n, x[0]);
                           });
  if (llvm::is_contained({"add", "sub", "mul", "div", "maximum"}, n)) {
    bool isInt = isa<IntegerType>(elemOf(op->getResult(0)));
    return emitElementwise(
        kb, outShape, {same(0), same(1)}, 2, !isInt,
        [n, isInt](KernelBuilder &k, ArrayRef<Value> x, Value) {
          return binary(k, n, x[0], x[1], isInt);
        });
  }
  if (n == "broadcast_rows") {
    ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
    EwOperand row{0, broadcastStrides(in, outShape)};
    if (in.size() == 1 || product(in) == outShape.back()) {
      row.strides.assign(outShape.size(), 0);
      row.strides.back() = 1;
    }
    return emitElementwise(
        kb, outShape, {row}, 1, false,
        [](KernelBuilder &, ArrayRef<Value> x, Value) { return x[0]; });
  }
  if (n == "modulate" || n == "gated_residual") {
    SmallVector<int64_t> x = shp(op->getOperand(0));
    SmallVector<EwOperand> ops = {same(0)};
    // Dynamic rows: x-shaped, per-sample or NumPy-broadcast ([1, C]) vectors.
    auto xTy = cast<RankedTensorType>(op->getOperand(0).getType());
    for (unsigned i = 1; i < 3; ++i) {
      auto vTy = cast<RankedTensorType>(op->getOperand(i).getType());
      bool numpy = *bound && !isPerSampleVector(vTy, xTy);
      ops.push_back({i, numpy ? broadcastStrides(shp(op->getOperand(i)), x)
                              : perSampleStrides(shp(op->getOperand(i)), x)});
    }
    bool mod = n == "modulate";
    return emitElementwise(
        kb, outShape, ops, 3, true,
        [mod](KernelBuilder &k, ArrayRef<Value> v, Value) {
          OpBuilder &b = k.b;
          if (mod) { // x·(1 + scale) + shift
            Value s =
                arith::AddFOp::create(b, k.loc, k.f32(1, v[2].getType()), v[2]);
            return Value(arith::AddFOp::create(
                b, k.loc, arith::MulFOp::create(b, k.loc, v[0], s), v[1]));
          }
          // x + gate·h
          return Value(arith::AddFOp::create(
              b, k.loc, v[0], arith::MulFOp::create(b, k.loc, v[2], v[1])));
        });
  }
  if (n == "cfg_combine") {
    double w = floatAttrOr(op, "strength", 0);
    return emitElementwise(
        kb, outShape, {same(0), same(1)}, 2, true,
        [w](KernelBuilder &k, ArrayRef<Value> v, Value) {
          Type t = v[0].getType();
          Value a = arith::MulFOp::create(
              k.b, k.loc, k.f32(double(float(1.0 + w)), t), v[0]);
          Value c = arith::MulFOp::create(k.b, k.loc,
                                          k.f32(double(float(w)), t), v[1]);
          return Value(arith::SubFOp::create(k.b, k.loc, a, c));
        });
  }
  if (n == "euler_update") {
    double dt = floatAttrOr(op, "dt", 0);
    return emitElementwise(
        kb, outShape, {same(0), same(1)}, 2, true,
        [dt](KernelBuilder &k, ArrayRef<Value> v, Value) {
          Value s = arith::MulFOp::create(
              k.b, k.loc, k.f32(double(float(dt)), v[1].getType()), v[1]);
          return Value(arith::SubFOp::create(k.b, k.loc, v[0], s));
        });
  }
  if (n == "layer_norm")
    return emitLayerNorm(op, kb, shp(op->getOperand(0)));
  if (n == "layer_norm_modulate" || n == "gated_residual_norm") {
    // layer_norm_modulate: (x, shift, scale) → result; gated_residual_norm:
    // (x, h, gate[, plus][, shift, scale][, weight, bias]) → (residual,
    // result). The operand number of each optional operand, or -1.
    const bool residual = n == "gated_residual_norm";
    int plus = -1, shift = 1, scale = 2, weight = -1, bias = -1;
    if (residual) {
      auto fused = cast<mlir::trellis::GatedResidualNormOp>(op);
      auto operand = [&](unsigned ods) {
        auto [start, length] = fused.getODSOperandIndexAndLength(ods);
        return length ? int(start) : -1;
      };
      plus = operand(3), shift = operand(4), scale = operand(5);
      weight = operand(6), bias = operand(7);
    }
    SmallVector<int64_t> x = shp(op->getOperand(0));
    auto xTy = cast<RankedTensorType>(op->getOperand(0).getType());
    if (residual && !rowTiling(xTy.getElementType(), x.back()).inRegisters) {
      kb.func.erase();
      return op->emitError() << "has no GPU implementation for rows of "
                             << x.back() << " elements";
    }
    RowSpec s{shift >= 0 ? RowKind::LayerNormModulate : RowKind::LayerNorm,
              product(x) / x.back(), x.back()};
    s.eps = float(floatAttrOr(op, "eps", 1e-6));
    s.x = 0;
    s.shift = shift;
    s.scale = scale;
    s.gamma = weight;
    s.beta = bias;
    if (residual) {
      s.h = 1;
      s.gate = 2;
      s.plus = plus;
      s.residualOut = int(nIn);
    }
    s.out = residual ? nIn + 1 : nIn;
    // x-shaped vectors are per row, per-sample [B, C] ones per L rows of x
    // [B, L, C]; with dynamic rows, [1, C] ones are shared by all rows.
    auto shared = [&](int i, bool &perRow) {
      perRow = shp(op->getOperand(i)) == x;
      return *bound && !perRow &&
             !isPerSampleVector(
                 cast<RankedTensorType>(op->getOperand(i).getType()), xTy);
    };
    const int64_t perSampleRows = s.rows / x.front();
    if (residual) {
      s.gateTokens = shared(s.gate, s.gatePerRow) ? s.rows : perSampleRows;
      if (plus >= 0)
        s.plusTokens = shared(plus, s.plusPerRow) ? s.rows : perSampleRows;
    }
    s.tokens = perSampleRows;
    if (shift >= 0) {
      bool shared1 = shared(shift, s.shiftPerRow);
      bool shared2 = shared(scale, s.scalePerRow);
      if (!s.shiftPerRow && !s.scalePerRow && shared1 != shared2) {
        kb.func.erase();
        return op->emitError() << "has no GPU implementation for a shift and "
                                  "scale of different broadcasts";
      }
      if (shared1 || shared2)
        s.tokens = s.rows;
    }
    if (*bound)
      s.rowsPerItem = s.rows / x.front();
    return emitRowKernel(kb, s);
  }
  if (n == "head_rms_norm") {
    SmallVector<int64_t> x = shp(op->getOperand(0));
    RowSpec s{RowKind::HeadRms, product(x) / x.back(), x.back()};
    s.gamma = 1;
    s.heads = x[x.size() - 2];
    s.x = 0;
    s.out = 2;
    if (*bound)
      s.rowsPerItem = s.rows / x.front();
    return emitRowKernel(kb, s);
  }
  if (n == "softmax") {
    SmallVector<int64_t> x = shp(op->getOperand(0));
    int64_t axis = intAttrOr(op, "axis", -1);
    if (axis < 0)
      axis += int64_t(x.size());
    RowSpec s{RowKind::Softmax, 0, x[axis]};
    s.x = 0;
    s.out = 1;
    int64_t outer = product(ArrayRef(x).take_front(axis));
    int64_t inner = product(ArrayRef(x).drop_front(axis + 1));
    if (inner == 1) {
      s.rows = outer;
      return emitRowKernel(kb, s);
    }
    return emitAxisKernel(kb, s, outer, inner);
  }
  if (n == "timestep_embedding")
    return emitTimestepEmbedding(op, kb, module, name);
  if (n == "permute")
    return emitPermute(op, kb);
  if (n == "pixel_shuffle_3d")
    return emitPixelShuffle(op, kb);
  if (n == "split" || n == "concat") {
    bool isSplit = n == "split";
    Value whole = isSplit ? op->getOperand(0) : op->getResult(0);
    SmallVector<int64_t> shape = shp(whole);
    int64_t axis = intAttrOr(op, "axis", 0);
    if (axis < 0)
      axis += int64_t(shape.size());
    SmallVector<int64_t> sizes;
    SmallVector<unsigned> pieces;
    if (isSplit) {
      for (unsigned i = 0; i < op->getNumResults(); ++i) {
        sizes.push_back(shp(op->getResult(i))[axis]);
        pieces.push_back(1 + i);
      }
    } else {
      for (unsigned i = 0; i < nIn; ++i) {
        sizes.push_back(shp(op->getOperand(i))[axis]);
        pieces.push_back(i);
      }
    }
    return emitSplitConcat(kb, isSplit, isSplit ? 0 : nIn, pieces, sizes,
                           product(ArrayRef(shape).take_front(axis)),
                           product(ArrayRef(shape).drop_front(axis + 1)),
                           *bound);
  }
  kb.func.erase();
  return op->emitError() << "has no GPU implementation";
}

FailureOr<Launch> emitIm2colKernel(Operation *conv, gpu::GPUModuleOp module,
                                   StringRef name, int64_t &scratchBytes) {
  if (failed(checkStatic(conv)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(conv->getOperand(0));
  ArrayRef<int64_t> w = shapeOf(conv->getOperand(1));
  ArrayRef<int64_t> y = shapeOf(conv->getResult(0));
  Type et = elemOf(conv->getOperand(0));
  const int64_t batch = x[0], cin = x[1], d = x[2], h = x[3], wd = x[4];
  const int64_t k = w[2], pad = intAttrOr(conv, "padding", 1);
  const int64_t od = y[2], oh = y[3], ow = y[4];
  const int64_t taps = k * k * k, plane = od * oh * ow;
  const int64_t colElems = batch * cin * taps * plane;
  if (colElems > kMaxElements)
    return conv->emitError() << "has no GPU implementation: its im2col buffer "
                                "has 2^31 or more elements";
  scratchBytes = colElems * elemBytes(et);
  auto xTy = MemRefType::get({product(x)}, et);
  auto colTy = MemRefType::get({colElems}, et);
  KernelBuilder kb(module, name, {xTy, colTy}, conv->getLoc());
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  // col[b][(ci·k³ + (a·k + β)·k + γ)][(z·H' + y)·W' + x]
  //   = x[b, ci, z+a−p, y+β−p, x+γ−p] (0 outside): V output columns of one
  // output row per thread, stored as one vector.
  const int64_t v = pow2Divisor(ow, 16 / elemBytes(et));
  const int64_t groups = colElems / v;
  Value gid = kb.globalId();
  kb.guard(kb.ult(gid, groups));
  Value flat = kb.mul(gid, v);
  Value ox = kb.rem(flat, ow);
  Value r = kb.div(flat, ow);
  Value oy = kb.rem(r, oh);
  r = kb.div(r, oh);
  Value oz = kb.rem(r, od);
  r = kb.div(r, od);
  Value tap = kb.rem(r, taps);
  Value bc = kb.div(r, taps); // b·Cin + ci
  Value ka = kb.div(tap, k * k), kbeta = kb.rem(kb.div(tap, k), k),
        kg = kb.rem(tap, k);
  auto shifted = [&](Value o, Value kk) {
    return arith::SubIOp::create(b, loc, kb.add(o, kk), kb.idx(pad));
  };
  Value iz = shifted(oz, ka), iy = shifted(oy, kbeta);
  Value rowOk =
      arith::AndIOp::create(b, loc, kb.inRange(iz, d), kb.inRange(iy, h));
  Value rowBase = kb.add(kb.mul(bc, d * h * wd),
                         kb.add(kb.mul(iz, h * wd), kb.mul(iy, wd)));
  Value zero = kb.zeroOf(et);
  SmallVector<Value> elems;
  for (int64_t i = 0; i < v; ++i) {
    Value ix = shifted(kb.add(ox, kb.idx(i)), kg);
    Value ok = arith::AndIOp::create(b, loc, rowOk, kb.inRange(ix, wd));
    // Read a clamped, always valid address; select zero outside.
    Value off =
        arith::SelectOp::create(b, loc, ok, kb.add(rowBase, ix), kb.idx(0));
    Value e = kb.load(kb.arg(0), off, 1);
    elems.push_back(arith::SelectOp::create(b, loc, ok, e, zero));
  }
  Value out = v == 1 ? elems[0]
                     : Value(vector::FromElementsOp::create(
                           b, loc, VectorType::get({v}, et), elems));
  kb.store(out, kb.arg(1), flat);
  return launch1d(groups);
}

bool isDirectConv(Operation *conv) {
  auto w = dyn_cast<RankedTensorType>(conv->getOperand(1).getType());
  return w && w.getRank() == 5 && w.getDimSize(0) <= kMaxDirectConvOutputs;
}

FailureOr<Launch> emitDirectConvKernel(Operation *conv, gpu::GPUModuleOp module,
                                       StringRef name) {
  if (failed(checkStatic(conv)))
    return failure();
  ArrayRef<int64_t> x = shapeOf(conv->getOperand(0));
  ArrayRef<int64_t> w = shapeOf(conv->getOperand(1));
  ArrayRef<int64_t> y = shapeOf(conv->getResult(0));
  Type et = elemOf(conv->getOperand(0));
  const int64_t batch = x[0], cin = x[1], d = x[2], h = x[3], wd = x[4];
  const int64_t cout = w[0], k = w[2], pad = intAttrOr(conv, "padding", 1);
  const int64_t od = y[2], oh = y[3], ow = y[4];
  const int64_t taps = k * k * k, plane = od * oh * ow, volume = d * h * wd;
  if (product(x) > kMaxElements || product(y) > kMaxElements)
    return conv->emitError() << "has no GPU implementation: a tensor has "
                                "2^31 or more elements";
  KernelBuilder kb(module, name,
                   {MemRefType::get({product(x)}, et),
                    MemRefType::get({product(w)}, et),
                    MemRefType::get({product(y)}, et)},
                   conv->getLoc());
  OpBuilder &b = kb.b;
  Location loc = kb.loc;
  // out[b, o, z, y, x] = Σ_ci Σ_taps w[o, ci, a, β, γ] · in[b, ci, z+a−p,
  // y+β−p, x+γ−p], in f32, one thread per output position (all Cout). The
  // taps' offsets and bounds are the same for every input channel: computed
  // once, then the channel loop reads x at base + offset.
  Value gid = kb.globalId();
  kb.guard(kb.ult(gid, batch * plane));
  Value ox = kb.rem(gid, ow);
  Value r = kb.div(gid, ow);
  Value oy = kb.rem(r, oh);
  r = kb.div(r, oh);
  Value oz = kb.rem(r, od);
  Value bIdx = kb.div(r, od);
  Value pos = kb.rem(gid, plane);
  auto shifted = [&](Value o, int64_t t) {
    return arith::SubIOp::create(b, loc, o, kb.idx(pad - t));
  };
  SmallVector<Value> tapOk, tapOff;
  for (int64_t a = 0; a < k; ++a)
    for (int64_t be = 0; be < k; ++be)
      for (int64_t g = 0; g < k; ++g) {
        Value iz = shifted(oz, a), iy = shifted(oy, be), ix = shifted(ox, g);
        Value ok = arith::AndIOp::create(
            b, loc, kb.inRange(iz, d),
            arith::AndIOp::create(b, loc, kb.inRange(iy, h),
                                  kb.inRange(ix, wd)));
        Value off = kb.add(kb.mul(iz, h * wd), kb.add(kb.mul(iy, wd), ix));
        tapOk.push_back(ok);
        // A clamped, always valid address; zero is selected outside.
        tapOff.push_back(arith::SelectOp::create(b, loc, ok, off, kb.idx(0)));
      }
  Value zero = kb.f32(0.0, b.getF32Type());
  SmallVector<Value> init(cout, zero);
  Value xBatch = kb.mul(bIdx, cin * volume);
  auto loop = scf::ForOp::create(
      b, loc, kb.idx(0), kb.idx(cin), kb.idx(1), init,
      [&](OpBuilder &nb, Location l, Value ci, ValueRange acc) {
        OpBuilder::InsertionGuard ig(kb.b);
        kb.b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
        Value xBase = kb.add(xBatch, kb.mul(ci, volume));
        Value wBase = kb.mul(ci, taps);
        SmallVector<Value> sums(acc.begin(), acc.end());
        for (int64_t t = 0; t < taps; ++t) {
          Value v = kb.toF32(kb.load(kb.arg(0), kb.add(xBase, tapOff[t]), 1));
          v = arith::SelectOp::create(kb.b, l, tapOk[t], v, zero);
          for (int64_t o = 0; o < cout; ++o) {
            Value wv = kb.toF32(kb.load(
                kb.arg(1), kb.add(wBase, kb.idx(o * cin * taps + t)), 1));
            sums[o] = arith::AddFOp::create(
                kb.b, l, sums[o], arith::MulFOp::create(kb.b, l, wv, v));
          }
        }
        scf::YieldOp::create(kb.b, l, sums);
      });
  for (int64_t o = 0; o < cout; ++o)
    kb.store(kb.fromF32(loop.getResult(o), et), kb.arg(2),
             kb.add(kb.mul(kb.add(kb.mul(bIdx, cout), kb.idx(o)), plane), pos));
  return launch1d(batch * plane);
}

FailureOr<SparseConvKernels> emitSparseConvKernels(Operation *conv,
                                                   gpu::GPUModuleOp module,
                                                   StringRef gatherName,
                                                   StringRef tapSumName) {
  auto op = cast<mlir::trellis::SparseConv3dOp>(conv);
  auto nbrTy = dyn_cast_or_null<mlir::trellis::NeighborMapType>(
      op.getNeighbors() ? op.getNeighbors().getType() : Type());
  if (!nbrTy)
    return conv->emitError() << "has no GPU implementation: a "
                                "k > 1 sparse conv needs its neighbour map";
  auto xTy = cast<RankedTensorType>(op.getFeats().getType());
  auto outTy = cast<RankedTensorType>(op.getResult().getType());
  // (rowBound: only dimension 0 dynamic, and bounded.)
  if (failed(rowBound(conv)))
    return failure();
  for (Type t : conv->getOperandTypes())
    if (isa<RankedTensorType>(t) &&
        failed(checkKernelTensor(conv, t, ownRows(t))))
      return failure();
  if (failed(checkKernelTensor(conv, outTy, ownRows(outTy))))
    return failure();
  ArrayRef<int64_t> w = shapeOf(op.getWeight());
  Type et = xTy.getElementType();
  const int64_t cout = w[0], cin = w[4],
                kvol =
                    nbrTy.getKernel() * nbrTy.getKernel() * nbrTy.getKernel();
  // The neighbour map: int32 [rows, k³] at the map's bound (capped like a
  // tensor's, addressableRows).
  const int64_t nbrRows = std::min(nbrTy.getBound(), kMaxElements / kvol);
  auto nbrMem = MemRefType::get({nbrRows * kvol},
                                IntegerType::get(conv->getContext(), 32));
  auto rowsOf = [](RankedTensorType t) {
    return t.isDynamicDim(0) ? addressableRows(t) : t.getDimSize(0);
  };
  const int64_t xRows = rowsOf(xTy), outRows = rowsOf(outTy);
  MLIRContext *ctx = conv->getContext();
  Type i64 = IntegerType::get(ctx, 64);
  SparseConvKernels result;

  // Gather: col[r, o·Cin + c] = x[nbr[row0 + r, o], c] (0 for an inactive
  // neighbour), V channels per thread (16 bytes where Cin allows). Chunks of
  // at most kSparseConvGatherBytes; col rows are the chunk's rows.
  const int64_t rowBytes = kvol * cin * elemBytes(et);
  result.chunkRows = std::max<int64_t>(
      1, std::min(outRows, kSparseConvGatherBytes / rowBytes));
  result.gatherBytes = result.chunkRows * rowBytes;
  {
    KernelBuilder kb(module, gatherName,
                     {flatMemRef(xTy, xRows), nbrMem,
                      MemRefType::get({result.chunkRows * kvol * cin}, et), i64,
                      i64},
                     conv->getLoc());
    OpBuilder &b = kb.b;
    Location loc = kb.loc;
    kb.bindRows(4, result.chunkRows);
    Value row0 =
        arith::IndexCastOp::create(b, loc, b.getIndexType(), kb.arg(3));
    const int64_t v = pow2Divisor(cin, 16 / elemBytes(et));
    const int64_t perRow = kvol * cin / v;
    // Rows of col: (r, o) pairs, ro = r·k³ + o.
    auto [ro, e] = kb.rowGroup(kb.mul(kb.rows, kvol), cin / v, v);
    Value src = memref::LoadOp::create(
        b, loc, kb.arg(1), ValueRange{kb.add(kb.mul(row0, kvol), ro)});
    Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, src,
                                         kb.i32(0));
    // Read row 0 for an inactive neighbour (always valid when rows > 0),
    // select zero.
    Value srcRow = arith::IndexCastOp::create(
        b, loc, b.getIndexType(),
        arith::SelectOp::create(b, loc, active, src, kb.i32(0)));
    Value val = kb.load(kb.arg(0), kb.add(kb.mul(srcRow, cin), e), v);
    Type vt = val.getType();
    val = arith::SelectOp::create(b, loc, active, val, kb.zeroOf(vt));
    kb.store(val, kb.arg(2), kb.add(kb.mul(ro, cin), e));
    result.gather = launch1d(result.chunkRows * perRow);
    result.gather.threadsPerRow = perRow;
  }

  // Tap sum: out[p, c] = bias[c] + Σ_o y[o, nbr[p, o], c] over the active
  // neighbours, o ascending, in f32 (the CPU reference's order); y
  // [k³, rowsIn, Cout] f32 of at most kSparseConvTapsBytes. V channels per
  // thread (16 bytes of y).
  result.tapsBytes =
      std::min<int64_t>(kSparseConvTapsBytes, kvol * xRows * cout * 4);
  {
    const bool hasBias = bool(op.getBias());
    SmallVector<Type> args = {
        MemRefType::get({result.tapsBytes / 4}, Float32Type::get(ctx)), nbrMem};
    if (hasBias)
      args.push_back(flatMemRef(op.getBias().getType()));
    args.push_back(flatMemRef(outTy, outRows));
    args.push_back(i64); // rows
    args.push_back(i64); // rowsIn
    const unsigned outArg = hasBias ? 3 : 2, rowsArg = outArg + 1;
    KernelBuilder kb(module, tapSumName, args, conv->getLoc());
    OpBuilder &b = kb.b;
    Location loc = kb.loc;
    kb.bindRows(rowsArg, outRows);
    Value rowsIn = arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                              kb.arg(rowsArg + 1));
    const int64_t v = pow2Divisor(cout, 4);
    const int64_t perRow = cout / v;
    auto [p, c] = kb.rowGroup(kb.rows, perRow, v);
    Type accTy = v == 1 ? Type(b.getF32Type())
                        : Type(VectorType::get({v}, b.getF32Type()));
    Value sum = hasBias ? kb.toF32(kb.load(kb.arg(2), c, v)) : kb.zeroOf(accTy);
    Value tapRows = kb.mul(rowsIn, cout); // one tap's products
    for (int64_t o = 0; o < kvol; ++o) {
      Value q = memref::LoadOp::create(
          b, loc, kb.arg(1), ValueRange{kb.add(kb.mul(p, kvol), kb.idx(o))});
      Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, q,
                                           kb.i32(0));
      Value qRow = arith::IndexCastOp::create(
          b, loc, b.getIndexType(),
          arith::SelectOp::create(b, loc, active, q, kb.i32(0)));
      Value at = kb.add(kb.mul(tapRows, o), kb.add(kb.mul(qRow, cout), c));
      Value y = kb.load(kb.arg(0), at, v);
      sum = arith::SelectOp::create(b, loc, active,
                                    arith::AddFOp::create(b, loc, sum, y), sum);
    }
    kb.store(kb.fromF32(sum, et), kb.arg(outArg), kb.add(kb.mul(p, cout), c));
    result.tapSum = launch1d(outRows * perRow);
    result.tapSum.threadsPerRow = perRow;
  }
  return result;
}

FailureOr<Launch> emitFlowUpdateKernel(Operation *flow, gpu::GPUModuleOp module,
                                       StringRef name) {
  Value noise = flow->getOperand(0);
  auto rt = dyn_cast<RankedTensorType>(noise.getType());
  // A static f32 tensor, or one with dynamic rows (dimension 0 only).
  int64_t bound = 0;
  if (rt && !rt.hasStaticShape()) {
    bound = addressableRows(rt);
    for (int64_t d = 1; d < rt.getRank(); ++d)
      if (rt.isDynamicDim(d))
        bound = ShapedType::kDynamic;
  }
  if (!rt || !rt.getElementType().isF32() || ShapedType::isDynamic(bound) ||
      product(boundShape(rt, bound)) > kMaxElements)
    return flow->emitError()
           << "has no GPU implementation of its update for the sample type "
           << noise.getType()
           << " (an f32 tensor, static or with bounded dynamic rows, is "
              "needed)";
  auto mt = flatMemRef(rt, bound);
  Builder tb(flow->getContext());
  SmallVector<Type> args = {
      mt, mt, mt, mt, tb.getF32Type(), tb.getF32Type(), tb.getI32Type()};
  if (bound)
    args.push_back(tb.getI64Type());
  KernelBuilder kb(module, name, args, flow->getLoc());
  if (bound)
    kb.bindRows(7, bound);
  // Operands 0..2 are (x, v_cond, v_uncond); v_uncond is read only when
  // guided (it may be null otherwise).
  SmallVector<int64_t> shape = boundShape(rt, bound);
  EwOperand x{0, broadcastStrides(shape, shape)};
  EwOperand vc{1, broadcastStrides(shape, shape)};
  return emitElementwise(
      kb, shape, {x, vc}, 3, true,
      [&](KernelBuilder &k, ArrayRef<Value> v, Value flat) {
        OpBuilder &b = k.b;
        Location loc = k.loc;
        Type t = v[1].getType();
        int64_t width =
            isa<VectorType>(t) ? cast<VectorType>(t).getNumElements() : 1;
        Value w = k.splat(k.arg(4), width);
        Value dt = k.splat(k.arg(5), width);
        Value guided = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                             k.arg(6), k.i32(0));
        auto ifOp = scf::IfOp::create(b, loc, TypeRange{t}, guided,
                                      /*withElseRegion=*/true);
        {
          OpBuilder::InsertionGuard ig(b);
          b.setInsertionPointToStart(ifOp.thenBlock());
          // (1 + w)·vc − w·vu (ref::cfgCombine), w as f32.
          Value vu = k.load(k.arg(2), flat, width);
          Value a = arith::AddFOp::create(b, loc, k.f32(1, t), w);
          Value g = arith::SubFOp::create(
              b, loc, arith::MulFOp::create(b, loc, a, v[1]),
              arith::MulFOp::create(b, loc, w, vu));
          scf::YieldOp::create(b, loc, g);
          b.setInsertionPointToStart(ifOp.elseBlock());
          scf::YieldOp::create(b, loc, v[1]);
        }
        // x − dt·v (ref::eulerUpdate)
        return Value(arith::SubFOp::create(
            b, loc, v[0],
            arith::MulFOp::create(b, loc, dt, ifOp.getResult(0))));
      });
}

} // namespace trellis::codegen::detail
