//===- HostProgram.cpp - trellis IR -> the runtime's host program ---------===//
#include "lib/Target/HostProgram.h"

#include "dialect/TrellisOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

using namespace mlir;
using json = nlohmann::json;

namespace trellis {
namespace {

std::string printed(Attribute attr) {
  std::string s;
  llvm::raw_string_ostream os(s);
  attr.print(os);
  return s;
}

std::string dtypeOf(Type t) {
  if (t.isF16())
    return "f16";
  if (t.isF32())
    return "f32";
  if (t.isInteger(32))
    return "i32";
  if (t.isInteger(64))
    return "i64";
  if (t.isInteger(1))
    return "i1";
  return "";
}

class Serializer {
public:
  FailureOr<SerializedProgram> run(ModuleOp module,
                                   llvm::ArrayRef<std::string> entries);

private:
  FailureOr<json> type(Type t, Operation *user);
  FailureOr<json> attribute(Attribute a, Operation *user);
  LogicalResult ops(Block &block, json &out);
  int slot(Value v) {
    auto [it, inserted] = slots_.try_emplace(v, nextSlot_);
    if (inserted)
      ++nextSlot_;
    return it->second;
  }
  int location(Location loc);

  llvm::DenseMap<Value, int> slots_;
  int nextSlot_ = 0;
  llvm::DenseMap<Location, int> locIds_;
  json locations_ = json::array();
};

FailureOr<json> Serializer::type(Type t, Operation *user) {
  if (auto tensor = dyn_cast<RankedTensorType>(t)) {
    std::string dtype = dtypeOf(tensor.getElementType());
    if (dtype.empty())
      return user->emitOpError("has a tensor of element type ")
             << tensor.getElementType() << " that the runtime cannot hold";
    json shape = json::array();
    for (int64_t d : tensor.getShape())
      shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
    json j = {{"kind", "tensor"}, {"dtype", dtype}, {"shape", shape}};
    if (auto bounds = mlir::trellis::getDynamicBounds(tensor); !bounds.empty())
      j["bounds"] = json(std::vector<int64_t>(bounds.begin(), bounds.end()));
    return j;
  }
  if (auto c = dyn_cast<mlir::trellis::CoordsType>(t))
    return json{{"kind", "coords"},
                {"resolution", c.getResolution()},
                {"bound", c.getBound()}};
  if (auto n = dyn_cast<mlir::trellis::NeighborMapType>(t))
    return json{{"kind", "neighbor_map"},
                {"kernel", n.getKernel()},
                {"bound", n.getBound()}};
  if (auto s = dyn_cast<mlir::trellis::SegmentsType>(t))
    return json{{"kind", "segments"},
                {"max_length", s.getMaxLength()},
                {"bound", s.getBound()}};
  return user->emitOpError("uses type ")
         << t << " that the runtime cannot hold";
}

FailureOr<json> Serializer::attribute(Attribute a, Operation *user) {
  if (auto b = dyn_cast<BoolAttr>(a))
    return json(b.getValue());
  if (auto i = dyn_cast<IntegerAttr>(a))
    return json(i.getValue().getSExtValue());
  if (auto f = dyn_cast<FloatAttr>(a))
    return json(f.getValueAsDouble());
  if (auto s = dyn_cast<StringAttr>(a))
    return json(s.str());
  if (auto arr = dyn_cast<DenseI64ArrayAttr>(a))
    return json(
        std::vector<int64_t>(arr.asArrayRef().begin(), arr.asArrayRef().end()));
  if (auto arr = dyn_cast<DenseI32ArrayAttr>(a))
    return json(
        std::vector<int32_t>(arr.asArrayRef().begin(), arr.asArrayRef().end()));
  if (auto dict = dyn_cast<DictionaryAttr>(a)) {
    // Codegen's annotations (trellis.launch = {kernel, grid, block, smem}).
    json out = json::object();
    for (NamedAttribute e : dict) {
      FailureOr<json> j = attribute(e.getValue(), user);
      if (failed(j))
        return failure();
      out[e.getName().str()] = *j;
    }
    return out;
  }
  if (auto arr = dyn_cast<DenseF64ArrayAttr>(a))
    return json(
        std::vector<double>(arr.asArrayRef().begin(), arr.asArrayRef().end()));
  if (auto arr = dyn_cast<DenseF32ArrayAttr>(a))
    return json(
        std::vector<float>(arr.asArrayRef().begin(), arr.asArrayRef().end()));
  if (auto arr = dyn_cast<ArrayAttr>(a)) {
    json out = json::array();
    for (Attribute e : arr) {
      FailureOr<json> j = attribute(e, user);
      if (failed(j))
        return failure();
      out.push_back(*j);
    }
    return out;
  }
  if (auto dense = dyn_cast<DenseElementsAttr>(a)) {
    // Small constants only (weights never enter the IR); splats stay one
    // value (the zero negative condition is 1.4M elements).
    if (dense.isSplat()) {
      if (dense.getElementType().isIntOrIndex())
        return json{{"splat", dense.getSplatValue<APInt>().getSExtValue()}};
      return json{{"splat", dense.getSplatValue<APFloat>().convertToDouble()}};
    }
    json values = json::array();
    if (dense.getElementType().isIntOrIndex())
      for (const APInt &v : dense.getValues<APInt>())
        values.push_back(v.getSExtValue());
    else
      for (const APFloat &v : dense.getValues<APFloat>())
        values.push_back(v.convertToDouble());
    return json{{"dense", values}};
  }
  if (auto sym = dyn_cast<FlatSymbolRefAttr>(a))
    return json(sym.getValue().str());
  if (auto t = dyn_cast<TypeAttr>(a))
    return json(printed(a));
  // Enums and other dialect attributes: their printed form, e.g.
  // "#trellis<multi_image stochastic>"; the runtime parses the keyword.
  return json(printed(a));
}

int Serializer::location(Location loc) {
  auto [it, inserted] = locIds_.try_emplace(loc, int(locations_.size()));
  if (!inserted)
    return it->second;
  json entry = json::object();
  std::string text;
  llvm::raw_string_ostream os(text);
  loc.print(os);
  entry["text"] = text;
  auto visit = [&](Location l, auto &self) -> void {
    if (auto fused = dyn_cast<FusedLoc>(l)) {
      for (Location part : fused.getLocations())
        self(part, self);
    } else if (auto name = dyn_cast<NameLoc>(l)) {
      auto child = dyn_cast<FileLineColLoc>(name.getChildLoc());
      std::string key = name.getName().str();
      if (!child) {
        entry["module"] = key;
        return;
      }
      std::string pos = child.getFilename().str() + ":" +
                        std::to_string(child.getLine()) + ":" +
                        std::to_string(child.getColumn());
      if (key == "config") {
        entry["config"] = pos;
      } else {
        entry["source"] = pos;
        entry["source_kind"] = key;
      }
    } else if (auto file = dyn_cast<FileLineColLoc>(l)) {
      if (!entry.contains("source"))
        entry["source"] = file.getFilename().str() + ":" +
                          std::to_string(file.getLine()) + ":" +
                          std::to_string(file.getColumn());
    }
  };
  visit(loc, visit);
  locations_.push_back(entry);
  return it->second;
}

/// How the runtime runs `op` (trellis::OpClass), from its marker traits
/// (dialect/TrellisOps.td): the runtime never matches op names to tell.
const char *opClassOf(Operation &op) {
  namespace traits = mlir::trellis::OpTrait;
  if (op.hasTrait<traits::StorageOnly>())
    return "storage";
  if (op.getNumRegions() > 0)
    return "region";
  if (op.hasTrait<traits::HostBound>())
    return "host_bound";
  if (op.hasTrait<traits::RuntimeOp>())
    return "runtime";
  if (op.hasTrait<traits::LibraryCall>())
    return "library";
  if (op.hasTrait<traits::GeneratedKernel>())
    return "kernel";
  // The convolutions: the codegen picks a generated kernel or GEMMs (its
  // trellis.launch / trellis.conv_direct annotations say which).
  return "conv";
}

LogicalResult Serializer::ops(Block &block, json &out) {
  for (Operation &op : block) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue; // returns and yields are recorded by the parent
    json j = {{"op", op.getName().getStringRef().str()},
              {"class", opClassOf(op)},
              {"loc", location(op.getLoc())}};
    json in = json::array(), outSlots = json::array(), types = json::array();
    for (Value v : op.getOperands())
      in.push_back(slot(v));
    for (Value v : op.getResults()) {
      outSlots.push_back(slot(v));
      FailureOr<json> t = type(v.getType(), &op);
      if (failed(t))
        return failure();
      types.push_back(*t);
    }
    j["in"] = in;
    j["out"] = outSlots;
    j["types"] = types;
    json attrs = json::object();
    for (NamedAttribute attr : op.getAttrs()) {
      FailureOr<json> a = attribute(attr.getValue(), &op);
      if (failed(a))
        return failure();
      attrs[attr.getName().str()] = *a;
    }
    // Inherent attributes stored as properties.
    if (std::optional<Attribute> props = op.getPropertiesAsAttribute();
        props && *props)
      if (auto dict = dyn_cast<DictionaryAttr>(*props))
        for (NamedAttribute attr : dict) {
          FailureOr<json> a = attribute(attr.getValue(), &op);
          if (failed(a))
            return failure();
          attrs[attr.getName().str()] = *a;
        }
    j["attrs"] = attrs;
    if (op.getNumRegions()) {
      json regions = json::array();
      for (Region &region : op.getRegions()) {
        // An absent optional region (flow_sample's uncond before
        // trellis-specialize-guidance) is left out: the runtime sees the
        // present ones in order. Values a region uses from above keep the
        // slots of their definitions (one slot space per function).
        if (region.empty())
          continue;
        json r = {{"args", json::array()},
                  {"body", json::array()},
                  {"yield", json::array()}};
        if (!region.hasOneBlock())
          return op.emitOpError("has a region with ")
                 << region.getBlocks().size()
                 << " blocks; the host program takes single-block regions";
        Block &body = region.front();
        r["arg_types"] = json::array();
        for (BlockArgument arg : body.getArguments()) {
          r["args"].push_back(slot(arg));
          FailureOr<json> t = type(arg.getType(), &op);
          if (failed(t))
            return failure();
          r["arg_types"].push_back(*t);
        }
        if (failed(ops(body, r["body"])))
          return failure();
        for (Value v : body.getTerminator()->getOperands())
          r["yield"].push_back(slot(v));
        regions.push_back(r);
      }
      j["regions"] = regions;
    }
    out.push_back(j);
  }
  return success();
}

FailureOr<SerializedProgram>
Serializer::run(ModuleOp module, llvm::ArrayRef<std::string> entries) {
  json functions = json::array();
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      return fn.emitOpError("is external; the host program needs every body");
    slots_.clear();
    nextSlot_ = 0;
    json f = {{"name", fn.getName().str()}, {"args", json::array()},
              {"arg_types", json::array()}, {"results", json::array()},
              {"body", json::array()},      {"loc", location(fn.getLoc())}};
    Block &body = fn.getBody().front();
    for (BlockArgument arg : body.getArguments()) {
      f["args"].push_back(slot(arg));
      FailureOr<json> t = type(arg.getType(), fn);
      if (failed(t))
        return failure();
      f["arg_types"].push_back(*t);
    }
    if (failed(ops(body, f["body"])))
      return failure();
    for (Value v : body.getTerminator()->getOperands())
      f["results"].push_back(slot(v));
    f["num_slots"] = nextSlot_;
    functions.push_back(f);
  }
  for (const std::string &entry : entries)
    if (!module.lookupSymbol<func::FuncOp>(entry))
      return module.emitError("the module has no function @")
             << entry << " to serve as an entry of the program";
  json program = {{"format", "trellis-host-program"},
                  {"version", 1},
                  {"entries", entries},
                  {"functions", functions}};
  auto dump = [](const json &j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
  };
  return SerializedProgram{dump(program), dump(locations_)};
}

} // namespace

FailureOr<SerializedProgram>
serializeHostProgram(ModuleOp module, llvm::ArrayRef<std::string> entries) {
  return Serializer().run(module, entries);
}

} // namespace trellis
