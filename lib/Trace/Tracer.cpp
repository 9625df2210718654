//===- Tracer.cpp - The C++ tracing API -----------------------------------===//
#include "trellis/Trace/Tracer.h"

#include "dialect/TrellisOps.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <filesystem>

using namespace mlir;

namespace trellis::trace {

//===----------------------------------------------------------------------===//
// TraceError
//===----------------------------------------------------------------------===//

std::string TraceError::render() const {
  std::string out;
  llvm::raw_string_ostream os(out);
  if (config && !config->file.empty())
    os << config->file << ":" << config->line << ":" << config->column << ": ";
  else if (!sourceFile.empty())
    os << sourceFile << ":" << sourceLine << ":" << sourceColumn << ": ";
  os << "error: " << message;
  if (!modulePath.empty())
    os << "\n  in module: " << modulePath;
  if (config && !config->path.empty())
    os << "\n  shaped by config value: " << config->path << " (" << config->file
       << ":" << config->line << ":" << config->column << ")";
  if (!sourceFile.empty())
    os << "\n  traced at: " << sourceFile << ":" << sourceLine;
  return out;
}

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

llvm::ArrayRef<int64_t> Tensor::shape() const {
  if (auto t = dyn_cast<RankedTensorType>(value_.getType()))
    return t.getShape();
  return {};
}

int64_t Tensor::dim(int64_t i) const {
  auto s = shape();
  return s[i < 0 ? i + int64_t(s.size()) : i];
}

Type Tensor::elementType() const {
  if (auto t = dyn_cast<RankedTensorType>(value_.getType()))
    return t.getElementType();
  return {};
}

//===----------------------------------------------------------------------===//
// Tracer
//===----------------------------------------------------------------------===//

Tracer::Tracer(MLIRContext &context)
    : context_(&context),
      module_(ModuleOp::create(FileLineColLoc::get(&context, "<trace>", 0, 0))),
      builder_(&context) {
  context.getOrLoadDialect<mlir::trellis::TrellisDialect>();
  context.getOrLoadDialect<func::FuncDialect>();
  builder_.setInsertionPointToEnd(module_->getBody());
}

Tracer::Scope::Scope(Tracer &tracer, std::string name,
                     std::optional<ConfigPos> config)
    : tracer_(tracer) {
  tracer_.frames_.push_back({std::move(name), std::move(config)});
}

Tracer::Scope::~Scope() { tracer_.frames_.pop_back(); }

void Tracer::setModel(std::string modelKey, std::optional<ConfigPos> config) {
  model_ = std::move(modelKey);
  modelConfig_ = std::move(config);
}

std::string Tracer::weightPrefix() const {
  std::string prefix;
  // A frame with an empty name only attaches a config position.
  for (const Frame &f : frames_)
    if (!f.name.empty())
      prefix.append(f.name).append(".");
  return prefix;
}

std::string Tracer::modulePath() const {
  std::string path = model_;
  std::string inner = weightPrefix();
  if (!inner.empty())
    inner.pop_back();
  if (!inner.empty()) {
    if (!path.empty())
      path += '/';
    path.append(inner);
  }
  return path;
}

/// Source paths relative to the repository (what a reader recognises).
static std::string shortSourcePath(const char *file) {
  std::string path = file;
  for (const char *root : {"/lib/", "/tools/", "/test/", "/python/"}) {
    size_t pos = path.rfind(root);
    if (pos != std::string::npos)
      return path.substr(pos + 1);
  }
  return std::filesystem::path(path).filename().string();
}

/// The innermost config position in scope.
static std::optional<ConfigPos>
innermostConfig(const std::optional<ConfigPos> &modelConfig,
                llvm::ArrayRef<std::optional<ConfigPos>> frames) {
  for (auto it = frames.rbegin(); it != frames.rend(); ++it)
    if (*it)
      return *it;
  return modelConfig;
}

Location Tracer::locationFor(const std::string &file, unsigned line,
                             unsigned column, StringRef kind) {
  SmallVector<Location> parts;
  std::string path = modulePath();
  if (!path.empty())
    parts.push_back(NameLoc::get(StringAttr::get(context_, path)));
  SmallVector<std::optional<ConfigPos>> frameConfigs;
  for (const Frame &f : frames_)
    frameConfigs.push_back(f.config);
  if (auto cfg = innermostConfig(modelConfig_, frameConfigs))
    parts.push_back(NameLoc::get(
        StringAttr::get(context_, "config"),
        FileLineColLoc::get(context_, cfg->file, cfg->line, cfg->column)));
  parts.push_back(
      NameLoc::get(StringAttr::get(context_, kind),
                   FileLineColLoc::get(context_, file, line, column)));
  return FusedLoc::get(context_, parts);
}

Location Tracer::locationFor(std::source_location where) {
  if (userOrigin_)
    return locationFor(userOrigin_->file, userOrigin_->line,
                       userOrigin_->column, "user");
  return locationFor(shortSourcePath(where.file_name()), where.line(),
                     where.column(), "builder");
}

Type Tracer::elementType(DType dtype) {
  switch (dtype) {
  case DType::F16:
    return builder_.getF16Type();
  case DType::F32:
    return builder_.getF32Type();
  case DType::I32:
    return builder_.getI32Type();
  case DType::I64:
    return builder_.getI64Type();
  default:
    return builder_.getF32Type();
  }
}

RankedTensorType Tracer::tensorType(const Shape &shape, DType dtype,
                                    llvm::ArrayRef<int64_t> dynamicBounds) {
  return mlir::trellis::getBoundedTensorType(shape, elementType(dtype),
                                             dynamicBounds);
}

std::vector<Tensor> Tracer::beginFunction(const std::string &name,
                                          llvm::ArrayRef<Type> argTypes,
                                          std::source_location where) {
  builder_.setInsertionPointToEnd(module_->getBody());
  auto fnType = builder_.getFunctionType(argTypes, {});
  currentFunction_ =
      func::FuncOp::create(builder_, locationFor(where), name, fnType);
  Block *entry = currentFunction_.addEntryBlock();
  builder_.setInsertionPointToStart(entry);
  std::vector<Tensor> args;
  for (BlockArgument arg : entry->getArguments())
    args.emplace_back(this, arg);
  return args;
}

void Tracer::endFunction(llvm::ArrayRef<Tensor> results,
                         std::source_location where) {
  SmallVector<Value> values;
  SmallVector<Type> types;
  for (const Tensor &t : results) {
    if (!t) // an earlier error; the function is not returned
      return;
    values.push_back(t.value());
    types.push_back(t.type());
  }
  func::ReturnOp::create(builder_, locationFor(where), values);
  currentFunction_.setFunctionType(builder_.getFunctionType(
      currentFunction_.getFunctionType().getInputs(), types));
  builder_.setInsertionPointToEnd(module_->getBody());
}

bool Tracer::anyAbsent(std::initializer_list<Tensor> inputs) {
  for (const Tensor &t : inputs)
    if (!t)
      return true;
  return false;
}

void Tracer::error(const std::string &message, std::source_location where) {
  TraceError e;
  e.message = message;
  e.modulePath = modulePath();
  SmallVector<std::optional<ConfigPos>> frameConfigs;
  for (const Frame &f : frames_)
    frameConfigs.push_back(f.config);
  e.config = innermostConfig(modelConfig_, frameConfigs);
  if (userOrigin_) {
    e.sourceFile = userOrigin_->file;
    e.sourceLine = userOrigin_->line;
    e.sourceColumn = userOrigin_->column;
  } else {
    e.sourceFile = shortSourcePath(where.file_name());
    e.sourceLine = where.line();
    e.sourceColumn = where.column();
  }
  errors_.push_back(std::move(e));
}

Tensor Tracer::placeholder(Type type, std::source_location where) {
  if (!type)
    return Tensor();
  auto cast = UnrealizedConversionCastOp::create(builder_, locationFor(where),
                                                 TypeRange{type}, ValueRange{});
  return Tensor(this, cast.getResult(0));
}

Tensor Tracer::weight(const std::string &name, const Shape &shape, DType dtype,
                      std::source_location where) {
  std::string fullName = weightPrefix() + name;
  RankedTensorType expected = tensorType(shape, dtype);
  if (!lookup_) {
    error("no checkpoint is bound to look up weight '" + fullName + "'", where);
    return placeholder(expected, where);
  }
  std::optional<WeightInfo> info = lookup_(model_, fullName);
  if (!info) {
    error("weight '" + fullName + "' (expected " + shapeToString(shape) + " " +
              std::string(dtypeName(dtype)) + ") is missing from the " +
              model_ + " checkpoint",
          where);
    return placeholder(expected, where);
  }
  if (info->shape != shape || info->dtype != dtype) {
    std::string message = "weight '" + fullName + "' is " +
                          shapeToString(info->shape) + " " +
                          std::string(dtypeName(info->dtype)) +
                          " in the checkpoint, but the config implies ";
    message.append(shapeToString(shape)).append(" ").append(dtypeName(dtype));
    std::optional<WeightOrigin> origin =
        originLookup_ ? originLookup_(model_, fullName) : std::nullopt;
    if (origin && !origin->args.empty())
      message.append(" (from ").append(origin->args).append(")");
    error(message, where);
    if (origin && !origin->pos.file.empty())
      errors_.back().config = origin->pos;
    return placeholder(expected, where);
  }
  auto op = mlir::trellis::WeightOp::create(builder_, locationFor(where),
                                            expected, fullName, model_);
  if (allFp32_ && dtype == DType::F16)
    return Tensor(this, mlir::trellis::CastOp::create(
                            builder_, locationFor(where),
                            expected.clone(builder_.getF32Type()), op)
                            .getResult());
  return Tensor(this, op.getResult());
}

SmallVector<Tensor> Tracer::wrapResults(Operation *op, TypeRange expected,
                                        std::source_location where) {
  SmallVector<Tensor> results;
  if (!op) {
    for (Type t : expected)
      results.push_back(placeholder(t, where));
    return results;
  }
  for (Value v : op->getResults())
    results.emplace_back(this, v);
  return results;
}

Operation *Tracer::finish(OperationState &state, bool infer,
                          std::source_location where,
                          llvm::ArrayRef<Type> blockArgs,
                          const std::function<void(Block &)> *fillBody) {
  // Capture diagnostics (from inference and the verifier) as TraceErrors at
  // the current origin instead of printing them.
  std::vector<std::string> messages;
  ScopedDiagnosticHandler handler(context_, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      messages.push_back(diag.str());
    return success();
  });
  auto fail = [&](Operation *op) -> Operation * {
    if (op)
      op->erase();
    std::string opName = state.name.getStringRef().str();
    if (messages.empty())
      messages.push_back("is invalid");
    for (const std::string &m : messages) {
      std::string text = opName;
      text.append(": ").append(m);
      error(text, where);
    }
    return nullptr;
  };
  if (infer) {
    auto iface =
        state.name.getRegisteredInfo()->getInterface<InferTypeOpInterface>();
    SmallVector<Type> types;
    if (failed(iface->inferReturnTypes(context_, state.location, state.operands,
                                       state.attributes.getDictionary(context_),
                                       state.getRawProperties(), state.regions,
                                       types)))
      return fail(nullptr);
    state.addTypes(types);
  }
  Operation *op = builder_.create(state);
  if (fillBody) {
    // Trace the body with its own diagnostics scope restored afterwards.
    Block *body = new Block();
    op->getRegion(0).push_back(body);
    for (Type t : blockArgs)
      body->addArgument(t, state.location);
    OpBuilder::InsertionGuard guard(builder_);
    builder_.setInsertionPointToStart(body);
    (*fillBody)(*body);
    if (body->empty() || !body->back().hasTrait<OpTrait::IsTerminator>()) {
      op->erase(); // the body failed; its errors are already recorded
      return nullptr;
    }
  }
  if (failed(mlir::verify(op, /*verifyRecursively=*/false)))
    return fail(op);
  return op;
}

} // namespace trellis::trace
