//===- PreparedFunction.h - The executor's prepared functions ---*- C++ -*-===//
//
// Private to runtime/cuda: one entry function as the executor prepares it.
// The call graph inlined into an op tree (Body, Node), the global value
// slots of the memory plan (SlotInfo), the GEMM layouts of the commands, and
// Prepared, which holds them with the function's device pools, graphs and
// the binding of a sparse stage. The size helpers every part uses come first.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_CUDA_PREPAREDFUNCTION_H
#define TRELLIS_RUNTIME_CUDA_PREPAREDFUNCTION_H

#include "trellis/Runtime/GpuExecutor.h"

#include "runtime/cuda/CudaApi.h"

#include "trellis/Reference/Kernels.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace trellis {

using cuda::Api;
using json = nlohmann::json;
using CoordsPtr = std::shared_ptr<const ref::CoordSet>;

namespace gpuexec {

constexpr size_t kAlign = 256;
constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;

inline size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

inline size_t bytesOf(const ValueType &t) {
  int64_t n = 1;
  for (int64_t d : t.shape)
    n *= d;
  return size_t(n) * dtypeSize(t.dtype);
}

inline bool isStatic(const ValueType &t) {
  if (t.kind != ValueType::Kind::Tensor)
    return false;
  for (int64_t d : t.shape)
    if (d < 0)
      return false;
  return true;
}

/// The ops that run on the host at a stage boundary (their inputs are
/// downloaded, their outputs stay on the host).
inline bool isHostOp(const std::string &op) {
  return op == "trellis.occupancy" || op == "trellis.sparse.to_tensor";
}

/// The optional head-norm gain operands of an attention op: `fixed` leading
/// operands (q, k, v for trellis.attention; q, k, v, segments for
/// trellis.sparse.attention), then q_gamma?, k_gamma? as the op's
/// operandSegmentSizes says: indices into the operand list, or -1.
inline std::pair<int, int> gammaOperands(const Instr &instr, int fixed) {
  auto seg = instr.attrs.find("operandSegmentSizes");
  if (seg == instr.attrs.end() || !seg->is_array() ||
      int(seg->size()) != fixed + 2)
    return {-1, -1};
  int next = fixed, q = -1, k = -1;
  if ((*seg)[fixed].get<int>() == 1)
    q = next++;
  if ((*seg)[fixed + 1].get<int>() == 1)
    k = next++;
  return {q, k};
}
inline std::pair<int, int> attentionGammas(const Instr &instr) {
  return gammaOperands(instr, 3);
}
inline std::pair<int, int> sparseAttentionGammas(const Instr &instr) {
  return gammaOperands(instr, 4);
}

} // namespace gpuexec

//===----------------------------------------------------------------------===//
// The inlined op tree of one entry function
//===----------------------------------------------------------------------===//

namespace gpuexec {

struct Node;

/// A region body (or the function body): ops, block arguments, yields.
struct Body {
  std::vector<Node> nodes;
  std::vector<int> args, yields;
  int endPos = 0; // position of the body's last use point (its yields)
};

/// One op with its operand/result slots in the instantiation's global
/// numbering. Sampler ops keep their regions as nested bodies.
struct Node {
  const Instr *instr = nullptr;
  std::vector<int> in, out;
  std::vector<Body> regions;
  int pos = 0, endPos = 0;         // endPos > pos for loops
  std::function<Status()> command; // enqueues the op's work on the stream
  std::string what;                // profile category
  bool view = false;               // a split whose results are views
  int scratch = -1;                // conv3d: the im2col buffer's slot
  int loopState = -1;              // flow_sample: v_cond, v_uncond, tau...
  std::vector<int> loopSlots;      // flow_sample: [vc, vu, tau0, tau1]
  // Sparse stages: evaluated on the host when the coordinates are bound
  // (a coordinate op, or an op of bound values only); no device command.
  bool bound = false;
  // Its command does host work every run (host memory read or written, a
  // wait for the GPU), so it is never replayed from a CUDA graph; set by the
  // code that builds the command (buildCommand and the builders it calls).
  bool hostWork = false;
  // Index arrays a sparse op needs besides its operands (built at binding,
  // uploaded to the binding pool): downsample {child offsets, children},
  // upsample {parent rows}.
  std::vector<HostTensor> auxHost;
  std::vector<CUdeviceptr> aux;
};

/// A node's regions in the order a sampler step runs them: a sampler's
/// shared prefix (region 2, trellis-share-guidance-prefix) before the
/// branches that read it.
std::vector<Body *> inRunOrder(Node &node);

struct SlotInfo {
  ValueType type;
  enum class Where {
    Unset,
    Arena,
    Weight,
    Constant,
    Host,
    Bound // computed on the host at binding, copied to the binding pool
  } where = Where::Unset;
  int root = -1;           // the slot this one is a view of (or itself)
  size_t viewOffset = 0;   // bytes from the parent's address (split views)
  int64_t tokenStride = 0; // strided split views: elements between tokens
  // Lane 1: storage of the unconditional sampler branch, which runs on a
  // second stream concurrently with lane 0; it must not share memory with
  // lane-0 values alive at any time in [laneFrom, laneTo] (the loop).
  int lane = 0, laneFrom = 0, laneTo = 0;
  int def = -1, last = -1;
  size_t offset = 0;   // in the arena / weight pool / constant pool
  CUdeviceptr ptr = 0; // resolved address
  // Bound coordinate values on the device: coords int32 [N, 4] or segment
  // rows int32 [N] at ptr; the per-sample / per-segment offsets int32 at aux.
  CUdeviceptr aux = 0;
  bool dynamicRows = false; // declared with a dynamic dimension 0
  std::string weightModel, weightName;
  /// A weight read only by FP8 linears: staged as its E4M3 bytes, then (at
  /// kAlign steps) its amax and dequantize scale (fp8StoredBytes), quantized
  /// on the device from its f16 upload (stageWeights).
  bool fp8 = false;
};

/// The pool bytes of an E4M3-stored weight of type `t` (SlotInfo::fp8).
inline size_t fp8StoredBytes(const ValueType &t) {
  size_t elements = 1;
  for (int64_t d : t.shape)
    elements *= size_t(d);
  return alignUp(elements) + 2 * kAlign;
}

/// Less common GEMM layouts: A's leading dimension when it is a column block
/// of a wider matrix, an f32 D from f16 A/B, and strided batches (strides in
/// elements; 0 reuses the matrix for every batch).
struct GemmLayout {
  int64_t lda = 0; // 0: dense (k for transA, else m)
  /// A and B are E4M3 with these per-tensor dequantize scales (device
  /// floats, kAlign-aligned: cuBLASLt refuses 4-byte-aligned ones); C and D
  /// keep the GEMM's dtype (f16). 0: not an FP8 GEMM.
  CUdeviceptr fp8ScaleA = 0, fp8ScaleB = 0;
  /// D in E4M3, scaled by this device float before the rounding (the next
  /// FP8 linear's quantize scale); C keeps the GEMM's dtype. 0: D as
  /// outType says.
  CUdeviceptr fp8ScaleD = 0;
  std::optional<DType> outType;
  int32_t batch = 1;
  int64_t strideA = 0, strideB = 0, strideD = 0;
  /// C of D = op(A)·B + C (β = 1), laid out as D; 0: β = 0.
  CUdeviceptr residual = 0;
  /// f32 operands rounded to TF32 on tensor cores (linear's
  /// precision = "tf32"): CUBLAS_COMPUTE_32F_FAST_TF32.
  bool tf32 = false;
};

/// Who reads each slot: slot -> (the reading node, the operand index).
using SlotUsers = std::multimap<int, std::pair<const Node *, int>>;

/// The bytes to allocate for `bytes` of a sparse stage's memory: 1/8 more,
/// rounded up to 2 MiB, so that the next voxel set (up to ~12% larger) fits.
inline size_t capacityFor(size_t bytes, bool dynamic) {
  if (!dynamic)
    return std::max<size_t>(bytes, 256);
  constexpr size_t kGranule = size_t(2) << 20;
  return (bytes + bytes / 8 + kGranule - 1) / kGranule * kGranule;
}

//===----------------------------------------------------------------------===//
// A prepared entry function
//===----------------------------------------------------------------------===//

/// One prepared entry function.
struct Prepared {
  std::string name;
  Body body;
  std::vector<SlotInfo> slots;
  std::vector<int> args, results;
  size_t arenaBytes = 0, weightBytes = 0, constantBytes = 0;
  CUdeviceptr arena = 0, weightPool = 0, constantPool = 0;
  /// The E4M3 copies of the weights of FP8 linears (precision "fp8_e4m3"),
  /// by weight slot: one allocation each, the bytes then (at kAlign steps)
  /// the amax and the dequantize scale cuBLASLt reads. Made when the
  /// commands are built, from the staged fp16 weights.
  std::map<int, CUdeviceptr> fp8Weights;
  /// Static-scale FP8 linears' device scales (fp8StaticScales) and static
  /// FP8 attention's per-head v_amax (fp8AttentionCommand), by op.
  std::map<const Instr *, CUdeviceptr> fp8StaticScales;
  /// Calibration: each dynamic FP8 linear's running amax (one float) and
  /// each dynamic FP8 attention's (one per head), shared by the nodes of one
  /// op (its calls in both sampler branches) and kept when a sparse stage's
  /// commands are built again for new voxels.
  struct Fp8RunningAmax {
    CUdeviceptr at = 0;
    size_t count = 1;
  };
  std::map<const Instr *, Fp8RunningAmax> fp8Running;
  /// Storage roots a producer (an FP8 linear, an attention op) writes in
  /// E4M3 (their first bytes) for the FP8 linear that reads them: root ->
  /// that reader (markFp8E4M3Outputs).
  std::map<int, const Instr *> fp8E4M3Outputs;
  // Bytes allocated for the arena and the bound values: a sparse stage's are
  // allocated with headroom (capacityFor) and handed to its next binding when
  // they fit, so a new voxel set of similar size allocates nothing.
  size_t arenaCapacity = 0, boundCapacity = 0;
  bool constantsUploaded = false; // the constant pool holds its values
  std::vector<RtValue> hostSlots; // host values (coords)
  // Sparse stages: the argument values the binding was computed from, the
  // bound host values by slot, and their device copies.
  bool dynamic = false;
  std::vector<std::optional<HostTensor>> bindingKey;
  std::vector<RtValue> boundValues;
  CUdeviceptr boundPool = 0;
  size_t boundBytes = 0;
  std::vector<std::vector<uint8_t>> constantBytesHost;
  // trellis-hoist-time: the host copy of each trellis.time_grid result (by
  // slot) and the τ of the sampler step being launched (by the region's τ
  // slot): trellis.time_row resolves its table row on the host.
  std::map<int, HostTensor> timeGrids;
  std::map<int, float> stepTau;
  // The sampler's τ for every (step, branch), in pinned host memory that
  // the asynchronous copies read: allocated once and kept (pinning and
  // unpinning cost ~1 ms each, which a per-run buffer paid every run).
  void *pinnedTau = nullptr;
  size_t pinnedTauBytes = 0;
  // trellis.sparse.window_segments, computed on the device (by result slot;
  // the slot holds int32 rows [N] then offsets [S + 1]): the row count, the
  // window grid n_x, n_y, n_z of the binding's coordinates, the segment
  // count S = B·n_x·n_y·n_z (empty windows are empty segments) and the
  // 256-row blocks of the counting sort.
  struct WindowPartition {
    int64_t rows = 0, segments = 0;
    int32_t window = 0, shift = 0, n[3] = {0, 0, 0}, blocks = 0;
  };
  std::map<int, WindowPartition> windows;
  // CUDA graphs by their first node: each sampler region's body after its
  // leading time rows (runBody), and the function body's runs of plain
  // device commands (runSegments).
  std::map<const Node *, CUgraphExec> graphs;
  // --gpu-check-ops: a hash of each checked result as its op wrote it (by
  // slot): every input must still hold what its producer wrote when it is
  // read.
  std::map<int, std::pair<uint64_t, const Instr *>> writtenHashes;
  std::vector<cublasLtMatmulDesc_t> descs;
  std::vector<cublasLtMatrixLayout_t> layouts;
  int positions = 0;
  bool resident = false;
  /// Host time of making it resident (makeResident): staging the weights,
  /// uploading the constants and bound values, building the commands; and
  /// whether that ran on another thread while an earlier stage computed
  /// (GpuExecutor::prepareInBackground).
  struct SetupTimes {
    double weights = 0, uploads = 0, commands = 0;
  } setup;
  bool madeResidentInBackground = false; // until its first run reports it
};

} // namespace gpuexec

} // namespace trellis

#endif // TRELLIS_RUNTIME_CUDA_PREPAREDFUNCTION_H
