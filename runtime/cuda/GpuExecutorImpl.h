//===- GpuExecutorImpl.h - The CUDA executor's internals --------*- C++ -*-===//
//
// Private to runtime/cuda: GpuExecutor::Impl, the device context and the
// prepared functions of one executor. Its members are defined one concept a
// file: Context.cpp, Instantiate.cpp, MemoryPlan.cpp, WeightStaging.cpp, the
// *Commands.cpp and Sparse*.cpp command builders, OpCheck.cpp, GraphRunner.cpp,
// Sampler.cpp and GpuExecutor.cpp (the public facade). The op tree and the
// slots they share are in PreparedFunction.h.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_CUDA_GPUEXECUTORIMPL_H
#define TRELLIS_RUNTIME_CUDA_GPUEXECUTORIMPL_H

#include "trellis/Runtime/GpuExecutor.h"

#include "runtime/cuda/CudaApi.h"
#include "runtime/cuda/GemmTuningCache.h"
#include "runtime/cuda/PreparedFunction.h"

#include "runtime/kernels/attention.h"
#include "trellis/Reference/Kernels.h"

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace trellis {

namespace gpuexec {
struct ConvTiles; // SparseSupport.h
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
  /// Guards `functions`: kernels are resolved while commands are built (on a
  /// background preparation's thread too) and by a few ops at run time.
  std::mutex functionsMutex;
  cublasLtHandle_t lt = nullptr;
  // The second stream of concurrent sampler branches, its own GEMM
  // workspace, and the fork/join events.
  CUstream stream2 = nullptr;
  CUdeviceptr gemmWorkspace2 = 0;
  CUevent fork = nullptr, join = nullptr;
  bool concurrentBranches() const { return concurrentBranchesFor(options); }
  static bool concurrentBranchesFor(const GpuOptions &o) {
    return o.concurrentBranches && !o.lowMemory && !o.checkOps &&
           !o.checkFinite && !o.profile;
  }
  GemmPicks tunedGemms; // GEMM key -> the picked algorithm (algoBytes)
  /// cuBLASLt's heuristic answer per exact GEMM problem (shape, types,
  /// epilogue, strides), asked once per executor: the same query gives the
  /// same list, and a transformer asks it once per block otherwise.
  struct GemmHeuristics {
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    int found = 0;
    cublasLtMatmulHeuristicResult_t results[8] = {};
    int picked = -1; // the candidate pickGemmAlgo chose, once it has
  };
  std::map<std::string, GemmHeuristics> gemmHeuristics;
  /// A cuBLASLt algorithm (id and configuration) as hex text.
  static std::string algoBytes(const cublasLtMatmulAlgo_t &algo);
  bool tunedGemmsChanged = false; // not yet in the tuning cache
  /// The tuning cache's section of this device and cuBLASLt version.
  std::string tuningCacheSection() const;
  void loadTuningCache();
  void saveTuningCache();
  bool faultInjected = false;
  CUdeviceptr gemmWorkspace = 0;
  void markFp8Weights(Prepared &p, const SlotUsers &users) const;
  /// An FP8 linear or an attention op whose output only a static-scale FP8
  /// linear reads (as its input, reshapes between allowed) writes that
  /// output in E4M3 with the reader's scale (Prepared::fp8E4M3Outputs); not
  /// while checking ops against the CPU.
  void markFp8E4M3Outputs(Prepared &p, const SlotUsers &users) const;
  /// Calibration (trellis.exe --calibrate): told each FP8 linear's input
  /// amax after every run.
  Fp8Observer fp8Observer;
  /// The device scales of a static-scale FP8 linear (activation_amax): the
  /// quantize scale 448 / amax at +0, the dequantize scale amax / 448 at
  /// +kAlign (ref::e4m3ScaleFor's values), uploaded once.
  Result<CUdeviceptr> fp8StaticScales(Prepared &p, const Instr &instr);
  /// The device maxima a calibration run raises for `instr` (`count`
  /// floats, zeroed once, kept in Prepared::fp8Running); 0 when this is not a
  /// calibration run.
  Result<CUdeviceptr> fp8RunningAmax(Prepared &p, const Instr &instr,
                                     size_t count);
  /// `values` on the device, uploaded at the op's first call and kept in
  /// Prepared::fp8StaticScales (the static scales of fp8StaticScales and of
  /// the FP8 attention's v_amax); `what` names the buffer in errors.
  Result<CUdeviceptr> uploadFp8Constants(Prepared &p, const Instr &instr,
                                         const std::vector<float> &values,
                                         const std::string &what);
  /// The quantize scale at which a producer writes its result slot `out` in
  /// E4M3 for the FP8 linear that reads it (Prepared::fp8E4M3Outputs), else
  /// 0.
  float fp8OutputQuantize(const Prepared &p, int out) const;
  /// An op with precision = "fp8_e4m3": a W8A8 E4M3 linear (Fp8Gemm.cpp) or
  /// an FP8 attention (Fp8Attention.cpp); callers check the op.
  static bool fp8Precision(const Instr &instr) {
    auto precision = instr.stringAttr("precision");
    return precision && *precision == "fp8_e4m3";
  }
  /// The E4M3 copy of weight slot `w` (Prepared::fp8Weights), made on the
  /// setup stream at the first call.
  Result<CUdeviceptr> fp8Weight(Prepared &p, int w, const Instr &instr);
  /// Enqueues amax + quantize of the f16 tensor at `x` (`n` values) into `q`
  /// and the scale slots at `amax` and `dequant` (zeroes `amax` first);
  /// `running` (calibration, else 0) is raised to the amax too.
  Status quantizeFp8(CUdeviceptr x, size_t n, CUdeviceptr q, CUdeviceptr amax,
                     CUdeviceptr dequant, CUstream on, CUdeviceptr running = 0);
  /// The FP8 linear's command: the activation quantized into the node's
  /// scratch, then the E4M3 GEMM (D[n, m] = W[n, k]·x[m, k]ᵀ, as fp16).
  Status buildFp8LinearCommand(Prepared &p, Node &node, int64_t n, int64_t m,
                               int64_t k, const std::string &act,
                               GemmLayout layout);
  // -- device memory (DeviceMemory.cpp) ---------------------------------------
  /// Every device allocation of the executor goes through allocate(), which
  /// counts it against the budget: GpuOptions::memoryBudget, or what the
  /// device had free after the context and modules were loaded (less a
  /// reserve for the driver), whichever is smaller. A request over the budget
  /// fails with the bytes asked for and in use, before the driver is asked.
  /// The budget and the bytes in use (now, at most) are report's
  /// memoryBudget, bytesInUse and peakBytesInUse.
  std::map<CUdeviceptr, size_t> allocations;
  std::mutex allocationMutex; // background preparations allocate too
  /// Sets report.memoryBudget from the device's free memory (init, before
  /// the executor's first allocation).
  Status measureMemoryBudget();
  /// `what` names the buffer in the errors ("the weights of 'slat_stage'").
  Status allocate(CUdeviceptr &ptr, size_t bytes, const std::string &what);
  /// Frees `ptr` (0: nothing) and sets it to 0.
  void deallocate(CUdeviceptr &ptr);
  /// Device work done while making a function resident (weight staging, the
  /// constant and bound-value uploads, GEMM candidate timing) goes to its own
  /// stream, with its own GEMM workspace: a background preparation neither
  /// queues behind the stage the main stream runs nor shares its buffers.
  /// (On the main thread it runs while the main stream is idle: every run
  /// ends synchronized.)
  CUstream setupStream = nullptr;
  CUdeviceptr setupWorkspace = 0;
  /// Serializes makeResident between the main thread and background
  /// preparations: the command builders share the GEMM heuristics and picks,
  /// the kernel table and the upload staging buffer.
  std::mutex buildMutex;
  /// Background preparations make their functions resident only once the
  /// main thread has built the stage it runs next (run() opens the gate
  /// before launching it), so they never delay that stage's own setup.
  std::promise<void> residencyGate;
  std::shared_future<void> residencyGateOpened;
  bool residencyGateIsOpen = true;
  void openResidencyGate() {
    if (!residencyGateIsOpen) {
      residencyGate.set_value();
      residencyGateIsOpen = true;
    }
  }
  /// Whether prepareInBackground also makes the function resident: not
  /// where one stage's device memory at a time is the point (lowMemory), nor
  /// in the checking and profiling modes, which read the streams op by op.
  bool residentInBackground() const {
    return !options.lowMemory && !options.checkOps && !options.checkFinite &&
           !options.profile && !options.syncEachOp;
  }

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
  /// The events around each run's commands (GpuReport::runSeconds), made at
  /// the first run and kept: creating two per call cost a warm small call
  /// several microseconds.
  CUevent runStart = nullptr, runStop = nullptr;
  /// Pinned host memory for a run's small arguments and results (up to
  /// kPinnedRunBytes each way), kept and grown: an argument copied there
  /// needs no wait for its upload, and the results' downloads are queued
  /// behind the commands and share the run's one synchronization.
  struct PinnedBuffer {
    void *data = nullptr;
    size_t bytes = 0;
  };
  PinnedBuffer pinnedArgs, pinnedResults;
  /// `buffer` with room for `bytes` (reallocated when it has less).
  Result<char *> pinned(PinnedBuffer &buffer, size_t bytes);
  CUevent nextEvent() {
    if (eventsUsed == eventPool.size()) {
      CUevent e = nullptr;
      api->cuEventCreate(&e, CU_EVENT_DEFAULT);
      eventPool.push_back(e);
    }
    return eventPool[eventsUsed++];
  }

  /// One prepared entry function (PreparedFunction.h).
  using Prepared = gpuexec::Prepared;
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
  /// Makes this executor's context current on the calling thread (an
  /// engine may be used from another thread than the one that created it,
  /// and two executors of two devices from one thread).
  Status makeCurrent() const {
    return context ? check(api->cuCtxSetCurrent(context), "cuCtxSetCurrent")
                   : Status::ok();
  }
  Status loadModule(CUmodule &module, const std::string &image,
                    const char *what);

  // -- preparation ----------------------------------------------------------
  /// The prepared function; for a sparse stage (dynamic argument shapes)
  /// bound to `args` (re-bound when the coordinates change; the staged
  /// weights are kept).
  Result<Prepared *> prepare(const std::string &name,
                             const std::vector<RtValue> *args = nullptr);
  // -- sparse stages (SparseBinding.cpp, SparseCommands.cpp) ------------------
  /// Evaluates the coordinate values on the host and gives every dynamic
  /// tensor its concrete shape (before plan()).
  Status bind(Prepared &p, const std::vector<RtValue> &args) const;
  /// Where the bound values and the nodes' index arrays go in the one
  /// buffer uploadBound copies them to (and the buffer's size, which
  /// planMemory reports). Clears the nodes' device addresses (aux).
  struct BoundLayout {
    struct Piece {
      const void *data;
      size_t bytes, offset;
    };
    std::vector<Piece> pieces;
    std::vector<HostTensor> keep; // offsets converted to int32
    std::vector<std::pair<size_t, size_t>> slotPieces; // by slot (SIZE_MAX)
    std::vector<std::pair<Node *, size_t>> nodePieces;
    size_t total = 0;
  };
  BoundLayout layoutBound(Prepared &p) const;
  /// Copies the bound values and index arrays to the device (after plan()).
  Status uploadBound(Prepared &p);
  /// A pinned host buffer of at least `bytes`, kept by the executor and grown
  /// as needed (valid until the next call; synchronous users only).
  Result<void *> pinnedStaging(size_t bytes);
  void *staging = nullptr;
  size_t stagingBytes = 0;
  // The steps of bind() (SparseBinding.cpp): a walk over the op tree.
  struct BindState;
  Result<RtValue> hostValue(Prepared &p, BindState &st, int slot) const;
  Status bindBody(Prepared &p, Body &body, BindState &st) const;
  Status bindNode(Prepared &p, Node &node, BindState &st) const;
  Status bindHostOp(Prepared &p, Node &node, BindState &st, bool allHost) const;
  Status bindNeighborMap(Prepared &p, Node &node) const;
  Status bindWindowSegments(Prepared &p, Node &node) const;
  Status bindParentNeighborMap(Prepared &p, Node &node) const;
  Status bindResultRows(Prepared &p, Node &node) const;
  /// The device command of a sparse feature op; false if `node` is not one.
  Result<bool> buildSparseCommand(Prepared &p, Node &node);
  // The sparse op commands buildSparseCommand dispatches to (true: built).
  Result<bool> buildNeighborMapCommand(Prepared &p, Node &node);
  Result<bool> buildWindowSegmentsCommand(Prepared &p, Node &node);
  Result<bool> buildParentNeighborMapCommand(Prepared &p, Node &node);
  Result<bool> buildSparseGroupNormCommand(Prepared &p, Node &node);
  // -- sparse convs (SparseConv.cpp) ------------------------------------------
  Result<bool> buildSparseConvCommand(Prepared &p, Node &node);
  Result<bool> buildImplicitConvCommand(Prepared &p, Node &node,
                                        const gpuexec::ConvTiles &tiles,
                                        int neighbors, CUdeviceptr b);
  Result<bool> buildTapsFirstConvCommand(Prepared &p, Node &node, int neighbors,
                                         CUdeviceptr b);
  // -- sparse attention (SparseAttention.cpp) ---------------------------------
  Result<bool> buildSparseAttentionCommand(Prepared &p, Node &node);
  Result<bool> buildSparseFp8AttentionCommand(Prepared &p, Node &node,
                                              TrellisAttnParams params);
  Status sparseCrossAttentionParams(Prepared &p, Node &node,
                                    TrellisAttnParams &params);
  Status sparseSelfAttentionParams(Prepared &p, Node &node,
                                   TrellisAttnParams &params,
                                   std::vector<std::function<Status()>> &before,
                                   std::vector<std::function<Status()>> &after,
                                   bool &kNormalized, CUdeviceptr &redoFlags);
  /// Scratch bytes a sparse feature op needs (conv gather rows, group-norm
  /// statistics, window-ordered q/k/v), 0 for none.
  size_t sparseScratchBytes(const Prepared &p, const Node &node) const;
  /// The attention kernel for a call with these parameters: the one of
  /// GpuOptions::attentionConfig when set, else trellis_attn_choose over the
  /// configurations of this device's family that the op's `tiles` list.
  Result<const TrellisAttnConfig *>
  attentionConfigFor(const TrellisAttnParams &params, const Instr &instr) const;
  /// The launch of an attention call with these parameters: the kernel of
  /// attentionConfigFor. Where k is head-normalized (`kNormalized`:
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
  // -- FP8 self-attention (Fp8Attention.cpp) ----------------------------------
  /// One FP8 attention call: the fp16 views (q, k, v unnormalized, o;
  /// strides, cu_seqlens_q for segments, num_seqs, heads, seqlen_q,
  /// softmax_scale, o_quantize), the head-norm gains, the token counts and
  /// the scratch of fp8AttentionScratchBytes.
  struct Fp8AttentionCall {
    TrellisAttnParams views{};
    const float *qGamma = nullptr, *kGamma = nullptr;
    int64_t headDim = 0, tokens = 0, paddedTokens = 0;
    CUdeviceptr scratch = 0;
  };
  /// Its scratch: the E4M3 k8 [heads, tokens, 64], vt8 [heads, 64,
  /// paddedTokens], the per-head amax of v and the redo flags (`seqs`
  /// sequences of at most `longest` rows).
  static size_t fp8AttentionScratchBytes(int64_t tokens, int64_t paddedTokens,
                                         int64_t heads, int64_t seqs,
                                         int64_t longest);
  /// The sum of the sequences' lengths, each rounded up to 128 keys.
  static int64_t fp8PaddedTokens(const std::vector<int64_t> &lengths);
  /// The launches: v amax (not with the op's static v_amax, uploaded once
  /// into Prepared::fp8StaticScales), operands, the FP8 attention, the fp16
  /// online kernel for the CTAs it flags. Calibration: the running per-head
  /// v amax (Prepared::fp8Running).
  Result<std::function<Status()>>
  fp8AttentionCommand(Prepared &p, const Fp8AttentionCall &call,
                      const Instr &instr);
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
                     std::vector<int> &resultSlots, Body &into) const;
  Status instantiateBody(Prepared &p, const std::vector<Instr> &instrs,
                         std::vector<int> &map, Body &into) const;
  int newSlot(Prepared &p, const ValueType &type) const {
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
  /// A slot's static type, and a bound (host-evaluated) slot's value.
  static const ValueType &slotType(const Prepared &p, int s) {
    return p.slots[s].type;
  }
  const RtValue &boundValue(const Prepared &p, int s) const {
    return p.boundValues[root(p, s)];
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
  bool viewSplit(Prepared &p, Node &node, const SlotUsers &users) const;
  void number(Prepared &p, Body &body, int &pos) const;
  void liveness(Prepared &p, Body &body,
                std::vector<const Node *> &loops) const;
  void use(Prepared &p, int slot, int pos,
           const std::vector<const Node *> &loops) const;
  Status plan(Prepared &p) const;
  // The steps of plan() (MemoryPlan.cpp).
  Status classify(Prepared &p, Body &body, const SlotUsers &users) const;
  Status classifyNode(Prepared &p, Node &node, const SlotUsers &users) const;
  void classifyHostOp(Prepared &p, Node &node) const;
  Status classifyDeviceOp(Prepared &p, Node &node) const;
  Status classifySampler(Prepared &p, Node &node) const;
  void addAttentionScratch(Prepared &p, Node &node) const;
  void markLane(Prepared &p, Body &body, const Node &loop) const;
  void assignLanes(Prepared &p, Body &body) const;
  void placeArena(Prepared &p) const;
  void placePools(Prepared &p) const;
  Status stageWeights(Prepared &p);
  Status buildCommands(Prepared &p, Body &body);
  Status buildCommand(Prepared &p, Node &node);
  // The commands buildCommand dispatches to (DenseCommands.cpp, attention in
  // AttentionCommands.cpp).
  Status buildTimeGridCommand(Prepared &p, Node &node);
  Status buildTimeRowCommand(Prepared &p, Node &node);
  Status buildLinearCommand(Prepared &p, Node &node);
  Status buildConvCommand(Prepared &p, Node &node);
  Status buildAttentionCommand(Prepared &p, Node &node);
  Status buildKernelCommand(Prepared &p, Node &node);
  Status buildGemm(Prepared &p, Node &node, CUdeviceptr a, CUdeviceptr b,
                   CUdeviceptr d, CUdeviceptr bias, DType dtype, int64_t m,
                   int64_t n, int64_t k, bool transA, const std::string &act,
                   std::function<Status()> &out, const GemmLayout &layout = {});
  struct GemmProblem; // GemmCommands.cpp
  Status pickGemmAlgo(const GemmProblem &g, int &picked);

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
  // The steps of runSampler() (Sampler.cpp).
  struct SamplerRun;
  Status runSamplerStep(SamplerRun &r, int64_t i);
  Status setSamplerTau(SamplerRun &r, Body &body, float tau, int slotIndex,
                       int64_t step);
  /// `into` 0: the velocity stays in the body's yield slot. `condRow` >= 0:
  /// that image of a multi-image cond (else all of it).
  Status evaluateSamplerBranch(SamplerRun &r, Body &body, float tau,
                               int slotIndex, int cond, CUdeviceptr into,
                               int64_t step, int64_t condRow = -1);
  Status conditionalVelocity(SamplerRun &r, float tau, int64_t step);
  Status reportSamplerStep(SamplerRun &r, int64_t step);
  Status checkNode(Prepared &p, const Node &node);
  std::string storageNeighbours(const Prepared &p, int slot) const;
  std::string describeAlgo(const cublasLtMatmulAlgo_t &algo);
  int64_t algoConfig(const cublasLtMatmulAlgo_t &algo,
                     cublasLtMatmulAlgoConfigAttributes_t attr);
  Result<HostTensor> download(const Prepared &p, int slot);
  /// Copies `t` into `slot` on stream `on`; waits for the copy unless
  /// `wait` is false (then `t` must live until the stream is synchronized).
  Status upload(const Prepared &p, int slot, const HostTensor &t, CUstream on,
                bool wait = true);
  /// Frees what `p` holds on the device. `forgetResults`: also drop the
  /// device copies of the last run's results (lastResults), which may live in
  /// `p`'s arena; only the main thread may.
  void release(Prepared &p, bool forgetResults = true);
  Result<std::unique_ptr<Prepared>>
  planFunction(const Function &fn, const std::vector<RtValue> *args) const;
  void prepareInBackground(const std::string &name, std::vector<RtValue> args);
  /// Plans being made on other threads (prepareInBackground), by function,
  /// made resident there too where residentInBackground(); prepare() takes
  /// one when its arguments match.
  std::map<std::string, std::future<Result<std::unique_ptr<Prepared>>>>
      pendingPlans;
  /// The plan of prepareInBackground's thread: planFunction, then (after
  /// the gate, under buildMutex) makeResident with the allocations of `old`,
  /// the function's current binding, if any.
  Result<std::unique_ptr<Prepared>>
  planAndMakeResident(const Function &fn, const std::vector<RtValue> &args,
                      Prepared *old, std::shared_future<void> gate);
  /// The pending plan of `name` (waited for), or null; its gate is opened.
  std::unique_ptr<Prepared> takePending(const std::string &name);
  /// `p` takes over what `old` allocated and still fits (see the .cpp); the
  /// rest of `old` is released.
  void inheritAllocations(Prepared &old, Prepared &p,
                          bool forgetResults = true);
  // Making a prepared function resident before its first run (GpuExecutor.cpp).
  Status makeResident(Prepared &p, const std::string &name);
  void resolveAddresses(Prepared &p);
  Status uploadConstants(Prepared &p, Body &body);

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