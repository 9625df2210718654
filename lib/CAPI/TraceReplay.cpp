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
  bool input(const json &o, size_t i, trace::Tensor &out);
  bool op(const json &o, size_t i);
  bool operands(const json &o, const std::string &where,
                std::vector<trace::Tensor> &ins);

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
  auto arity = [&](size_t lo, size_t hi) {
    if (in.size() < lo || in.size() > hi)
      return fail(where + " (" + name + "): takes " + std::to_string(lo) +
                  (hi != lo ? ".." + std::to_string(hi) : "") +
                  " operands, found " + std::to_string(in.size()));
    return true;
  };
  auto opt = [&](size_t i) { return i < in.size() ? in[i] : trace::Tensor(); };
  std::vector<trace::Tensor> out;
  using UnaryFn = trace::Tensor (*)(const trace::Tensor &, trace::Where);
  using BinaryFn = trace::Tensor (*)(const trace::Tensor &,
                                     const trace::Tensor &, trace::Where);
  static const std::map<std::string, UnaryFn> unary = {
      {"silu", trace::silu},         {"gelu", trace::gelu},
      {"sigmoid", trace::sigmoid},   {"tanh", trace::tanh},
      {"softplus", trace::softplus}, {"exp", trace::exp},
      {"log", trace::log},           {"sin", trace::sin},
      {"cos", trace::cos},           {"neg", trace::neg},
      {"sqrt", trace::sqrt},         {"abs", trace::abs}};
  static const std::map<std::string, BinaryFn> binary = {
      {"add", trace::add},         {"sub", trace::sub},
      {"mul", trace::mul},         {"div", trace::div},
      {"maximum", trace::maximum}, {"matmul", trace::matmul}};
  trace::Where here = trace::Where::current();
  if (auto it = unary.find(name); it != unary.end()) {
    if (!arity(1, 1))
      return false;
    out.push_back(it->second(in[0], here));
  } else if (auto it = binary.find(name); it != binary.end()) {
    if (!arity(2, 2))
      return false;
    out.push_back(it->second(in[0], in[1], here));
  } else if (name == "linear") {
    if (!arity(2, 3))
      return false;
    out.push_back(trace::linear(in[0], in[1], opt(2), here));
  } else if (name == "layer_norm") {
    double eps = 1e-5;
    int64_t axis = -1;
    if (!arity(1, 3) || !getNumber(attrs, "eps", eps, where) ||
        !getInt(attrs, "axis", axis, where))
      return false;
    out.push_back(trace::layerNorm(in[0], opt(1), opt(2), eps, axis, here));
  } else if (name == "softmax") {
    int64_t axis = -1;
    if (!arity(1, 1) || !getInt(attrs, "axis", axis, where))
      return false;
    out.push_back(trace::softmax(in[0], axis, here));
  } else if (name == "attention") {
    double scale = 1;
    if (!arity(3, 3) || !getNumber(attrs, "scale", scale, where))
      return false;
    out.push_back(trace::attention(in[0], in[1], in[2], scale, here));
  } else if (name == "reshape") {
    std::vector<int64_t> shape;
    if (!arity(1, 1) || !getInts(attrs, "shape", shape, where))
      return false;
    if (in[0]) {
      // -1: inferred from a static input, a bounded dynamic dim otherwise.
      bool dynamicInput = false;
      int64_t total = 1, known = 1, inferred = -1;
      for (int64_t d : in[0].shape()) {
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
            dynamicInput
                ? ShapedType::kDynamic
                : (known > 0 && total % known == 0 ? total / known : -1);
    }
    bool valid = true;
    for (int64_t d : shape)
      valid &= d >= 0 || ShapedType::isDynamic(d);
    if (!valid) {
      t_.error("reshape: the shape may hold one -1 (inferred) and sizes "
               ">= 0 only",
               here);
      out.push_back(trace::Tensor());
    } else {
      out.push_back(trace::reshape(in[0], shape, here));
    }
  } else if (name == "permute") {
    std::vector<int64_t> perm;
    if (!arity(1, 1) || !getInts(attrs, "perm", perm, where))
      return false;
    out.push_back(trace::permute(in[0], perm, here));
  } else if (name == "concat") {
    int64_t axis = 0;
    if (!arity(1, 1u << 20) || !getInt(attrs, "axis", axis, where))
      return false;
    out.push_back(trace::concat(in, axis, here));
  } else if (name == "split") {
    int64_t axis = 0;
    std::vector<int64_t> sizes;
    if (!arity(1, 1) || !getInt(attrs, "axis", axis, where) ||
        !getInts(attrs, "sizes", sizes, where))
      return false;
    out = trace::split(in[0], axis, sizes, here);
    if (out.empty()) // absent input or a failed op: absent results
      out.resize(sizes.size());
  } else if (name == "cast") {
    DType to;
    if (!arity(1, 1) || !getDType(attrs, to, where))
      return false;
    out.push_back(trace::cast(in[0], to, here));
  } else if (name == "constant") {
    DType dtype;
    std::vector<int64_t> shape;
    if (!arity(0, 0) || !getDType(attrs, dtype, where) ||
        !getInts(attrs, "shape", shape, where))
      return false;
    for (int64_t d : shape)
      if (d < 0)
        return fail(where + ": negative dimension in 'shape'");
    auto values = attrs.find("values");
    if (values == attrs.end() || !values->is_array() ||
        int64_t(values->size()) != numElements(shape))
      return fail(where + ": 'values' must list one number per element");
    bool isInt = dtype == DType::I32;
    HostTensor v(isInt ? DType::I32 : DType::F32, shape);
    for (size_t i = 0; i < values->size(); ++i) {
      const json &x = (*values)[i];
      if (!x.is_number())
        return fail(where + ": 'values' must be numbers");
      if (isInt)
        v.mutableData<int32_t>()[i] = int32_t(x.get<int64_t>());
      else
        v.mutableData<float>()[i] = float(x.get<double>());
    }
    // Equal constants are one value (at the first one's location): the
    // folder would merge them and drop both locations.
    std::string key =
        attrs.dump(-1, ' ', false, json::error_handler_t::replace);
    auto cached = constants_.find(key);
    if (cached != constants_.end()) {
      out.push_back(cached->second);
    } else {
      trace::Tensor c = trace::constant(t_, v, here);
      if (!isInt && dtype != DType::F32)
        c = trace::cast(c, dtype, here);
      constants_[key] = c;
      out.push_back(c);
    }
  } else {
    return fail(where + ": unknown op '" + name + "'");
  }
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

ReplayResult Replayer::run() {
  if (!trace_.is_object())
    return fail("the trace is not a JSON object"), result_;
  std::string format;
  int64_t version = 0;
  if (!getString(trace_, "format", format, "trace") ||
      !getInt(trace_, "version", version, "trace"))
    return result_;
  if (format != "trellisc-trace" || version != 1)
    return fail("expected format 'trellisc-trace' version 1, found '" + format +
                "' version " + std::to_string(version)),
           result_;
  if (trace_.contains("name") &&
      !getString(trace_, "name", result_.function, "trace"))
    return result_;
  if (trace_.contains("source") &&
      !getString(trace_, "source", result_.source, "trace"))
    return result_;
  if (trace_.contains("locs")) {
    if (!trace_["locs"].is_array())
      return fail("'locs' must be a list"), result_;
    locs_ = trace_["locs"];
  }
  for (const char *key : {"inputs", "weights", "ops", "outputs"})
    if (!trace_.contains(key) || !trace_[key].is_array())
      return fail(std::string("'") + key + "' must be a list"), result_;

  // Input types.
  std::vector<Type> argTypes;
  size_t i = 0;
  for (const json &in : trace_["inputs"]) {
    std::string where = "inputs[" + std::to_string(i++) + "]";
    DType dtype;
    std::vector<int64_t> shape, bounds;
    if (!in.is_object() || !getDType(in, dtype, where) ||
        !getInts(in, "shape", shape, where))
      return result_;
    if (in.contains("bounds") && !getInts(in, "bounds", bounds, where))
      return result_;
    size_t dynamic = 0;
    for (int64_t &d : shape)
      if (d < 0) {
        d = ShapedType::kDynamic;
        ++dynamic;
      }
    for (int64_t b : bounds)
      if (b < 1)
        return fail(where + ": bounds must be >= 1"), result_;
    if (dynamic != bounds.size())
      return fail(where + ": one bound per dynamic (-1) dimension"), result_;
    argTypes.push_back(t_.tensorType(shape, dtype, bounds));
  }
  // The function is where the user compiled it (the trace's "loc").
  if (!setOrigin(trace_, "trace"))
    return result_;
  std::vector<trace::Tensor> args =
      t_.beginFunction(result_.function, argTypes);
  t_.setUserOrigin(std::nullopt);
  values_.assign(args.begin(), args.end());

  // Parameters: trellis.weight ops of model "params", bound at run time.
  i = 0;
  for (const json &w : trace_["weights"]) {
    std::string where = "weights[" + std::to_string(i++) + "]";
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    if (!w.is_object() || !getString(w, "name", name, where) ||
        !getDType(w, dtype, where) || !getInts(w, "shape", shape, where))
      return result_;
    for (int64_t d : shape)
      if (d < 0)
        return fail(where + ": negative dimension in 'shape'"), result_;
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
      return result_;
    const trace::WeightInfo &info = weights_[w["name"].get<std::string>()];
    values_.push_back(
        t_.weight(w["name"].get<std::string>(), info.shape, info.dtype));
  }
  t_.setModel("", std::nullopt);

  i = 0;
  for (const json &o : trace_["ops"])
    if (!op(o, i++))
      return result_;

  std::vector<trace::Tensor> outs;
  for (const json &id : trace_["outputs"]) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        size_t(id.get<int64_t>()) >= values_.size())
      return fail("'outputs' must list defined values"), result_;
    outs.push_back(values_[size_t(id.get<int64_t>())]);
  }
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
