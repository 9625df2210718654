//===- Program.cpp - The host program as the runtime reads it -------------===//
#include "trellis/Runtime/Program.h"

namespace trellis {

using json = nlohmann::json;

namespace {

/// Limits on what a bundle may ask for: slots per function, the bytes of one
/// tensor (at its bounds).
constexpr int64_t kMaxSlots = int64_t(1) << 24;
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 38; // 256 GiB

/// Parse errors carry the JSON path inside the program section.
struct Parser {
  std::string what;
  std::optional<Error> failure;

  void fail(const std::string &path, const std::string &message) {
    if (!failure)
      failure = Error{"malformed host program in '" + what + "' at " + path +
                      ": " + message};
  }

  const json *field(const json &obj, const char *name, const std::string &path,
                    json::value_t type) {
    if (!obj.is_object()) {
      fail(path, "expected an object");
      return nullptr;
    }
    auto it = obj.find(name);
    if (it == obj.end()) {
      fail(path, std::string("missing '") + name + "'");
      return nullptr;
    }
    bool ok = it->type() == type || (type == json::value_t::number_integer &&
                                     it->is_number_unsigned());
    if (!ok) {
      fail(path + "." + name, "has the wrong JSON type");
      return nullptr;
    }
    return &*it;
  }

  std::vector<int> slots(const json &obj, const char *name,
                         const std::string &path) {
    std::vector<int> out;
    if (const json *arr = field(obj, name, path, json::value_t::array))
      for (const json &v : *arr) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
            v.get<int64_t>() >= kMaxSlots) {
          fail(path + "." + name,
               "expected slot numbers in 0.." + std::to_string(kMaxSlots - 1));
          return out;
        }
        out.push_back(v.get<int>());
      }
    return out;
  }

  ValueType type(const json &j, const std::string &path) {
    ValueType t;
    const json *kind = field(j, "kind", path, json::value_t::string);
    if (!kind)
      return t;
    std::string k = *kind;
    auto num = [&](const char *name) -> int64_t {
      const json *v = field(j, name, path, json::value_t::number_integer);
      return v ? v->get<int64_t>() : 0;
    };
    if (k == "tensor") {
      t.kind = ValueType::Kind::Tensor;
      const json *dtype = field(j, "dtype", path, json::value_t::string);
      if (!dtype)
        return t;
      std::string d = *dtype;
      if (d == "f16")
        t.dtype = DType::F16;
      else if (d == "f32")
        t.dtype = DType::F32;
      else if (d == "i32")
        t.dtype = DType::I32;
      else if (d == "i64")
        t.dtype = DType::I64;
      else
        fail(path + ".dtype", "unknown element type '" + d + "'");
      // Dimensions: integers (-1 for a dynamic one), bounds: integers >= 1;
      // ProgramChecker bounds their product.
      auto dims = [&](const json &arr, const char *name, int64_t min,
                      std::vector<int64_t> &into) {
        if (!arr.is_array())
          return fail(path + "." + name, "expected an array of integers");
        for (const json &v : arr) {
          if (!v.is_number_integer() || v.get<int64_t>() < min)
            return fail(path + "." + name,
                        "expected integers >= " + std::to_string(min) +
                            ", found " + v.dump());
          into.push_back(v.get<int64_t>());
        }
      };
      if (const json *shape = field(j, "shape", path, json::value_t::array))
        dims(*shape, "shape", -1, t.shape);
      if (j.contains("bounds"))
        dims(j["bounds"], "bounds", 1, t.bounds);
    } else if (k == "coords") {
      t.kind = ValueType::Kind::Coords;
      t.resolution = num("resolution");
      t.bound = num("bound");
    } else if (k == "neighbor_map") {
      t.kind = ValueType::Kind::NeighborMap;
      t.kernel = num("kernel");
      t.bound = num("bound");
    } else if (k == "segments") {
      t.kind = ValueType::Kind::Segments;
      t.maxLength = num("max_length");
      t.bound = num("bound");
    } else {
      fail(path + ".kind", "unknown value kind '" + k + "'");
    }
    return t;
  }

  std::vector<Instr> body(const json &arr, const std::string &path) {
    std::vector<Instr> out;
    if (!arr.is_array()) {
      fail(path, "expected an array of ops");
      return out;
    }
    for (size_t i = 0; i < arr.size() && !failure; ++i) {
      std::string p = path + "[" + std::to_string(i) + "]";
      const json &j = arr[i];
      Instr instr;
      if (const json *op = field(j, "op", p, json::value_t::string))
        instr.op = *op;
      if (auto c = j.find("class"); c != j.end()) {
        std::optional<OpClass> parsed =
            c->is_string() ? parseOpClass(c->get<std::string>()) : std::nullopt;
        if (!parsed)
          fail(p, "has an unknown op class " + c->dump());
        else
          instr.opClass = *parsed;
      }
      instr.in = slots(j, "in", p);
      instr.out = slots(j, "out", p);
      if (const json *types = field(j, "types", p, json::value_t::array))
        for (size_t k = 0; k < types->size(); ++k)
          instr.types.push_back(
              type((*types)[k], p + ".types[" + std::to_string(k) + "]"));
      if (instr.types.size() != instr.out.size())
        fail(p, "has " + std::to_string(instr.out.size()) + " results but " +
                    std::to_string(instr.types.size()) + " types");
      if (const json *attrs = field(j, "attrs", p, json::value_t::object))
        instr.attrs = *attrs;
      if (const json *loc = field(j, "loc", p, json::value_t::number_integer))
        instr.loc = loc->get<int>();
      if (j.contains("regions")) {
        const json &regions = j["regions"];
        for (size_t r = 0; r < regions.size(); ++r) {
          std::string rp = p + ".regions[" + std::to_string(r) + "]";
          Region region;
          region.args = slots(regions[r], "args", rp);
          if (const json *ts =
                  field(regions[r], "arg_types", rp, json::value_t::array))
            for (const json &t : *ts)
              region.argTypes.push_back(type(t, rp + ".arg_types"));
          if (const json *b =
                  field(regions[r], "body", rp, json::value_t::array))
            region.body = body(*b, rp + ".body");
          region.yield = slots(regions[r], "yield", rp);
          instr.regions.push_back(std::move(region));
        }
      }
      out.push_back(std::move(instr));
    }
    return out;
  }
};

/// Checks what the parser cannot see one field at a time: every slot below
/// its function's num_slots, every location index in the table, sampler
/// step counts and tensor sizes within what a run can allocate. A bundle is
/// untrusted input: nothing read from it sizes an allocation unchecked.
class ProgramChecker {
public:
  ProgramChecker(const Function &fn, size_t numLocations)
      : fn_(fn), numLocations_(numLocations) {}

  Status check() {
    const std::string where = "function '" + fn_.name + "'";
    if (fn_.numSlots < 0 || fn_.numSlots > kMaxSlots)
      return Error{where + ": num_slots " + std::to_string(fn_.numSlots) +
                   " is outside 0.." + std::to_string(kMaxSlots)};
    TRELLIS_RETURN_IF_ERROR(slots(fn_.args, where + " arguments"));
    TRELLIS_RETURN_IF_ERROR(slots(fn_.results, where + " results"));
    for (const ValueType &t : fn_.argTypes)
      TRELLIS_RETURN_IF_ERROR(type(t, where + " argument"));
    TRELLIS_RETURN_IF_ERROR(location(fn_.loc, where));
    return body(fn_.body, where);
  }

private:
  Status slots(const std::vector<int> &s, const std::string &what) const {
    for (int v : s)
      if (v >= fn_.numSlots)
        return Error{what + ": slot " + std::to_string(v) +
                     " is not below num_slots " + std::to_string(fn_.numSlots)};
    return Status::ok();
  }
  Status location(int loc, const std::string &what) const {
    if (loc < -1 || (loc >= 0 && size_t(loc) >= numLocations_))
      return Error{what + ": location " + std::to_string(loc) +
                   " is not in the location table (" +
                   std::to_string(numLocations_) + " entries)"};
    return Status::ok();
  }
  /// A tensor type whose static size (dynamic dimensions at their bounds)
  /// fits kMaxTensorBytes, without overflow.
  static Status type(const ValueType &t, const std::string &what) {
    if (t.kind != ValueType::Kind::Tensor)
      return Status::ok();
    size_t bound = 0;
    uint64_t bytes = dtypeSize(t.dtype);
    for (int64_t d : t.shape) {
      int64_t n = d;
      if (d < 0)
        n = bound < t.bounds.size() ? t.bounds[bound++] : 1;
      if (n < 0 || (n > 0 && bytes > kMaxTensorBytes / uint64_t(n)))
        return Error{what + ": tensor type " + t.str() +
                     " is larger than a run can hold (" +
                     std::to_string(kMaxTensorBytes >> 30) + " GiB)"};
      bytes *= uint64_t(n);
    }
    return Status::ok();
  }
  Status body(const std::vector<Instr> &instrs, const std::string &where) {
    for (size_t i = 0; i < instrs.size(); ++i) {
      const Instr &instr = instrs[i];
      const std::string what =
          where + ", op " + std::to_string(i) + " '" + instr.op + "'";
      TRELLIS_RETURN_IF_ERROR(slots(instr.in, what + " operands"));
      TRELLIS_RETURN_IF_ERROR(slots(instr.out, what + " results"));
      TRELLIS_RETURN_IF_ERROR(location(instr.loc, what));
      for (const ValueType &t : instr.types)
        TRELLIS_RETURN_IF_ERROR(type(t, what));
      // pipeline.json's cap on sampler steps (lib/Config).
      if (instr.attrs.contains("steps") &&
          (!instr.attrs["steps"].is_number_integer() ||
           instr.attrs["steps"].get<int64_t>() < 1 ||
           instr.attrs["steps"].get<int64_t>() > 10000))
        return Error{what + ": steps must be an integer in 1..10000, found " +
                     instr.attrs["steps"].dump()};
      for (const Region &r : instr.regions) {
        TRELLIS_RETURN_IF_ERROR(slots(r.args, what + " region arguments"));
        TRELLIS_RETURN_IF_ERROR(slots(r.yield, what + " region yields"));
        for (const ValueType &t : r.argTypes)
          TRELLIS_RETURN_IF_ERROR(type(t, what + " region argument"));
        TRELLIS_RETURN_IF_ERROR(body(r.body, what + " region"));
      }
    }
    return Status::ok();
  }

  const Function &fn_;
  size_t numLocations_;
};

std::string attrError(const Instr &instr, const char *name,
                      const char *expected) {
  return "op '" + instr.op + "': attribute '" + name + "' " +
         (instr.attrs.contains(name) ? std::string("is not ") + expected
                                     : std::string("is missing"));
}

} // namespace

std::string ValueType::str() const {
  switch (kind) {
  case Kind::Tensor: {
    std::string s = "tensor<";
    for (int64_t d : shape)
      s += (d < 0 ? std::string("?") : std::to_string(d)) + "x";
    return s + std::string(dtypeName(dtype)) + ">";
  }
  case Kind::Coords:
    return "coords<resolution " + std::to_string(resolution) + ", bound " +
           std::to_string(bound) + ">";
  case Kind::NeighborMap:
    return "neighbor_map<kernel " + std::to_string(kernel) + ">";
  case Kind::Segments:
    return "segments<max_length " + std::to_string(maxLength) + ">";
  }
  return "?";
}

namespace {
constexpr struct {
  OpClass value;
  const char *name;
} kOpClasses[] = {{OpClass::Storage, "storage"},
                  {OpClass::Region, "region"},
                  {OpClass::HostBound, "host_bound"},
                  {OpClass::Runtime, "runtime"},
                  {OpClass::Library, "library"},
                  {OpClass::Kernel, "kernel"},
                  {OpClass::Conv, "conv"}};
} // namespace

const char *opClassName(OpClass c) {
  for (const auto &k : kOpClasses)
    if (k.value == c)
      return k.name;
  return "unspecified";
}

std::optional<OpClass> parseOpClass(const std::string &name) {
  for (const auto &k : kOpClasses)
    if (name == k.name)
      return k.value;
  return std::nullopt;
}

Result<int64_t> Instr::intAttr(const char *name) const {
  auto it = attrs.find(name);
  if (it == attrs.end() || !it->is_number_integer())
    return Error{attrError(*this, name, "an integer")};
  return it->get<int64_t>();
}

Result<double> Instr::floatAttr(const char *name) const {
  auto it = attrs.find(name);
  if (it == attrs.end() || !it->is_number())
    return Error{attrError(*this, name, "a number")};
  return it->get<double>();
}

Result<std::string> Instr::stringAttr(const char *name) const {
  auto it = attrs.find(name);
  if (it == attrs.end() || !it->is_string())
    return Error{attrError(*this, name, "a string")};
  return it->get<std::string>();
}

Result<std::vector<int64_t>> Instr::intArrayAttr(const char *name) const {
  auto it = attrs.find(name);
  if (it == attrs.end() || !it->is_array())
    return Error{attrError(*this, name, "an integer array")};
  std::vector<int64_t> out;
  for (const json &v : *it) {
    if (!v.is_number_integer())
      return Error{attrError(*this, name, "an integer array")};
    out.push_back(v.get<int64_t>());
  }
  return out;
}

Result<std::vector<double>> Instr::floatArrayAttr(const char *name) const {
  auto it = attrs.find(name);
  if (it == attrs.end() || !it->is_array())
    return Error{attrError(*this, name, "a number array")};
  std::vector<double> out;
  for (const json &v : *it) {
    if (!v.is_number())
      return Error{attrError(*this, name, "a number array")};
    out.push_back(v.get<double>());
  }
  return out;
}

Result<Program> Program::parse(const std::string &programJson,
                               const std::string &locationsJson,
                               const std::string &what) {
  json root = json::parse(programJson, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded())
    return Error{"the host program in '" + what + "' is not valid JSON"};
  Parser p{what, std::nullopt};
  Program program;
  if (const json *fmt = p.field(root, "format", "$", json::value_t::string);
      fmt && *fmt != "trellis-host-program")
    p.fail("$.format", "expected \"trellis-host-program\"");
  if (const json *v =
          p.field(root, "version", "$", json::value_t::number_integer);
      v && v->get<int>() != 1)
    p.fail("$.version", "this runtime reads version 1, found " + v->dump());
  if (const json *e = p.field(root, "entries", "$", json::value_t::array))
    for (const json &name : *e) {
      if (!name.is_string()) {
        p.fail("$.entries", "expected function names");
        break;
      }
      program.entries_.push_back(name.get<std::string>());
    }
  if (const json *fns = p.field(root, "functions", "$", json::value_t::array))
    for (size_t i = 0; i < fns->size() && !p.failure; ++i) {
      const json &j = (*fns)[i];
      std::string path = "$.functions[" + std::to_string(i) + "]";
      Function f;
      if (const json *n = p.field(j, "name", path, json::value_t::string))
        f.name = *n;
      f.args = p.slots(j, "args", path);
      if (const json *ts = p.field(j, "arg_types", path, json::value_t::array))
        for (const json &t : *ts)
          f.argTypes.push_back(p.type(t, path + ".arg_types"));
      f.results = p.slots(j, "results", path);
      if (const json *b = p.field(j, "body", path, json::value_t::array))
        f.body = p.body(*b, path + ".body");
      if (const json *n =
              p.field(j, "num_slots", path, json::value_t::number_integer))
        f.numSlots = n->get<int>();
      if (j.contains("loc") && j["loc"].is_number_integer())
        f.loc = j["loc"].get<int>();
      program.functions_.push_back(std::move(f));
    }
  if (p.failure)
    return *p.failure;
  for (const std::string &e : program.entries_)
    if (!program.find(e))
      return Error{"the host program in '" + what + "' names entry function '" +
                   e + "' but has no such function"};

  json locs = json::parse(locationsJson, nullptr, false);
  if (locs.is_discarded() || !locs.is_array())
    return Error{"the location table in '" + what + "' is not a JSON array"};
  for (const json &l : locs) {
    SourceLocation loc;
    auto get = [&](const char *k) {
      return l.contains(k) && l[k].is_string() ? l[k].get<std::string>()
                                               : std::string();
    };
    loc.module = get("module");
    loc.config = get("config");
    loc.source = get("source");
    loc.sourceKind = get("source_kind");
    loc.text = get("text");
    program.locations_.push_back(std::move(loc));
  }
  for (const Function &f : program.functions_)
    if (Status st = ProgramChecker(f, program.locations_.size()).check(); !st)
      return Error{"the host program in '" + what +
                   "' is malformed: " + st.message()};
  return program;
}

bool Program::hasEntry(const std::string &name) const {
  for (const std::string &e : entries_)
    if (e == name)
      return true;
  return false;
}

const Function *Program::find(const std::string &name) const {
  for (const Function &f : functions_)
    if (f.name == name)
      return &f;
  return nullptr;
}

std::string Program::describe(int loc) const {
  if (loc < 0 || size_t(loc) >= locations_.size())
    return "(no source location)";
  const SourceLocation &l = locations_[loc];
  std::string s;
  if (!l.module.empty())
    s += "in " + l.module;
  if (!l.source.empty())
    s += std::string(s.empty() ? "" : ", ") +
         (l.sourceKind == "user" ? "at " : "traced at ") + l.source;
  if (!l.config.empty())
    s += std::string(s.empty() ? "" : ", ") + "shaped by " + l.config;
  return s.empty() ? l.text : s;
}

} // namespace trellis
