//===- TraceReplay.cpp - A JSON trace replayed through the tracing API ----===//
#include "lib/CAPI/TraceReplay.h"

#include "dialect/TrellisTypes.h"
#include "trellis/Trace/Ops.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"

#include <optional>

using namespace mlir;
using json = nlohmann::json;

namespace trellis::capi {

//===----------------------------------------------------------------------===//
// Locations
//===----------------------------------------------------------------------===//

static void collect(Location loc, DiagRecord &r) {
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location l : fused.getLocations())
      collect(l, r);
    return;
  }
  if (auto name = dyn_cast<NameLoc>(loc)) {
    StringRef n = name.getName().getValue();
    auto flc = dyn_cast<FileLineColLoc>(name.getChildLoc());
    if (flc && n == "config") {
      r.config =
          (flc.getFilename().getValue() + ":" + std::to_string(flc.getLine()) +
           ":" + std::to_string(flc.getColumn()))
              .str();
      return;
    }
    if (flc && (n == "user" || n == "builder")) {
      // A user position wins over a builder one.
      if (r.kind != "user") {
        r.file = flc.getFilename().str();
        r.line = flc.getLine();
        r.column = flc.getColumn();
        r.kind = n.str();
      }
      return;
    }
    if (r.module.empty())
      r.module = n.str();
    return;
  }
  if (auto flc = dyn_cast<FileLineColLoc>(loc)) {
    if (r.file.empty()) {
      r.file = flc.getFilename().str();
      r.line = flc.getLine();
      r.column = flc.getColumn();
    }
  }
}

DiagRecord recordFromLocation(Location loc) {
  DiagRecord r;
  collect(loc, r);
  return r;
}

//===----------------------------------------------------------------------===//
// Replay
//===----------------------------------------------------------------------===//

namespace {

std::optional<DType> dtypeFromName(const std::string &n) {
  if (n == "f32" || n == "float32")
    return DType::F32;
  if (n == "f16" || n == "float16")
    return DType::F16;
  if (n == "i32" || n == "int32")
    return DType::I32;
  if (n == "i64" || n == "int64")
    return DType::I64;
  return std::nullopt;
}

const char *dtypeOf(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF16())
    return "f16";
  if (t.isBF16())
    return "bf16";
  if (t.isInteger(32))
    return "i32";
  if (t.isInteger(64))
    return "i64";
  if (t.isInteger(1))
    return "bool";
  return "?";
}

json typeJson(const trace::Tensor &t) {
  if (!t)
    return nullptr;
  auto rt = dyn_cast<RankedTensorType>(t.type());
  if (!rt)
    return {{"kind", "other"}};
  json shape = json::array(), bounds = json::array();
  for (unsigned i = 0; i < rt.getRank(); ++i) {
    int64_t d = rt.getDimSize(i);
    if (ShapedType::isDynamic(d)) {
      shape.push_back(-1);
      bounds.push_back(::mlir::trellis::getDimUpperBound(rt, i));
    } else {
      shape.push_back(d);
    }
  }
  return {{"dtype", dtypeOf(rt.getElementType())},
          {"shape", shape},
          {"bounds", bounds}};
}

class Replayer {
public:
  Replayer(trace::Tracer &t, const json &trace) : t_(t), trace_(trace) {}
  ReplayResult run();

private:
  bool fail(const std::string &message) {
    if (result_.usageError.empty())
      result_.usageError = "malformed trace: " + message;
    return false;
  }
  // Field access that never throws (LLVM code is built without exceptions).
  bool getInt(const json &o, const char *key, int64_t &dst,
              const std::string &where) {
    auto it = o.find(key);
    if (it == o.end() || !it->is_number_integer())
      return fail(where + ": '" + key + "' must be an integer");
    dst = it->get<int64_t>();
    return true;
  }
  bool getNumber(const json &o, const char *key, double &dst,
                 const std::string &where) {
    auto it = o.find(key);
    if (it == o.end() || !it->is_number())
      return fail(where + ": '" + key + "' must be a number");
    dst = it->get<double>();
    return true;
  }
  bool getString(const json &o, const char *key, std::string &dst,
                 const std::string &where) {
    auto it = o.find(key);
    if (it == o.end() || !it->is_string())
      return fail(where + ": '" + key + "' must be a string");
    dst = it->get<std::string>();
    return true;
  }
  bool getInts(const json &o, const char *key, std::vector<int64_t> &dst,
               const std::string &where) {
    auto it = o.find(key);
    if (it == o.end() || !it->is_array())
      return fail(where + ": '" + key + "' must be a list of integers");
    dst.clear();
    for (const json &v : *it) {
      if (!v.is_number_integer())
        return fail(where + ": '" + key + "' must be a list of integers");
      dst.push_back(v.get<int64_t>());
    }
    return true;
  }
  bool getDType(const json &o, DType &dst, const std::string &where) {
    std::string name;
    if (!getString(o, "dtype", name, where))
      return false;
    auto d = dtypeFromName(name);
    if (!d)
      return fail(where + ": unknown dtype '" + name + "'");
    dst = *d;
    return true;
  }
  /// Sets the tracer's user origin from location index `o["loc"]`.
  bool setOrigin(const json &o, const std::string &where,
                 std::string *module = nullptr) {
    t_.setUserOrigin(std::nullopt);
    auto it = o.find("loc");
    if (it == o.end())
      return true;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
        size_t(it->get<int64_t>()) >= locs_.size())
      return fail(where + ": 'loc' is not an index into 'locs'");
    const json &l = locs_[size_t(it->get<int64_t>())];
    trace::Tracer::UserOrigin origin;
    int64_t line = 0, col = 0;
    if (!getString(l, "file", origin.file, "locs") ||
        !getInt(l, "line", line, "locs"))
      return false;
    if (l.contains("col") && !getInt(l, "col", col, "locs"))
      return false;
    origin.line = unsigned(line);
    origin.column = unsigned(col);
    t_.setUserOrigin(origin);
    if (module && l.contains("module") &&
        !getString(l, "module", *module, "locs"))
      return false;
    return true;
  }
  bool readHeader();
  bool inputTypes(std::vector<Type> &argTypes);
  bool declareWeights();
  bool outputValues(std::vector<trace::Tensor> &outs);
  bool op(const json &o, size_t i);
  bool operands(const json &o, const std::string &where,
                std::vector<trace::Tensor> &ins);

  /// One traced op being replayed: its name, its place in the trace (for
  /// messages), its attributes, its operands and the builder location.
  struct OpCall {
    const std::string &name;
    const std::string &where;
    const json &attrs;
    const std::vector<trace::Tensor> &in;
    trace::Where here;
    /// Operand `i`, or an absent tensor when the op has fewer.
    trace::Tensor opt(size_t i) const {
      return i < in.size() ? in[i] : trace::Tensor();
    }
  };
  /// Replays one op: appends its results to `out`, or fails.
  using OpReplayFn = bool (Replayer::*)(const OpCall &,
                                        std::vector<trace::Tensor> &);
  bool replayOp(const OpCall &c, std::vector<trace::Tensor> &out);
  bool arity(const OpCall &c, size_t lo, size_t hi);
  // The ops with attributes, one function each (replayOp's table).
  bool linear(const OpCall &c, std::vector<trace::Tensor> &out);
  bool layerNorm(const OpCall &c, std::vector<trace::Tensor> &out);
  bool softmax(const OpCall &c, std::vector<trace::Tensor> &out);
  bool reduce(const OpCall &c, std::vector<trace::Tensor> &out);
  bool attention(const OpCall &c, std::vector<trace::Tensor> &out);
  bool timestepEmbedding(const OpCall &c, std::vector<trace::Tensor> &out);
  bool conv3d(const OpCall &c, std::vector<trace::Tensor> &out);
  bool reshape(const OpCall &c, std::vector<trace::Tensor> &out);
  bool permute(const OpCall &c, std::vector<trace::Tensor> &out);
  bool concat(const OpCall &c, std::vector<trace::Tensor> &out);
  bool split(const OpCall &c, std::vector<trace::Tensor> &out);
  bool cast(const OpCall &c, std::vector<trace::Tensor> &out);
  bool constant(const OpCall &c, std::vector<trace::Tensor> &out);
  bool constantValues(const OpCall &c, DType dtype,
                      const std::vector<int64_t> &shape, HostTensor &v);

  trace::Tracer &t_;
  const json &trace_;
  json locs_ = json::array();
  ReplayResult result_;
  std::vector<trace::Tensor> values_;
  std::map<std::string, trace::WeightInfo> weights_;
  std::map<std::string, trace::Tensor> constants_;
};

bool Replayer::operands(const json &o, const std::string &where,
                        std::vector<trace::Tensor> &ins) {
  std::vector<int64_t> ids;
  if (!getInts(o, "in", ids, where))
    return false;
  ins.clear();
  for (int64_t id : ids) {
    if (id < 0 || size_t(id) >= values_.size())
      return fail(where + ": operand " + std::to_string(id) +
                  " is not a value defined before");
    ins.push_back(values_[size_t(id)]);
  }
  return true;
}

bool Replayer::op(const json &o, size_t index) {
  std::string where = "ops[" + std::to_string(index) + "]";
  if (!o.is_object())
    return fail(where + " is not an object");
  std::string name;
  if (!getString(o, "op", name, where))
    return false;
  std::string module;
  if (!setOrigin(o, where, &module))
    return false;
  std::optional<trace::Tracer::Scope> scope;
  if (!module.empty())
    scope.emplace(t_, module);
  std::vector<trace::Tensor> in;
  if (!operands(o, where, in))
    return false;
  const json empty = json::object();
  const json &attrs = o.contains("attrs") ? o["attrs"] : empty;
  std::vector<trace::Tensor> out;
  if (!replayOp({name, where, attrs, in, trace::Where::current()}, out))
    return false;
  int64_t nout = 1;
  if (o.contains("n_out") && !getInt(o, "n_out", nout, where))
    return false;
  if (int64_t(out.size()) != nout)
    return fail(where + " (" + name + "): produces " +
                std::to_string(out.size()) + " values, the trace says " +
                std::to_string(nout));
  values_.insert(values_.end(), out.begin(), out.end());
  return true;
}

/// Fails unless the op has `lo`..`hi` operands.
bool Replayer::arity(const OpCall &c, size_t lo, size_t hi) {
  if (c.in.size() < lo || c.in.size() > hi)
    return fail(c.where + " (" + c.name + "): takes " + std::to_string(lo) +
                (hi != lo ? ".." + std::to_string(hi) : "") +
                " operands, found " + std::to_string(c.in.size()));
  return true;
}

/// Dispatches on the op name: the attribute-free elementwise ops and matmul
/// from two tables of tracing functions, every other op from its own
/// function.
bool Replayer::replayOp(const OpCall &c, std::vector<trace::Tensor> &out) {
  using UnaryFn = trace::Tensor (*)(const trace::Tensor &, trace::Where);
  using BinaryFn = trace::Tensor (*)(const trace::Tensor &,
                                     const trace::Tensor &, trace::Where);
  static const std::map<std::string, UnaryFn> unary = {
      {"silu", trace::silu},        {"gelu", trace::gelu},
      {"gelu_erf", trace::geluErf}, {"sigmoid", trace::sigmoid},
      {"tanh", trace::tanh},        {"softplus", trace::softplus},
      {"exp", trace::exp},          {"log", trace::log},
      {"sin", trace::sin},          {"cos", trace::cos},
      {"neg", trace::neg},          {"sqrt", trace::sqrt},
      {"abs", trace::abs}};
  static const std::map<std::string, BinaryFn> binary = {
      {"add", trace::add},
      {"sub", trace::sub},
      {"mul", trace::mul},
      {"div", trace::div},
      {"maximum", trace::maximum},
      {"matmul", trace::matmul},
      {"head_rms_norm", trace::headRmsNorm},
      {"pow", trace::pow},
      {"greater", trace::greater},
      {"less", trace::less},
      {"equal", trace::equal},
      {"gather_rows", trace::gatherRows}};
  using TernaryFn =
      trace::Tensor (*)(const trace::Tensor &, const trace::Tensor &,
                        const trace::Tensor &, trace::Where);
  static const std::map<std::string, TernaryFn> ternary = {
      {"modulate", trace::modulate},
      {"gated_residual", trace::gatedResidual},
      {"where", trace::where}};
  static const std::map<std::string, OpReplayFn> withAttrs = {
      {"linear", &Replayer::linear},
      {"layer_norm", &Replayer::layerNorm},
      {"softmax", &Replayer::softmax},
      {"reduce", &Replayer::reduce},
      {"attention", &Replayer::attention},
      {"reshape", &Replayer::reshape},
      {"permute", &Replayer::permute},
      {"concat", &Replayer::concat},
      {"split", &Replayer::split},
      {"cast", &Replayer::cast},
      {"constant", &Replayer::constant},
      {"timestep_embedding", &Replayer::timestepEmbedding},
      {"conv3d", &Replayer::conv3d}};
  if (auto it = unary.find(c.name); it != unary.end()) {
    if (!arity(c, 1, 1))
      return false;
    out.push_back(it->second(c.in[0], c.here));
    return true;
  }
  if (auto it = binary.find(c.name); it != binary.end()) {
    if (!arity(c, 2, 2))
      return false;
    out.push_back(it->second(c.in[0], c.in[1], c.here));
    return true;
  }
  if (auto it = ternary.find(c.name); it != ternary.end()) {
    if (!arity(c, 3, 3))
      return false;
    out.push_back(it->second(c.in[0], c.in[1], c.in[2], c.here));
    return true;
  }
  if (auto it = withAttrs.find(c.name); it != withAttrs.end())
    return (this->*it->second)(c, out);
  return fail(c.where + ": unknown op '" + c.name + "'");
}

bool Replayer::linear(const OpCall &c, std::vector<trace::Tensor> &out) {
  if (!arity(c, 2, 3))
    return false;
  out.push_back(trace::linear(c.in[0], c.in[1], c.opt(2), c.here));
  return true;
}

bool Replayer::layerNorm(const OpCall &c, std::vector<trace::Tensor> &out) {
  double eps = 1e-5;
  int64_t axis = -1;
  if (!arity(c, 1, 3) || !getNumber(c.attrs, "eps", eps, c.where) ||
      !getInt(c.attrs, "axis", axis, c.where))
    return false;
  out.push_back(
      trace::layerNorm(c.in[0], c.opt(1), c.opt(2), eps, axis, c.here));
  return true;
}

bool Replayer::timestepEmbedding(const OpCall &c,
                                 std::vector<trace::Tensor> &out) {
  int64_t dim = 256;
  double maxPeriod = 10000.0;
  if (!arity(c, 1, 1) || !getInt(c.attrs, "dim", dim, c.where) ||
      !getNumber(c.attrs, "max_period", maxPeriod, c.where))
    return false;
  out.push_back(trace::timestepEmbedding(c.in[0], dim, maxPeriod, c.here));
  return true;
}

bool Replayer::conv3d(const OpCall &c, std::vector<trace::Tensor> &out) {
  int64_t padding = 1;
  if (!arity(c, 2, 3) || !getInt(c.attrs, "padding", padding, c.where))
    return false;
  out.push_back(trace::conv3d(c.in[0], c.in[1], c.opt(2), padding, c.here));
  return true;
}

bool Replayer::softmax(const OpCall &c, std::vector<trace::Tensor> &out) {
  int64_t axis = -1;
  if (!arity(c, 1, 1) || !getInt(c.attrs, "axis", axis, c.where))
    return false;
  out.push_back(trace::softmax(c.in[0], axis, c.here));
  return true;
}

bool Replayer::reduce(const OpCall &c, std::vector<trace::Tensor> &out) {
  std::string kind;
  int64_t axis = -1;
  if (!arity(c, 1, 1) || !getString(c.attrs, "kind", kind, c.where) ||
      !getInt(c.attrs, "axis", axis, c.where))
    return false;
  auto keepdim = c.attrs.find("keepdim");
  if (keepdim == c.attrs.end() || !keepdim->is_boolean())
    return fail(c.where + ": 'keepdim' must be true or false");
  out.push_back(
      trace::reduce(c.in[0], kind, axis, keepdim->get<bool>(), c.here));
  return true;
}

bool Replayer::attention(const OpCall &c, std::vector<trace::Tensor> &out) {
  double scale = 1;
  if (!arity(c, 3, 3) || !getNumber(c.attrs, "scale", scale, c.where))
    return false;
  out.push_back(trace::attention(c.in[0], c.in[1], c.in[2], scale,
                                 /*norms=*/nullptr, c.here));
  return true;
}

/// Resolves the first -1 of a reshape's target `shape` for input `x`: from
/// the element count of a static input, a bounded dynamic dim otherwise (-1
/// stays when the sizes do not divide).
void inferReshapeDim(const trace::Tensor &x, std::vector<int64_t> &shape) {
  bool dynamicInput = false;
  int64_t total = 1, known = 1, inferred = -1;
  for (int64_t d : x.shape()) {
    dynamicInput |= ShapedType::isDynamic(d);
    total *= ShapedType::isDynamic(d) ? 1 : d;
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && inferred < 0)
      inferred = int64_t(i);
    else
      known *= shape[i];
  }
  if (inferred >= 0)
    shape[size_t(inferred)] =
        dynamicInput ? ShapedType::kDynamic
                     : (known > 0 && total % known == 0 ? total / known : -1);
}

bool Replayer::reshape(const OpCall &c, std::vector<trace::Tensor> &out) {
  std::vector<int64_t> shape;
  if (!arity(c, 1, 1) || !getInts(c.attrs, "shape", shape, c.where))
    return false;
  if (c.in[0])
    inferReshapeDim(c.in[0], shape);
  bool valid = true;
  for (int64_t d : shape)
    valid &= d >= 0 || ShapedType::isDynamic(d);
  if (!valid) {
    t_.error("reshape: the shape may hold one -1 (inferred) and sizes "
             ">= 0 only",
             c.here);
    out.push_back(trace::Tensor());
  } else {
    out.push_back(trace::reshape(c.in[0], shape, c.here));
  }
  return true;
}

bool Replayer::permute(const OpCall &c, std::vector<trace::Tensor> &out) {
  std::vector<int64_t> perm;
  if (!arity(c, 1, 1) || !getInts(c.attrs, "perm", perm, c.where))
    return false;
  out.push_back(trace::permute(c.in[0], perm, c.here));
  return true;
}

bool Replayer::concat(const OpCall &c, std::vector<trace::Tensor> &out) {
  int64_t axis = 0;
  if (!arity(c, 1, 1u << 20) || !getInt(c.attrs, "axis", axis, c.where))
    return false;
  out.push_back(trace::concat(c.in, axis, c.here));
  return true;
}

bool Replayer::split(const OpCall &c, std::vector<trace::Tensor> &out) {
  int64_t axis = 0;
  std::vector<int64_t> sizes;
  if (!arity(c, 1, 1) || !getInt(c.attrs, "axis", axis, c.where) ||
      !getInts(c.attrs, "sizes", sizes, c.where))
    return false;
  out = trace::split(c.in[0], axis, sizes, c.here);
  if (out.empty()) // absent input or a failed op: absent results
    out.resize(sizes.size());
  return true;
}

bool Replayer::cast(const OpCall &c, std::vector<trace::Tensor> &out) {
  DType to;
  if (!arity(c, 1, 1) || !getDType(c.attrs, to, c.where))
    return false;
  out.push_back(trace::cast(c.in[0], to, c.here));
  return true;
}

/// Reads a constant's "values" (one number per element of `shape`) into `v`:
/// I32 for an i32 constant, F32 otherwise.
bool Replayer::constantValues(const OpCall &c, DType dtype,
                              const std::vector<int64_t> &shape,
                              HostTensor &v) {
  auto values = c.attrs.find("values");
  if (values == c.attrs.end() || !values->is_array() ||
      int64_t(values->size()) != numElements(shape))
    return fail(c.where + ": 'values' must list one number per element");
  bool isInt = dtype == DType::I32;
  v = HostTensor(isInt ? DType::I32 : DType::F32, shape);
  for (size_t i = 0; i < values->size(); ++i) {
    const json &x = (*values)[i];
    if (!x.is_number())
      return fail(c.where + ": 'values' must be numbers");
    if (isInt)
      v.mutableData<int32_t>()[i] = int32_t(x.get<int64_t>());
    else
      v.mutableData<float>()[i] = float(x.get<double>());
  }
  return true;
}

bool Replayer::constant(const OpCall &c, std::vector<trace::Tensor> &out) {
  DType dtype;
  std::vector<int64_t> shape;
  if (!arity(c, 0, 0) || !getDType(c.attrs, dtype, c.where) ||
      !getInts(c.attrs, "shape", shape, c.where))
    return false;
  for (int64_t d : shape)
    if (d < 0)
      return fail(c.where + ": negative dimension in 'shape'");
  HostTensor v;
  if (!constantValues(c, dtype, shape, v))
    return false;
  // Equal constants are one value (at the first one's location): the
  // folder would merge them and drop both locations.
  std::string key =
      c.attrs.dump(-1, ' ', false, json::error_handler_t::replace);
  auto cached = constants_.find(key);
  if (cached != constants_.end()) {
    out.push_back(cached->second);
  } else {
    trace::Tensor t = trace::constant(t_, v, c.here);
    if (dtype != DType::I32 && dtype != DType::F32)
      t = trace::cast(t, dtype, c.here);
    constants_[key] = t;
    out.push_back(t);
  }
  return true;
}

/// The trace's header: format and version, the optional name, source and
/// location table, and the four lists a trace must have.
bool Replayer::readHeader() {
  if (!trace_.is_object())
    return fail("the trace is not a JSON object");
  std::string format;
  int64_t version = 0;
  if (!getString(trace_, "format", format, "trace") ||
      !getInt(trace_, "version", version, "trace"))
    return false;
  if (format != "trellisc-trace" || version != 1)
    return fail("expected format 'trellisc-trace' version 1, found '" + format +
                "' version " + std::to_string(version));
  if (trace_.contains("name") &&
      !getString(trace_, "name", result_.function, "trace"))
    return false;
  if (trace_.contains("source") &&
      !getString(trace_, "source", result_.source, "trace"))
    return false;
  if (trace_.contains("locs")) {
    if (!trace_["locs"].is_array())
      return fail("'locs' must be a list");
    locs_ = trace_["locs"];
  }
  for (const char *key : {"inputs", "weights", "ops", "outputs"})
    if (!trace_.contains(key) || !trace_[key].is_array())
      return fail(std::string("'") + key + "' must be a list");
  return true;
}

/// The function's argument types, from "inputs" (-1: a dynamic dimension,
/// one bound each).
bool Replayer::inputTypes(std::vector<Type> &argTypes) {
  size_t i = 0;
  for (const json &in : trace_["inputs"]) {
    std::string where = "inputs[" + std::to_string(i++) + "]";
    DType dtype;
    std::vector<int64_t> shape, bounds;
    if (!in.is_object() || !getDType(in, dtype, where) ||
        !getInts(in, "shape", shape, where))
      return false;
    if (in.contains("bounds") && !getInts(in, "bounds", bounds, where))
      return false;
    size_t dynamic = 0;
    for (int64_t &d : shape)
      if (d < 0) {
        d = ShapedType::kDynamic;
        ++dynamic;
      }
    for (int64_t b : bounds)
      if (b < 1)
        return fail(where + ": bounds must be >= 1");
    if (dynamic != bounds.size())
      return fail(where + ": one bound per dynamic (-1) dimension");
    argTypes.push_back(t_.tensorType(shape, dtype, bounds));
  }
  return true;
}

/// Parameters: trellis.weight ops of model "params", bound at run time; their
/// values follow the arguments.
bool Replayer::declareWeights() {
  size_t i = 0;
  for (const json &w : trace_["weights"]) {
    std::string where = "weights[" + std::to_string(i++) + "]";
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    if (!w.is_object() || !getString(w, "name", name, where) ||
        !getDType(w, dtype, where) || !getInts(w, "shape", shape, where))
      return false;
    for (int64_t d : shape)
      if (d < 0)
        return fail(where + ": negative dimension in 'shape'");
    weights_[name] = trace::WeightInfo{dtype, shape};
  }
  t_.setModel("params", std::nullopt);
  t_.setWeightLookup(
      [this](const std::string &,
             const std::string &name) -> std::optional<trace::WeightInfo> {
        auto it = weights_.find(name);
        if (it == weights_.end())
          return std::nullopt;
        return it->second;
      });
  i = 0;
  for (const json &w : trace_["weights"]) {
    std::string where = "weights[" + std::to_string(i++) + "]";
    if (!setOrigin(w, where))
      return false;
    const trace::WeightInfo &info = weights_[w["name"].get<std::string>()];
    values_.push_back(
        t_.weight(w["name"].get<std::string>(), info.shape, info.dtype));
  }
  t_.setModel("", std::nullopt);
  return true;
}

/// The function's results, from "outputs" (value ids).
bool Replayer::outputValues(std::vector<trace::Tensor> &outs) {
  for (const json &id : trace_["outputs"]) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        size_t(id.get<int64_t>()) >= values_.size())
      return fail("'outputs' must list defined values");
    outs.push_back(values_[size_t(id.get<int64_t>())]);
  }
  return true;
}

ReplayResult Replayer::run() {
  std::vector<Type> argTypes;
  if (!readHeader() || !inputTypes(argTypes))
    return result_;
  // The function is where the user compiled it (the trace's "loc").
  if (!setOrigin(trace_, "trace"))
    return result_;
  std::vector<trace::Tensor> args =
      t_.beginFunction(result_.function, argTypes);
  t_.setUserOrigin(std::nullopt);
  values_.assign(args.begin(), args.end());
  if (!declareWeights())
    return result_;

  size_t i = 0;
  for (const json &o : trace_["ops"])
    if (!op(o, i++))
      return result_;

  std::vector<trace::Tensor> outs;
  if (!outputValues(outs))
    return result_;
  if (trace_.contains("loc") && !setOrigin(trace_, "trace"))
    return result_;
  t_.endFunction(outs);
  t_.setUserOrigin(std::nullopt);

  json values = json::array(), inputs = json::array(), outputs = json::array();
  for (const trace::Tensor &v : values_)
    values.push_back(typeJson(v));
  for (size_t k = 0; k < args.size(); ++k)
    inputs.push_back(typeJson(args[k]));
  for (const trace::Tensor &v : outs)
    outputs.push_back(typeJson(v));
  result_.info = {{"values", values}, {"inputs", inputs}, {"outputs", outputs}};
  return result_;
}

} // namespace

ReplayResult replayTrace(trace::Tracer &tracer, const json &trace) {
  Replayer r(tracer, trace);
  return r.run();
}

} // namespace trellis::capi
