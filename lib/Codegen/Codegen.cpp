//===- Codegen.cpp - Classify, build and annotate the generated kernels ---===//
//
// Walks every function marked trellis.device = "cuda" (flow_sample bodies
// included), classifies each op (docs/design/gpu-backend.md), builds one
// gpu.func per distinct generated kernel (op name, types and inherent
// attributes) and annotates the ops with the kernel and its launch.
//
//===----------------------------------------------------------------------===//
#include "trellis/Codegen/Codegen.h"

#include "lib/Codegen/CodegenInternal.h"
#include "lib/Codegen/Kernels.h"

#include "dialect/TrellisDialect.h"
#include "dialect/TrellisOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <future>

using namespace mlir;

namespace trellis::codegen {
namespace {

using detail::classify;
using detail::Launch;
using detail::OpClass;

constexpr StringLiteral kDeviceAttr = "trellis.device";
constexpr StringLiteral kLaunchAttr = "trellis.launch";
constexpr StringLiteral kLaunchE4M3Attr = "trellis.launch_e4m3";
constexpr StringLiteral kUpdateAttr = "trellis.update";
constexpr StringLiteral kVelocitySumAttr = "trellis.velocity_sum";
constexpr StringLiteral kScratchAttr = "trellis.scratch_bytes";
constexpr StringLiteral kDirectConvAttr = "trellis.conv_direct";
constexpr StringLiteral kTapSumAttr = "trellis.tap_sum";
constexpr StringLiteral kWindowRowsAttr = "trellis.window_rows";
constexpr StringLiteral kTapsScratchAttr = "trellis.taps_scratch_bytes";

bool isCudaFunction(func::FuncOp f) {
  auto dev = f->getAttrOfType<StringAttr>(kDeviceAttr);
  return dev && dev.getValue() == "cuda";
}

std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// Dedup key: op name, operand and result types, inherent attributes
/// (discardable trellis.* annotations excluded).
std::string kernelKey(Operation *op, StringRef prefix) {
  std::string key;
  llvm::raw_string_ostream os(key);
  os << prefix << op->getName() << "(";
  llvm::interleaveComma(op->getOperandTypes(), os);
  os << ")->(";
  llvm::interleaveComma(op->getResultTypes(), os);
  os << "){";
  for (NamedAttribute a : op->getAttrs()) {
    if (a.getName().getValue().starts_with("trellis."))
      continue;
    os << a.getName().getValue() << "=" << a.getValue() << ";";
  }
  os << "}";
  return key;
}

/// im2col key: input type, kernel size, padding (not the output channels).
std::string convKey(Operation *conv, StringRef prefix) {
  std::string key = (prefix + typeString(conv->getOperand(0).getType())).str();
  if (auto w = dyn_cast<RankedTensorType>(conv->getOperand(1).getType());
      w && w.getRank() == 5)
    key += ",k=" + std::to_string(w.getDimSize(2));
  auto pad = conv->getAttrOfType<IntegerAttr>("padding");
  key += ",p=" + std::to_string(pad ? pad.getInt() : 1);
  return key;
}

StringRef shortType(Type t) {
  if (t.isF16())
    return "f16";
  if (t.isF32())
    return "f32";
  if (t.isInteger(32))
    return "i32";
  if (t.isInteger(64))
    return "i64";
  return "t";
}

/// `<op>_<dtype>_<d0>x<d1>..._k<n>`, e.g. layer_norm_f16_1x4096x1024_k3.
std::string kernelName(StringRef base, Type elem, Type shaped, int index) {
  std::string name = base.str();
  for (char &c : name)
    if (!isalnum(static_cast<unsigned char>(c)))
      c = '_';
  name += "_";
  name += shortType(elem);
  if (auto rt = dyn_cast<RankedTensorType>(shaped)) {
    name += "_";
    llvm::raw_string_ostream os(name);
    llvm::interleave(
        rt.getShape(), os,
        [&](int64_t d) {
          if (ShapedType::isDynamic(d))
            os << "d";
          else
            os << d;
        },
        "x");
  }
  name += "_k";
  name += std::to_string(index);
  return name;
}

DictionaryAttr launchAttr(MLIRContext *ctx, StringRef name, const Launch &l) {
  Builder b(ctx);
  SmallVector<NamedAttribute> attrs = {
      b.getNamedAttr("kernel", b.getStringAttr(name)),
      b.getNamedAttr("grid", b.getDenseI64ArrayAttr(l.grid)),
      b.getNamedAttr("block", b.getDenseI64ArrayAttr(l.block)),
      b.getNamedAttr("smem", b.getI64IntegerAttr(l.smem)),
  };
  if (l.threadsPerRow > 0)
    attrs.push_back(b.getNamedAttr("threads_per_row",
                                   b.getI64IntegerAttr(l.threadsPerRow)));
  return b.getDictionaryAttr(attrs);
}

/// Whether `fn` is a sparse stage's function: it takes dynamic tensors or
/// coordinate values (the dense stage's ss_stage only returns them).
bool takesSparseArguments(func::FuncOp fn) {
  return llvm::any_of(fn.getArgumentTypes(), [](Type t) {
    auto rt = dyn_cast<RankedTensorType>(t);
    return !rt || !rt.hasStaticShape();
  });
}

/// The generated-class ops of `fn` that the runtime evaluates on the host
/// when it binds a sparse function (docs/design/gpu-backend.md, "Binding at
/// call time"), e.g. decode_gs's cast / add / div of sparse.xyz. A forward
/// dataflow in program order (SSA dominance: operands are visited before
/// their users, values from above included): a value is host-derived when it
/// is a coordinate-typed block argument (!trellis.coords, ...), a result of
/// a host-class op, or a result of a generated op or reshape whose operands
/// are all host-derived or trellis.constant results, at least one
/// host-derived (so that constant-only arithmetic of the dense stage stays
/// on the GPU). Such generated ops get no kernel.
llvm::DenseSet<Operation *> hostEvaluatedOps(func::FuncOp fn) {
  llvm::DenseSet<Value> host, constant;
  llvm::DenseSet<Operation *> ops;
  for (BlockArgument a : fn.getArguments())
    if (!isa<ShapedType>(a.getType()))
      host.insert(a);
  fn.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (op == fn.getOperation() || op->getNumResults() == 0)
      return;
    OpClass cls = classify(op);
    bool derived = cls == OpClass::Host;
    if (isa<mlir::trellis::ConstantOp>(op)) {
      constant.insert(op->result_begin(), op->result_end());
      return;
    }
    bool isReshape = isa<mlir::trellis::ReshapeOp>(op);
    if (!derived && (cls == OpClass::Generated || isReshape) &&
        op->getNumOperands() > 0) {
      bool anyHost = false, allKnown = true;
      for (Value v : op->getOperands()) {
        anyHost |= host.contains(v);
        allKnown &= host.contains(v) || constant.contains(v);
      }
      derived = anyHost && allKnown;
      if (derived && cls == OpClass::Generated)
        ops.insert(op);
    }
    if (derived)
      host.insert(op->result_begin(), op->result_end());
  });
  return ops;
}

} // namespace

void detail::loadKernelDialects(MLIRContext *ctx) {
  ctx->loadDialect<arith::ArithDialect, gpu::GPUDialect, math::MathDialect,
                   memref::MemRefDialect, scf::SCFDialect,
                   vector::VectorDialect, func::FuncDialect,
                   NVVM::NVVMDialect>(); // the E4M3 stores
}

namespace {

using namespace detail;

/// A generated kernel: its name, launch and (im2col) scratch bytes.
struct Entry {
  std::string name;
  Launch launch;
  int64_t scratch = 0;
};

/// Builds the kernels' gpu.module for the CUDA functions of a module and
/// annotates their ops: one kernel per distinct generated op (by kernelKey),
/// numbered in the order they are met.
class KernelModuleBuilder {
public:
  KernelModuleBuilder(MLIRContext *ctx, gpu::GPUModuleOp gpuModule)
      : ctx(ctx), gpuModule(gpuModule) {}

  /// Classifies and annotates every op of `fn`.
  void visitFunction(func::FuncOp fn);
  bool failedAny = false;
  int count = 0;           ///< kernels emitted
  bool storesE4M3 = false; ///< an E4M3 variant was emitted

private:
  void visitOp(func::FuncOp fn, Operation *op, OpClass cls);
  void annotateSparseConv(Operation *op);
  void annotateWindowRows(Operation *op);
  /// A multidiffusion sampler's velocity-sum kernel (trellis.velocity_sum).
  void annotateVelocitySum(Operation *op);
  /// The generated kernel of a Generated, Conv or Sampler op.
  void annotateKernel(func::FuncOp fn, Operation *op, OpClass cls);
  /// A fused layer norm that feeds an FP8 GEMM (detail::e4m3ResultOf): also
  /// the variant of its kernel that writes that result in E4M3, as
  /// trellis.launch_e4m3 (the launch, and "result": which one). The runtime
  /// launches it instead of trellis.launch where the GEMM's input slot is
  /// its own (Prepared::fp8E4M3Outputs), and the GEMM skips its
  /// quantization.
  void annotateE4M3Variant(func::FuncOp fn, Operation *op);
  /// Emits the kernel of `op` as `e` describes (its name set here).
  FailureOr<Launch> emitKernel(Operation *op, OpClass cls, Entry &e);
  /// The kernel under `key`: emitted by `emit` (which names it) the first
  /// time, errors noted with `fn`'s name; null when emitting failed.
  const Entry *kernelFor(func::FuncOp fn, const std::string &key,
                         function_ref<FailureOr<Launch>(Entry &)> emit);

  MLIRContext *ctx;
  gpu::GPUModuleOp gpuModule;
  llvm::StringMap<Entry> seen;
  /// A 3×3×3 sparse conv: its gather and tap-sum kernels, one pair per
  /// distinct operand / result types, and the scratch limits they were built
  /// for (the runtime sizes the gather's chunks and picks the order by them).
  struct SparseConvEntry {
    std::string gather, tapSum;
    detail::SparseConvKernels kernels;
  };
  llvm::StringMap<SparseConvEntry> sparseConvs;
  llvm::StringMap<std::pair<std::string, detail::Launch>> windowRows;
};

void KernelModuleBuilder::visitFunction(func::FuncOp fn) {
  llvm::DenseSet<Operation *> onHost = hostEvaluatedOps(fn);
  fn.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (op != fn.getOperation())
      visitOp(fn, op, onHost.contains(op) ? OpClass::Host : classify(op));
  });
}

void KernelModuleBuilder::visitOp(func::FuncOp fn, Operation *op, OpClass cls) {
  switch (cls) {
  case OpClass::Library:
    annotateWindowRows(op);
    return;
  case OpClass::View:
    return;
  case OpClass::Host:
    // The host program's op class (HostBound, Runtime) tells the runtime
    // how to run these (lib/Target/HostProgram.cpp).
    return;
  case OpClass::Unsupported:
    op->emitError() << "'" << op->getName()
                    << "' has no GPU implementation (in CUDA function @"
                    << fn.getSymName() << ")";
    failedAny = true;
    return;
  case OpClass::SparseConv:
    annotateSparseConv(op);
    return;
  case OpClass::Generated:
  case OpClass::Conv:
  case OpClass::Sampler:
    annotateKernel(fn, op, cls);
    return;
  }
}

void KernelModuleBuilder::annotateSparseConv(Operation *op) {
  std::string key = kernelKey(op, "sparse_conv:");
  auto it = sparseConvs.find(key);
  if (it == sparseConvs.end()) {
    Type xTy = op->getOperand(0).getType(), outTy = op->getResult(0).getType();
    SparseConvEntry e;
    e.gather =
        kernelName("sparse_conv_gather", getElementTypeOrSelf(xTy), xTy, count);
    e.tapSum = kernelName("sparse_conv_tap_sum", getElementTypeOrSelf(xTy),
                          outTy, count + 1);
    FailureOr<detail::SparseConvKernels> k =
        detail::emitSparseConvKernels(op, gpuModule, e.gather, e.tapSum);
    if (failed(k)) {
      failedAny = true;
      return;
    }
    count += 2;
    e.kernels = *k;
    it = sparseConvs.insert({key, e}).first;
  }
  const SparseConvEntry &e = it->second;
  Builder ab(ctx);
  op->setAttr(kLaunchAttr, launchAttr(ctx, e.gather, e.kernels.gather));
  op->setAttr(kScratchAttr, ab.getI64IntegerAttr(e.kernels.gatherBytes));
  op->setAttr(kTapSumAttr, launchAttr(ctx, e.tapSum, e.kernels.tapSum));
  op->setAttr(kTapsScratchAttr, ab.getI64IntegerAttr(e.kernels.tapsBytes));
}

/// The Swin window attention (a library kernel): its row gathers into window
/// order and the scatter back are generated kernels, one per row type,
/// annotated as trellis.window_rows = [q, k, v gathers, the output's
/// scatter].
void KernelModuleBuilder::annotateWindowRows(Operation *op) {
  if (!isa<mlir::trellis::SparseAttentionOp>(op))
    return;
  Operation *segments = op->getOperand(3).getDefiningOp();
  if (!segments || !isa<mlir::trellis::SparseWindowSegmentsOp>(segments))
    return;
  SmallVector<Attribute> launches;
  for (unsigned i = 0; i < 4; ++i) {
    const bool scatter = i == 3;
    Type t = scatter ? op->getResult(0).getType() : op->getOperand(i).getType();
    std::string key =
        (scatter ? "window_scatter:" : "window_gather:") + typeString(t);
    auto it = windowRows.find(key);
    if (it == windowRows.end()) {
      std::string name =
          kernelName(scatter ? "window_scatter" : "window_gather",
                     getElementTypeOrSelf(t), t, count);
      FailureOr<detail::Launch> l =
          detail::emitWindowRowsKernel(op, t, scatter, gpuModule, name);
      if (failed(l)) {
        failedAny = true;
        return;
      }
      ++count;
      it = windowRows.insert({key, {name, *l}}).first;
    }
    launches.push_back(launchAttr(ctx, it->second.first, it->second.second));
  }
  op->setAttr(kWindowRowsAttr, ArrayAttr::get(ctx, launches));
}

void KernelModuleBuilder::annotateVelocitySum(Operation *op) {
  auto flow = dyn_cast<mlir::trellis::FlowSampleOp>(op);
  if (!flow ||
      flow.getMultiImage() != mlir::trellis::MultiImageMode::multidiffusion)
    return;
  Type t = flow.getNoise().getType();
  std::string key = "velocity_sum:" + typeString(t);
  auto it = seen.find(key);
  if (it == seen.end()) {
    Entry e;
    e.name = kernelName("velocity_sum", getElementTypeOrSelf(t), t, count);
    FailureOr<Launch> l = detail::emitVelocitySumKernel(op, gpuModule, e.name);
    if (failed(l)) {
      failedAny = true;
      return;
    }
    ++count;
    e.launch = *l;
    it = seen.insert({key, e}).first;
  }
  op->setAttr(kVelocitySumAttr,
              launchAttr(ctx, it->second.name, it->second.launch));
}

FailureOr<Launch> KernelModuleBuilder::emitKernel(Operation *op, OpClass cls,
                                                  Entry &e) {
  Value x = op->getNumOperands() ? op->getOperand(0) : Value();
  if (cls == OpClass::Conv && isDirectConv(op)) {
    e.name = kernelName("conv3d_direct", getElementTypeOrSelf(x), x.getType(),
                        count);
    return emitDirectConvKernel(op, gpuModule, e.name);
  }
  if (cls == OpClass::Conv) {
    e.name = kernelName("im2col", getElementTypeOrSelf(x), x.getType(), count);
    return emitIm2colKernel(op, gpuModule, e.name, e.scratch);
  }
  if (cls == OpClass::Sampler) {
    e.name =
        kernelName("flow_update", getElementTypeOrSelf(x), x.getType(), count);
    return emitFlowUpdateKernel(op, gpuModule, e.name);
  }
  StringRef base = op->getName().getStringRef();
  base.consume_front("trellis.");
  std::string b2 = base.str();
  Value shaped = op->getNumResults() ? op->getResult(0) : Value();
  Type elem = shaped ? getElementTypeOrSelf(shaped) : Type();
  if (isa<mlir::trellis::CastOp>(op)) {
    b2 += "_";
    b2 += shortType(getElementTypeOrSelf(x));
    b2 += "_to";
  }
  if (isa<mlir::trellis::SplitOp>(op))
    shaped = x;
  e.name = kernelName(b2, elem, shaped.getType(), count);
  return emitOpKernel(op, gpuModule, e.name);
}

void KernelModuleBuilder::annotateKernel(func::FuncOp fn, Operation *op,
                                         OpClass cls) {
  // The sampler's update depends on the sample type only, the im2col on
  // the input type, the kernel size and the padding.
  StringRef prefix = cls == OpClass::Conv      ? "im2col:"
                     : cls == OpClass::Sampler ? "update:"
                                               : "";
  std::string key;
  if (cls == OpClass::Sampler)
    key = (prefix + typeString(op->getOperand(0).getType())).str();
  else if (cls == OpClass::Conv && isDirectConv(op))
    key = kernelKey(op, "conv3d_direct:");
  else if (cls == OpClass::Conv)
    key = convKey(op, prefix);
  else
    key = kernelKey(op, prefix);
  const Entry *entry =
      kernelFor(fn, key, [&](Entry &e) { return emitKernel(op, cls, e); });
  if (!entry)
    return;
  const Entry &e = *entry;
  DictionaryAttr attr = launchAttr(ctx, e.name, e.launch);
  if (cls == OpClass::Sampler) {
    op->setAttr(kUpdateAttr, attr);
    annotateVelocitySum(op);
    return;
  }
  op->setAttr(kLaunchAttr, attr);
  if (cls == OpClass::Generated)
    annotateE4M3Variant(fn, op);
  if (cls == OpClass::Conv && isDirectConv(op))
    op->setAttr(kDirectConvAttr, UnitAttr::get(ctx));
  else if (cls == OpClass::Conv)
    op->setAttr(kScratchAttr, Builder(ctx).getI64IntegerAttr(e.scratch));
}

const Entry *
KernelModuleBuilder::kernelFor(func::FuncOp fn, const std::string &key,
                               function_ref<FailureOr<Launch>(Entry &)> emit) {
  auto it = seen.find(key);
  if (it == seen.end()) {
    Entry e;
    // Errors of the emitters name the function in a note.
    ScopedDiagnosticHandler inFunction(ctx, [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error)
        d.attachNote() << "in CUDA function @" << fn.getSymName();
      return failure(); // on to the enclosing handler
    });
    FailureOr<Launch> l = emit(e);
    if (failed(l)) {
      failedAny = true;
      return nullptr;
    }
    ++count;
    e.launch = *l;
    it = seen.insert({key, e}).first;
  }
  return &it->second;
}

void KernelModuleBuilder::annotateE4M3Variant(func::FuncOp fn, Operation *op) {
  std::optional<unsigned> result = detail::e4m3ResultOf(op);
  if (!result)
    return;
  const Entry *entry = kernelFor(fn, kernelKey(op, "e4m3:"), [&](Entry &e) {
    StringRef base = op->getName().getStringRef();
    base.consume_front("trellis.");
    Value x = op->getOperand(0);
    e.name = kernelName((base + "_e4m3").str(), getElementTypeOrSelf(x),
                        x.getType(), count);
    return detail::emitOpKernel(op, gpuModule, e.name, *result);
  });
  if (!entry)
    return;
  storesE4M3 = true;
  NamedAttrList attrs(launchAttr(ctx, entry->name, entry->launch));
  attrs.set("result", Builder(ctx).getI64IntegerAttr(*result));
  op->setAttr(kLaunchE4M3Attr, attrs.getDictionary(ctx));
}

} // namespace

FailureOr<detail::KernelModule> detail::buildKernels(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  loadKernelDialects(ctx);
  Location loc = module.getLoc();
  OwningOpRef<ModuleOp> kernels = ModuleOp::create(loc);
  (*kernels)->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                      UnitAttr::get(ctx));
  OpBuilder b(ctx);
  b.setInsertionPointToStart(kernels->getBody());
  KernelModuleBuilder builder(
      ctx, gpu::GPUModuleOp::create(b, loc, "trellis_kernels"));
  // The dense functions first, so that their kernels keep the names (_k<n>)
  // they have without the sparse stages.
  SmallVector<func::FuncOp> dense, sparse;
  for (auto fn : module.getOps<func::FuncOp>())
    if (isCudaFunction(fn))
      (takesSparseArguments(fn) ? sparse : dense).push_back(fn);
  for (func::FuncOp fn : llvm::concat<func::FuncOp>(dense, sparse))
    builder.visitFunction(fn);
  if (builder.failedAny)
    return failure();
  if (failed(verify(*kernels)))
    return emitError(loc) << "internal error: the generated kernels do not "
                             "verify";
  KernelModule result;
  result.module = std::move(kernels);
  result.numKernels = builder.count;
  result.storesE4M3 = builder.storesE4M3;
  return result;
}

FailureOr<OwningOpRef<ModuleOp>> buildKernelModule(ModuleOp module) {
  FailureOr<detail::KernelModule> k = detail::buildKernels(module);
  if (failed(k))
    return failure();
  return std::move(k->module);
}

FailureOr<GeneratedKernels> generateKernels(ModuleOp module,
                                            const CodegenOptions &options) {
  FailureOr<detail::KernelModule> k = detail::buildKernels(module);
  if (failed(k))
    return failure();
  GeneratedKernels out;
  out.numKernels = k->numKernels;
  // An FP8 program's kernels (E4M3 stores) run on sm_90 only, as the
  // program does (the engine refuses other GPUs): no portable code.
  const bool portable = options.portablePtx && !k->storesE4M3;
  if (failed(detail::lowerToPtx(*k->module, portable, options.cudaPath,
                                out.ptxSm90a, out.ptxCompute75)))
    return failure();
  if (options.cubin && !out.ptxSm90a.empty()) {
    PtxasResult cubin =
        assembleWithPtxas(out.ptxSm90a, "sm_90a", options.cudaPath);
    if (!cubin.error.empty())
      return emitError(module.getLoc())
             << "internal error: the generated kernels' PTX does not "
                "assemble: "
             << cubin.error;
    out.cubinSm90a = std::move(cubin.cubin); // empty without a ptxas
  }
  if (options.cubin && !out.ptxCompute75.empty()) {
    std::vector<std::future<PtxasResult>> jobs;
    for (const std::string &arch : options.sassArchs)
      jobs.push_back(std::async(std::launch::async, [&, arch] {
        return assembleWithPtxas(out.ptxCompute75, arch, options.cudaPath);
      }));
    for (size_t i = 0; i < jobs.size(); ++i) {
      PtxasResult cubin = jobs[i].get();
      if (!cubin.error.empty())
        return emitError(module.getLoc())
               << "internal error: the generated kernels' portable PTX does "
                  "not assemble for "
               << options.sassArchs[i] << ": " << cubin.error;
      if (!cubin.cubin.empty())
        out.cubinsPortable[options.sassArchs[i]] = std::move(cubin.cubin);
    }
  }
  return out;
}

} // namespace trellis::codegen
