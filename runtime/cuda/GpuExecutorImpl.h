//===- GpuExecutorImpl.h - The CUDA executor's internals --------*- C++ -*-===//
//
// Private to runtime/cuda: the inlined op tree (Body, Node), the slots of the
// memory plan and GpuExecutor::Impl, shared by GpuExecutor.cpp (planning,
// dense commands, running) and SparseCommands.cpp (binding the coordinates of
// a sparse stage, the sparse feature ops).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_CUDA_GPUEXECUTORIMPL_H
#define TRELLIS_RUNTIME_CUDA_GPUEXECUTORIMPL_H

#include "trellis/Runtime/GpuExecutor.h"

#include "CudaApi.h"
#include "GemmTuningCache.h"

#include "runtime/kernels/attention.h"
#include "trellis/Reference/Kernels.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
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
};

/// Less common GEMM layouts: A's leading dimension when it is a column block
/// of a wider matrix, an f32 D from f16 A/B, and strided batches (strides in
/// elements; 0 reuses the matrix for every batch).
struct GemmLayout {
  int64_t lda = 0; // 0: dense (k for transA, else m)
  std::optional<DType> outType;
  int32_t batch = 1;
  int64_t strideA = 0, strideB = 0, strideD = 0;
  /// C of D = op(A)·B + C (β = 1), laid out as D; 0: β = 0.
  CUdeviceptr residual = 0;
};

} // namespace gpuexec

using namespace gpuexec;

struct GpuExecutor::Impl {
  const Api *api = nullptr;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  int sm = 0;
  int multiprocessors = 0; // SMs of the device
  CUmodule generated = nullptr, attention = nullptr;
  int attentionFamily = 0;
  std::map<std::string, CUfunction> functions;
  cublasLtHandle_t lt = nullptr;
  // The second stream of concurrent sampler branches, its own GEMM
  // workspace, and the fork/join events.
  CUstream stream2 = nullptr;
  CUdeviceptr gemmWorkspace2 = 0;
  CUevent fork = nullptr, join = nullptr;
  bool concurrentBranches() const {
    return options.concurrentBranches && !options.lowMemory &&
           !options.checkOps &&
           !options.checkFinite && !options.profile;
  }
  GemmPicks tunedGemms; // GEMM key -> the picked algorithm (algoBytes)
  /// A cuBLASLt algorithm (id and configuration) as hex text.
  static std::string algoBytes(const cublasLtMatmulAlgo_t &algo);
  bool tunedGemmsChanged = false; // not yet in the tuning cache
  /// The tuning cache's section of this device and cuBLASLt version.
  std::string tuningCacheSection() const;
  void loadTuningCache();
  void saveTuningCache();
  bool faultInjected = false;
  CUdeviceptr gemmWorkspace = 0;

  const Program &program;
  WeightProvider weights;
  GpuOptions options;
  std::map<std::string, SamplerRunOverrides> overrides;
  StepCallback onStep;
  GpuReport report;
  /// Profiling: (category, start, stop) per timed command of the run.
  std::vector<std::tuple<const std::string *, CUevent, CUevent>> timings;
  std::vector<CUevent> eventPool;
  size_t eventsUsed = 0;
  CUevent nextEvent() {
    if (eventsUsed == eventPool.size()) {
      CUevent e = nullptr;
      api->cuEventCreate(&e, CU_EVENT_DEFAULT);
      eventPool.push_back(e);
    }
    return eventPool[eventsUsed++];
  }

  /// One prepared entry function.
  struct Prepared {
    std::string name;
    Body body;
    std::vector<SlotInfo> slots;
    std::vector<int> args, results;
    size_t arenaBytes = 0, weightBytes = 0, constantBytes = 0;
    CUdeviceptr arena = 0, weightPool = 0, constantPool = 0;
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
  };
  std::map<std::string, std::unique_ptr<Prepared>> prepared;

  Impl(const Program &p, WeightProvider w, GpuOptions o)
      : program(p), weights(std::move(w)), options(o) {}
  ~Impl();

  /// A window partition computed on the device, downloaded (int32 rows [N]
  /// then offsets [S + 1]), as the CPU reference's segments (the empty
  /// windows dropped): --gpu-check-ops.
  static std::shared_ptr<const ref::Segments>
  segmentsFromDevice(const HostTensor &t, int64_t rows);

  // -- errors ---------------------------------------------------------------
  Error opError(const Instr &instr, const std::string &message) const {
    return Error{"error in '" + instr.op + "' " + program.describe(instr.loc) +
                 ": " + message};
  }
  Status check(CUresult r, const char *what) const {
    if (r == CUDA_SUCCESS)
      return Status::ok();
    std::string hint;
    // Faults of a kernel that ran earlier surface at the next call.
    if (!options.syncEachOp &&
        (r == CUDA_ERROR_ILLEGAL_ADDRESS || r == CUDA_ERROR_LAUNCH_FAILED ||
         r == CUDA_ERROR_MISALIGNED_ADDRESS ||
         r == CUDA_ERROR_ILLEGAL_INSTRUCTION || r == CUDA_ERROR_ASSERT))
      hint = "; it comes from an earlier GPU op: rerun with --gpu-sync-ops "
             "to name it";
    return Error{std::string(what) + " failed: " + api->describe(r) + hint};
  }
  Status check(cublasStatus_t s, const char *what) const {
    if (s == CUBLAS_STATUS_SUCCESS)
      return Status::ok();
    return Error{std::string(what) + " failed: " + api->describe(s)};
  }

  /// A generated kernel as the compiler annotated it ({kernel, grid, block,
  /// smem}), resolved in the generated module (cached by name).
  struct Launch {
    CUfunction fn = nullptr;
    unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, smem = 0;
    int64_t threadsPerRow = 0; // dynamic-row kernels (rowsLaunch)
  };
  Result<Launch> resolveLaunch(const json &annotation);
  /// The dynamic-row kernel of `instr`'s annotation `attr`, its grid
  /// covering `rows` · threads_per_row threads.
  Result<Launch> rowsLaunch(const Instr &instr, const char *attr, int64_t rows);
  Result<Launch> rowsLaunch(const json &annotation, int64_t rows);
  /// Fails, naming the op and the tensor, when an operand or result of
  /// `node` has 2^31 or more elements: the generated kernels index with 32
  /// bits (a dynamic tensor's kernel is built for the rows that allow,
  /// lib/Codegen addressableRows).
  Status checkAddressable(const Prepared &p, const Node &node) const;
  /// Enqueues `l` on the current stream; errors name `instr`.
  Status launch(const Launch &l, void **params, const Instr &instr,
                const char *what);

  Status init(const GpuImages &images);
  Status loadModule(CUmodule &module, const std::string &image,
                    const char *what);

  // -- preparation ----------------------------------------------------------
  /// The prepared function; for a sparse stage (dynamic argument shapes)
  /// bound to `args` (re-bound when the coordinates change; the staged
  /// weights are kept).
  Result<Prepared *> prepare(const std::string &name,
                             const std::vector<RtValue> *args = nullptr);
  // -- sparse stages (SparseCommands.cpp) ------------------------------------
  /// Evaluates the coordinate values on the host and gives every dynamic
  /// tensor its concrete shape (before plan()).
  Status bind(Prepared &p, const std::vector<RtValue> &args);
  /// Copies the bound values and index arrays to the device (after plan()).
  Status uploadBound(Prepared &p);
  /// The device command of a sparse feature op; false if `node` is not one.
  Result<bool> buildSparseCommand(Prepared &p, Node &node);
  /// Scratch bytes a sparse feature op needs (conv gather rows, group-norm
  /// statistics, window-ordered q/k/v), 0 for none.
  size_t sparseScratchBytes(const Prepared &p, const Node &node) const;
  /// The launch of an attention call with these parameters: the kernel of
  /// GpuOptions::attentionConfig, or the measured choice of the family for
  /// the head dim and the shape. Where k is head-normalized (`kNormalized`:
  /// params.k_gamma, or params.k_norm_gamma after a pre-pass) and
  /// GpuOptions::attentionSoftmax is "fixed", that choice's FIXED_REF twin
  /// runs instead, followed by the online kernel for the CTAs it flags in
  /// `redoFlags` (attentionRedoFlagsBytes of device memory).
  Result<std::function<Status()>> attentionLaunch(TrellisAttnParams params,
                                                  bool kNormalized,
                                                  CUdeviceptr redoFlags,
                                                  const Instr &instr);
  /// Bytes of redo flags an attention call of `heads` heads over `seqs`
  /// sequences of at most `rows` queries needs (every configuration), 0 when
  /// the fixed-reference softmax is off.
  size_t attentionRedoFlagsBytes(int64_t seqs, int64_t rows,
                                 int64_t heads) const;
  /// Bytes of the head-normalized copies at the start of a dense attention's
  /// scratch: k unless GpuOptions::attentionNorms is "fused", then q for
  /// "prepass" (the redo flags follow them).
  size_t attentionNormCopiesBytes(const Prepared &p, const Node &node) const;
  /// The function of an attention configuration, loaded on first use.
  Result<CUfunction> attentionFunction(const TrellisAttnConfig &config);
  /// The head RMS norm of a token-major view (rows × heads × d, strides in
  /// elements) into a dense copy at `y`, with f32 gains [heads, d].
  Result<std::function<Status()>>
  headNormCommand(CUdeviceptr x, int64_t rowStride, int64_t headStride,
                  CUdeviceptr y, int64_t rows, int64_t heads, int64_t d,
                  CUdeviceptr gamma, const Instr &instr);
  /// trellis.occupancy on the device (logits > 0 compacted in flat order,
  /// the voxel count read back once, then the rows).
  Status deviceOccupancy(Prepared &p, Node &node);
  /// A kernel of the runtime module (attention, head norm, sparse), cached.
  Result<CUfunction> runtimeKernel(const std::string &name);
  /// Enqueues a 1-D launch of 256-thread blocks over `threads` threads.
  Status launch1d(CUfunction f, int64_t threads, void **params,
                  const Instr &instr, const char *what);
  Status instantiate(Prepared &p, const Function &fn,
                     const std::vector<int> &argSlots,
                     std::vector<int> &resultSlots, Body &into);
  Status instantiateBody(Prepared &p, const std::vector<Instr> &instrs,
                         std::vector<int> &map, Body &into);
  int newSlot(Prepared &p, const ValueType &type) {
    SlotInfo s;
    s.type = type;
    s.dynamicRows = type.kind == ValueType::Kind::Tensor &&
                    !type.shape.empty() && type.shape[0] < 0;
    s.root = int(p.slots.size());
    p.slots.push_back(s);
    return s.root;
  }
  int root(const Prepared &p, int s) const {
    while (p.slots[s].root != s)
      s = p.slots[s].root;
    return s;
  }
  /// The device address of a slot: its storage root plus the offsets of the
  /// views in between.
  CUdeviceptr address(const Prepared &p, int s) const {
    size_t offset = 0;
    while (p.slots[s].root != s) {
      offset += p.slots[s].viewOffset;
      s = p.slots[s].root;
    }
    return p.slots[s].ptr + offset;
  }
  /// Elements between consecutive tokens of a strided split view ([B, L, H,
  /// d] into a packed [B, L, S, H, d]), 0 for a dense slot.
  int64_t tokenStride(const Prepared &p, int s) const {
    while (true) {
      if (p.slots[s].tokenStride)
        return p.slots[s].tokenStride;
      if (p.slots[s].root == s)
        return 0;
      s = p.slots[s].root;
    }
  }
  bool viewSplit(Prepared &p, Node &node,
                 const std::multimap<int, std::pair<const Node *, int>> &users);
  void number(Prepared &p, Body &body, int &pos);
  void liveness(Prepared &p, Body &body, std::vector<const Node *> &loops);
  void use(Prepared &p, int slot, int pos,
           const std::vector<const Node *> &loops);
  Status plan(Prepared &p);
  Status stageWeights(Prepared &p);
  Status buildCommands(Prepared &p, Body &body);
  Status buildCommand(Prepared &p, Node &node);
  Status buildGemm(Prepared &p, Node &node, CUdeviceptr a, CUdeviceptr b,
                   CUdeviceptr d, CUdeviceptr bias, DType dtype, int64_t m,
                   int64_t n, int64_t k, bool transA, const std::string &act,
                   std::function<Status()> &out,
                   const GemmLayout &layout = {});

  // -- running --------------------------------------------------------------
  /// A sampler region: one graph per body (captured at its first run).
  Status runBody(Prepared &p, Body &body);
  /// The function body: its runs of graph-safe commands as graphs.
  Status runSegments(Prepared &p, Body &body);
  bool graphsAllowed() const;
  /// Launches nodes[from, to) as one CUDA graph, captured at the first call.
  Status launchGraph(Prepared &p, std::vector<Node> &nodes, size_t from,
                     size_t to);
  Status runNode(Prepared &p, Node &node);
  Status runSampler(Prepared &p, Node &node);
  Status checkNode(Prepared &p, const Node &node);
  std::string storageNeighbours(const Prepared &p, int slot) const;
  std::string describeAlgo(const cublasLtMatmulAlgo_t &algo);
  int64_t algoConfig(const cublasLtMatmulAlgo_t &algo,
                     cublasLtMatmulAlgoConfigAttributes_t attr);
  Result<HostTensor> download(const Prepared &p, int slot);
  Status upload(const Prepared &p, int slot, const HostTensor &t);
  void release(Prepared &p);

  /// The device copies of the last run's tensor results, while the arena
  /// holding them is alive: a later step reads a result in place instead of
  /// uploading the host copy again (FlexiCubes and the mesh decoder's
  /// fields).
  struct DeviceResult {
    const void *host = nullptr;
    size_t bytes = 0;
    CUdeviceptr device = 0;
  };
  std::vector<DeviceResult> lastResults;
  /// The device copy of `t` if it is one of the last run's results.
  CUdeviceptr deviceCopyOf(const HostTensor &t) const {
    for (const DeviceResult &r : lastResults)
      if (r.host == t.raw() && r.bytes == t.nbytes())
        return r.device;
    return 0;
  }

  // -- FlexiCubes (FlexiCubesGpu.cpp) -----------------------------------------
  /// Device buffers by name, kept between calls and grown as needed; freed
  /// by ~Impl before the context goes.
  struct ScratchBuffers {
    std::map<std::string, std::pair<CUdeviceptr, size_t>> buffers;
  } flexiScratch;
  Result<CUdeviceptr> scratch(const std::string &name, size_t bytes);
};


} // namespace trellis

#endif // TRELLIS_RUNTIME_CUDA_GPUEXECUTORIMPL_H
