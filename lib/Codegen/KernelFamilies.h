//===- KernelFamilies.h - The generated kernels by family -------*- C++ -*-===//
//
// Internal to lib/Codegen: the emitters of each kernel family, one file each,
// as OpKernels.cpp (the per-op dispatch) and the convolution and sampler
// kernels call them.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_LIB_CODEGEN_KERNELFAMILIES_H
#define TRELLIS_LIB_CODEGEN_KERNELFAMILIES_H

#include "lib/Codegen/KernelBuilder.h"

namespace trellis::codegen::detail {

//===----------------------------------------------------------------------===//
// Elementwise (Elementwise.cpp)
//===----------------------------------------------------------------------===//

/// An operand of an elementwise kernel: the kernel argument and its element
/// strides over the output's dimensions (0 where broadcast).
struct EwOperand {
  unsigned arg;
  SmallVector<int64_t> strides;
};

/// NumPy broadcasting of `in` against `out` (trailing dimensions aligned).
SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> in,
                                      ArrayRef<int64_t> out);

/// [B, C] broadcast over the tokens of x [B, ..., C], or x's own shape.
SmallVector<int64_t> perSampleStrides(ArrayRef<int64_t> v, ArrayRef<int64_t> x);

/// Dynamic rows: whether a modulation vector `v` of x is per sample ([B, C]
/// over x [B, L, C], B dynamic or equal), rather than x-shaped or broadcast
/// by NumPy rules ([1, C], [C]).
bool isPerSampleVector(RankedTensorType v, RankedTensorType x);

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
                       bool computeF32, const EwBody &body);

/// The reference's f32 formula of a unary op (runtime/reference/Elementwise).
Value unaryF32(KernelBuilder &kb, StringRef name, Value x);

bool isUnaryName(StringRef n);

Value binary(KernelBuilder &kb, StringRef name, Value x, Value y, bool isInt);

//===----------------------------------------------------------------------===//
// Row reductions (RowKernels.cpp)
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
  /// The E4M3 variant (rows in registers): argument `out` is i8, each
  /// value rounded to f16 then stored by KernelBuilder::toE4M3 at the f32
  /// argument `quantize`.
  int quantize = -1;
};

/// How a row kernel holds its row: G lanes (a power of two ≤ 32) per row and
/// K vectors of V elements per lane in registers, or (long rows) a loop of 32
/// lanes over the row.
struct RowTiling {
  int64_t v, g, k;
  bool inRegisters;
};
RowTiling rowTiling(Type xTy, int64_t n);

Launch emitRowKernel(KernelBuilder &kb, const RowSpec &s);

/// Normalization / softmax over a non-last axis of x viewed as
/// [outer, n, inner]: one thread per (outer, inner) position.
Launch emitAxisKernel(KernelBuilder &kb, const RowSpec &s, int64_t outer,
                      int64_t inner);

/// trellis.reduce of x (argument 0) viewed as [outer, n, inner] into argument
/// 1: "sum", "mean" or "max", f32 accumulation. inner = 1: a warp per result
/// (lanes stride the row, shuffle combine); else a thread per result looping
/// over the axis. Dynamic rows (kb.rows): `outer` is the bound's, and
/// `outerPerRow` outer positions belong to one dimension-0 row.
Launch emitReduceKernel(KernelBuilder &kb, StringRef kind, int64_t outer,
                        int64_t n, int64_t inner, int64_t outerPerRow);

/// Layer norm over a non-last axis of x viewed as [outer, n, inner], the
/// channels split across the block: P threads of a block take P position
/// groups (V consecutive inner positions each, one vector access), the
/// 256 / P = S slices of the block split the n channels (channel c to slice
/// c % S), so a thread holds kc = n / S vectors in registers and x is read
/// once. Partial sums meet in workgroup memory. Returns failure when no
/// configuration keeps kc · V ≤ 32 values per thread, or γ / β are too long
/// to stage.
FailureOr<Launch> emitChannelSplitLayerNorm(KernelBuilder &kb, const RowSpec &s,
                                            int64_t outer, int64_t inner);

//===----------------------------------------------------------------------===//
// Data movement (DataMovement.cpp)
//===----------------------------------------------------------------------===//

/// Split (toPieces) or concat along `axis` of a row-major tensor viewed as
/// [outer, dim, inner]: the thread walks the whole (input or output) tensor
/// in groups of V elements and picks its piece with an if-chain. Dynamic
/// rows (axis >= 1): `outer` is for the bound `bound` of dimension 0.
Launch emitSplitConcat(KernelBuilder &kb, bool toPieces, unsigned whole,
                       ArrayRef<unsigned> pieces, ArrayRef<int64_t> sizes,
                       int64_t outer, int64_t inner, int64_t bound = 0);

/// out[i] = in[src(i)] for every output element (V elements per thread when
/// `v` > 1: src(i) of a group's first element, the group contiguous in both).
Launch emitGather(KernelBuilder &kb, ArrayRef<int64_t> outShape, int64_t v,
                  function_ref<Value(ArrayRef<Value>)> src);

/// The row-index kernels of the sparse resampling ops (trellis.gather_rows,
/// trellis.segment_mean, trellis.sparse.subdivide_features): each output row
/// reads whole rows of x picked by an index (subdivide: row r / 8, its
/// parent's, spec §6.5). Every tensor is flattened at
/// its own bound (x, the index and the result have different row counts);
/// the actual rows (the result's) come last. V elements per thread, V the
/// largest power of two dividing the row up to 16 bytes.
FailureOr<Launch> emitRowIndexKernel(Operation *op, StringRef n,
                                     gpu::GPUModuleOp module, StringRef name);

/// The elementwise half of trellis.sparse.group_norm: parameters (x, coords, γ,
/// β, out, stats, rows). The runtime's reduction kernels write stats f32 [B ·
/// G, 2] = (mean, 1/√(var + eps)) per (sample, group) first; then y = (x −
/// mean) · rstd · γ[c] + β[c] in f32, one rounding, the row's sample from the
/// coordinates' batch column (coords int32 [N, 4]). V channels per thread, V
/// dividing the group width (one statistics pair).
FailureOr<Launch> emitGroupNormApplyKernel(Operation *op,
                                           gpu::GPUModuleOp module,
                                           StringRef name);

FailureOr<Launch> emitPermute(Operation *op, KernelBuilder &kb);

FailureOr<Launch> emitPixelShuffle(Operation *op, KernelBuilder &kb);

//===----------------------------------------------------------------------===//
// Per-op emitters (OpKernels.cpp) and classification (Classify.cpp)
//===----------------------------------------------------------------------===//

/// `shape`: x's (bound) shape.
FailureOr<Launch> emitLayerNorm(Operation *op, KernelBuilder &kb,
                                ArrayRef<int64_t> shape);

FailureOr<Launch> emitTimestepEmbedding(Operation *op, KernelBuilder &kb,
                                        gpu::GPUModuleOp module,
                                        StringRef name);

/// The ops whose kernels take dynamic rows (docs/design/gpu-backend.md).
bool supportsDynamicRows(Operation *op);

} // namespace trellis::codegen::detail

#endif // TRELLIS_LIB_CODEGEN_KERNELFAMILIES_H
