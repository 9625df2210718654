//===- Tracer.h - The C++ tracing API ---------------------------*- C++ -*-===//
//
// Python-style functional ops on Tensor handles that build `trellis` dialect
// IR directly (the trace IR *is* the dialect; see docs/ARCHITECTURE.md,
// "Trace IR"). Every op records where it came from as an MLIR location:
//
//   fused["slat_flow_model/blocks.3.self_attn",          module path
//         "config"("…/slat_flow….json":1:57),            config that shaped it
//         "builder"("lib/Models/SLatFlow.cpp":120:7)]     builder line
//
// Python traces carry "user"(file:line:col) instead of "builder". Errors
// (a shape rule broken, a weight missing from the checkpoint) are collected
// as TraceError records, never printed or aborted on: the caller decides.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_TRACE_TRACER_H
#define TRELLIS_TRACE_TRACER_H

#include "trellis/Config/Located.h"
#include "trellis/Support/DType.h"
#include "trellis/Support/HostTensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Value.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

#include <functional>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

namespace trellis::trace {

/// A position in a config file (pipeline.json or a sidecar) and the JSON path
/// of the value there: the config parser's own record.
using ConfigPos = config::SourcePos;

/// One error found while tracing, with the parts of its origin.
struct TraceError {
  std::string message;    // the rule that was broken, in user terms
  std::string modulePath; // "slat_flow_model/blocks.3.self_attn" (may be "")
  std::optional<ConfigPos> config;
  std::string sourceFile; // builder (C++) or user (Python) file
  unsigned sourceLine = 0, sourceColumn = 0;

  /// "file:line:col: error: message\n  in module …\n  config …".
  std::string render() const;
};

/// Shape and element type of a checkpoint tensor, as its header states them.
struct WeightInfo {
  DType dtype;
  Shape shape;
};

/// Answers which tensors a model's checkpoint holds (names, shapes, dtypes);
/// the bytes never enter the IR.
using WeightLookup = std::function<std::optional<WeightInfo>(
    const std::string &model, const std::string &name)>;

/// Says which config values imply a weight's expected shape: the position
/// of the first and a rendering of all ("mlp_ratio = 4 (x.json:9:5)").
struct WeightOrigin {
  ConfigPos pos;
  std::string args;
};
using WeightOriginLookup = std::function<std::optional<WeightOrigin>(
    const std::string &model, const std::string &name)>;

class Tracer;

/// A traced tensor: an SSA value plus the tracer that owns it. Default-
/// constructed tensors are "absent" (e.g. an optional bias).
class Tensor {
public:
  Tensor() = default;
  Tensor(Tracer *tracer, mlir::Value value) : tracer_(tracer), value_(value) {}

  explicit operator bool() const { return bool(value_); }
  mlir::Value value() const { return value_; }
  Tracer &tracer() const { return *tracer_; }
  mlir::Type type() const { return value_.getType(); }
  /// Tensor shape (mlir::ShapedType::kDynamic for a bounded dynamic dim).
  llvm::ArrayRef<int64_t> shape() const;
  int64_t rank() const { return int64_t(shape().size()); }
  int64_t dim(int64_t i) const;
  mlir::Type elementType() const;

private:
  Tracer *tracer_ = nullptr;
  mlir::Value value_;
};

/// Builds one module of trellis IR.
class Tracer {
public:
  explicit Tracer(mlir::MLIRContext &context);

  mlir::MLIRContext &context() { return *context_; }
  mlir::ModuleOp module() { return *module_; }
  mlir::OwningOpRef<mlir::ModuleOp> takeModule() { return std::move(module_); }
  mlir::OpBuilder &builder() { return builder_; }

  //===--------------------------------------------------------------------===//
  // Origins
  //===--------------------------------------------------------------------===//

  /// RAII: enters a module (path component `name`, e.g. "blocks.3"), and
  /// optionally the config value that shaped it.
  class Scope {
  public:
    Scope(Tracer &tracer, std::string name,
          std::optional<ConfigPos> config = std::nullopt);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    Tracer &tracer_;
  };

  /// Sets the model key ("slat_flow_model") weights belong to; the module
  /// path starts with it.
  void setModel(std::string modelKey, std::optional<ConfigPos> config);
  /// Current module path, "model/blocks.3.self_attn".
  std::string modulePath() const;
  /// Prefix for weight names in the current module ("blocks.3.self_attn.").
  std::string weightPrefix() const;
  /// The location of an op traced now from source line `where`.
  mlir::Location locationFor(std::source_location where);
  /// Same, for a Python frontend (user file/line/col instead of builder).
  mlir::Location locationFor(const std::string &file, unsigned line,
                             unsigned column, llvm::StringRef kind);

  /// A user's source position (the Python frontend's trace replay).
  struct UserOrigin {
    std::string file;
    unsigned line = 0, column = 0;
  };
  /// While set, ops traced through the functional API get this "user"
  /// location, and errors name it, instead of the C++ caller's line.
  void setUserOrigin(std::optional<UserOrigin> origin) {
    userOrigin_ = std::move(origin);
  }

  //===--------------------------------------------------------------------===//
  // Functions, weights, errors
  //===--------------------------------------------------------------------===//

  /// Starts func.func @name with the given argument types; returns its
  /// arguments. Ops are traced into it until endFunction(results).
  std::vector<Tensor>
  beginFunction(const std::string &name, llvm::ArrayRef<mlir::Type> argTypes,
                std::source_location where = std::source_location::current());
  void
  endFunction(llvm::ArrayRef<Tensor> results,
              std::source_location where = std::source_location::current());

  void setWeightLookup(WeightLookup lookup) { lookup_ = std::move(lookup); }
  /// Debug mode: every f16 weight is widened to f32 where it is read and
  /// casts to f16 are dropped, so the whole model computes in f32.
  void setAllFp32(bool on) { allFp32_ = on; }
  bool allFp32() const { return allFp32_; }

  /// RAII: while alive, the f32 linears traced may round their operands to
  /// TF32 on tensor cores (`precision = "tf32"`; f32 accumulation), what
  /// torch.backends.cuda.matmul.allow_tf32 does for a model. Ignored in the
  /// all-f32 debug mode.
  class AllowTf32 {
  public:
    explicit AllowTf32(Tracer &tracer) : tracer_(tracer), was_(tracer.tf32_) {
      tracer_.tf32_ = true;
    }
    ~AllowTf32() { tracer_.tf32_ = was_; }
    AllowTf32(const AllowTf32 &) = delete;
    AllowTf32 &operator=(const AllowTf32 &) = delete;

  private:
    Tracer &tracer_;
    bool was_;
  };
  bool tf32Allowed() const { return tf32_ && !allFp32_; }

  /// `--precision=fp8`: the linears traced while a QuantizeFp8 scope is alive
  /// (the flow transformers' block linears) get precision =
  /// "fp8_e4m3" (W8A8 E4M3, per-tensor scales). Off: scopes do nothing.
  void setFp8Linears(bool on) { fp8Linears_ = on; }
  class QuantizeFp8 {
  public:
    explicit QuantizeFp8(Tracer &tracer)
        : tracer_(tracer), was_(tracer.fp8Scope_) {
      tracer_.fp8Scope_ = true;
    }
    ~QuantizeFp8() { tracer_.fp8Scope_ = was_; }
    QuantizeFp8(const QuantizeFp8 &) = delete;
    QuantizeFp8 &operator=(const QuantizeFp8 &) = delete;

  private:
    Tracer &tracer_;
    bool was_;
  };
  bool fp8Active() const { return fp8Linears_ && fp8Scope_ && !allFp32_; }
  /// Optional: lets weight errors point at the config values that imply the
  /// expected shape instead of the enclosing module's.
  void setWeightOriginLookup(WeightOriginLookup lookup) {
    originLookup_ = std::move(lookup);
  }
  /// The checkpoint tensor `<weightPrefix()><name>` of the current model,
  /// which must have `shape` and `dtype` (as the config implies). A missing
  /// or mismatched tensor is a TraceError; a placeholder of the expected type
  /// keeps the trace going so that every problem is reported at once.
  Tensor weight(const std::string &name, const Shape &shape, DType dtype,
                std::source_location where = std::source_location::current());

  /// True (and nothing is traced) if a required input is absent: an earlier
  /// op failed and its error is already recorded.
  static bool anyAbsent(std::initializer_list<Tensor> inputs);

  /// Records an error at the current origin.
  void error(const std::string &message,
             std::source_location where = std::source_location::current());
  bool hasErrors() const { return !errors_.empty(); }
  const std::vector<TraceError> &errors() const { return errors_; }

  /// Creates op `OpTy` with `args` (as OpTy::build takes them after the
  /// result types). Result types are inferred when the op can, else given in
  /// `resultTypes`. On a broken rule: records the error and returns
  /// placeholder values of the expected types (or null values when unknown).
  template <typename OpTy, typename... Args>
  llvm::SmallVector<Tensor> create(std::source_location where,
                                   mlir::TypeRange resultTypes, Args &&...args);

  /// Like create(), for an op with one single-block region: `fillBody` is
  /// called with the region's entry block (already holding `blockArgs`) and
  /// the insertion point inside it; verification runs after it.
  template <typename OpTy, typename... Args>
  llvm::SmallVector<Tensor> createWithRegion(
      std::source_location where, llvm::ArrayRef<mlir::Type> blockArgs,
      const std::function<void(mlir::Block &)> &fillBody, Args &&...args);

  /// mlir::Type for a DType (f16, f32, i32, i64).
  mlir::Type elementType(DType dtype);
  /// Ranked tensor type; dynamic dims take `dynamicBounds` in order.
  mlir::RankedTensorType tensorType(const Shape &shape, DType dtype,
                                    llvm::ArrayRef<int64_t> dynamicBounds = {});

private:
  friend class Scope;
  /// Runs inference (if the op has it) and verification with diagnostics
  /// captured into errors_; returns the op or null.
  mlir::Operation *
  finish(mlir::OperationState &state, bool infer, std::source_location where,
         llvm::ArrayRef<mlir::Type> blockArgs = {},
         const std::function<void(mlir::Block &)> *fillBody = nullptr);
  llvm::SmallVector<Tensor> wrapResults(mlir::Operation *op,
                                        mlir::TypeRange expected,
                                        std::source_location where);
  Tensor placeholder(mlir::Type type, std::source_location where);

  mlir::MLIRContext *context_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  mlir::OpBuilder builder_;
  std::string model_;
  std::optional<ConfigPos> modelConfig_;
  struct Frame {
    std::string name;
    std::optional<ConfigPos> config;
  };
  std::vector<Frame> frames_;
  WeightLookup lookup_;
  WeightOriginLookup originLookup_;
  bool allFp32_ = false;
  bool fp8Linears_ = false, fp8Scope_ = false;
  bool tf32_ = false;
  std::vector<TraceError> errors_;
  mlir::func::FuncOp currentFunction_;
  std::optional<UserOrigin> userOrigin_;
};

//===----------------------------------------------------------------------===//
// Template implementation
//===----------------------------------------------------------------------===//

template <typename OpTy, typename... Args>
llvm::SmallVector<Tensor> Tracer::create(std::source_location where,
                                         mlir::TypeRange resultTypes,
                                         Args &&...args) {
  mlir::OperationState state(locationFor(where), OpTy::getOperationName());
  OpTy::build(builder_, state, resultTypes, std::forward<Args>(args)...);
  constexpr bool infers =
      OpTy::template hasTrait<mlir::InferTypeOpInterface::Trait>();
  mlir::Operation *op = finish(state, infers && resultTypes.empty(), where);
  return wrapResults(op, resultTypes, where);
}

template <typename OpTy, typename... Args>
llvm::SmallVector<Tensor> Tracer::createWithRegion(
    std::source_location where, llvm::ArrayRef<mlir::Type> blockArgs,
    const std::function<void(mlir::Block &)> &fillBody, Args &&...args) {
  mlir::OperationState state(locationFor(where), OpTy::getOperationName());
  OpTy::build(builder_, state, mlir::TypeRange{}, std::forward<Args>(args)...);
  mlir::Operation *op =
      finish(state, /*infer=*/true, where, blockArgs, &fillBody);
  return wrapResults(op, {}, where);
}

} // namespace trellis::trace

#endif // TRELLIS_TRACE_TRACER_H
