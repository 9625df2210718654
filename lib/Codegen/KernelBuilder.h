//===- KernelBuilder.h - Builds one generated kernel ------------*- C++ -*-===//
//
// Internal to lib/Codegen: the builder every kernel family uses
// (Elementwise.cpp, RowKernels.cpp, DataMovement.cpp, ConvKernels.cpp,
// SamplerKernels.cpp; OpKernels.cpp dispatches an op to them) and the type
// and shape helpers they share.
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
#ifndef TRELLIS_LIB_CODEGEN_KERNELBUILDER_H
#define TRELLIS_LIB_CODEGEN_KERNELBUILDER_H

#include "lib/Codegen/Kernels.h"

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

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>

namespace trellis::codegen::detail {

using namespace mlir;

inline constexpr int64_t kBlock = 256;
inline constexpr int64_t kMaxElements = (int64_t(1) << 31) - 1;
/// Scratch of a sparse conv's gathered neighbour rows (one chunk of output
/// rows at a time) and of its taps-first f32 products; the runtime takes the
/// taps-first order only where the products fit (annotated on the op).
inline constexpr int64_t kSparseConvGatherBytes = int64_t(128) << 20;
inline constexpr int64_t kSparseConvTapsBytes = int64_t(512) << 20;
/// Dense convs with at most this many output channels run as one direct
/// kernel (emitDirectConvKernel) instead of im2col + GEMM.
inline constexpr int64_t kMaxDirectConvOutputs = 4;
/// Elementwise kernels of at least this many vector groups take 4 per thread
/// (2^18 groups: 4 MiB of f16 at 8 elements a group).
inline constexpr int64_t kUnrollMinGroups = int64_t(1) << 18;
/// Layer norms stage f32 γ / β in workgroup memory up to this many channels
/// (16 KiB of static shared memory, well under the 48 KiB limit).
inline constexpr int64_t kMaxStagedAffine = 2048;

inline int64_t elemBytes(Type t) { return (t.getIntOrFloatBitWidth() + 7) / 8; }

inline int64_t product(ArrayRef<int64_t> s) {
  return std::accumulate(s.begin(), s.end(), int64_t(1),
                         std::multiplies<int64_t>());
}

/// Largest power of two <= cap dividing n (1 for n = 0).
inline int64_t pow2Divisor(int64_t n, int64_t cap) {
  int64_t v = 1;
  while (v * 2 <= cap && n % (v * 2) == 0)
    v *= 2;
  return v;
}

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline Launch launch1d(int64_t threads) {
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
  /// V (even) f32 values as E4M3 bytes (vector<V x i8>), computed as the
  /// FP8 GEMM's static-scale quantization of the `roundTo` result does
  /// (runtime/kernels/fp8.cuh): rounded to `roundTo` first, then times the
  /// f32 `quantize`, then cvt.rn.satfinite.e4m3x2.f32 (sm_89+), so that the
  /// bytes equal those of the unfused path.
  Value toE4M3(Value y, Type roundTo, Value quantize);

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
SmallVector<int64_t> boundShape(Type t, int64_t bound);

/// A flat memref of the (bound) size of `t`.
MemRefType flatMemRef(Type t, int64_t bound = 0);

/// Kernel argument types: one flat memref per tensor operand, then result,
/// then `i64 rows` for a dynamic-row kernel (`bound` > 0).
SmallVector<Type> tensorArgs(Operation *op, int64_t bound);

/// The rows a kernel addresses for a tensor with dynamic rows: its
/// #trellis.bounds bound, capped so that the tensor has fewer than 2^31
/// elements (the kernels index with 32 bits). The bounds of the decoders'
/// subdivided levels pass that cap (16.7M rows at 256³); the runtime refuses
/// a binding whose actual tensor reaches it (GpuExecutor's
/// checkAddressable), so the cap never truncates silently.
int64_t addressableRows(RankedTensorType t);

/// A tensor's own kernel rows: addressableRows when dimension 0 is dynamic,
/// 0 (static) otherwise.
int64_t ownRows(Type t);

/// The rows of the dynamic dimension 0 that `op`'s kernel is built for: the
/// smallest addressable bound (addressableRows) of its dynamic tensors (they
/// all have the same actual rows), 0 when every tensor is static. Fails on a
/// dynamic dimension other than 0 or a missing bound.
FailureOr<int64_t> rowBound(Operation *op);

/// Checks one tensor type of `op`'s kernel: a supported element type,
/// static except (when `bound` > 0) a dynamic dimension 0, fewer than 2^31
/// elements at the bound.
LogicalResult checkKernelTensor(Operation *op, Type t, int64_t bound);

/// checkKernelTensor for every operand and result of `op`, with one bound.
LogicalResult checkStatic(Operation *op, int64_t bound = 0);

ArrayRef<int64_t> shapeOf(Value v);

Type elemOf(Value v);

double floatAttrOr(Operation *op, StringRef name, double dflt);

int64_t intAttrOr(Operation *op, StringRef name, int64_t dflt);

} // namespace trellis::codegen::detail

#endif // TRELLIS_LIB_CODEGEN_KERNELBUILDER_H
