//===- Program.h - The host program as the runtime reads it -----*- C++ -*-===//
//
// The parsed form of the bundle's "program" and "locations" sections (see
// lib/Target/HostProgram.h for the format). No LLVM: the runtime links this.
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_RUNTIME_PROGRAM_H
#define TRELLIS_RUNTIME_PROGRAM_H

#include "trellis/Support/HostTensor.h"
#include "trellis/Support/Result.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace trellis {

/// The static type of a value slot.
struct ValueType {
  enum class Kind { Tensor, Coords, NeighborMap, Segments };
  Kind kind = Kind::Tensor;
  DType dtype = DType::F32;    // tensors
  Shape shape;                 // tensors; -1 for a bounded dynamic dim
  std::vector<int64_t> bounds; // tensors: one per dynamic dim
  int64_t resolution = 0;      // coords
  int64_t bound = 0;           // coords, neighbor_map, segments
  int64_t kernel = 0;          // neighbor_map
  int64_t maxLength = 0;       // segments

  std::string str() const;
};

struct Region;

/// How an op runs, as the compiler wrote it from the op's marker traits
/// (dialect/TrellisOps.td; lib/Target/HostProgram.cpp): the runtime decides
/// by the class, never by matching op names; the name then selects the op's
/// own command within its class.
enum class OpClass {
  Unspecified, ///< a program written before the classes (the CPU runs it)
  Storage,     ///< no code: a view, a weight, a constant
  Region,      ///< runs its regions (the sampler)
  HostBound,   ///< a function of the voxel coordinates alone, on the host
  Runtime,     ///< the runtime's own code (coordinate structures, occupancy)
  Library,     ///< a library or runtime kernel call (GEMM, attention)
  Kernel,      ///< a generated kernel
  Conv,        ///< a convolution: a generated kernel or GEMMs, per its form
};

/// The class's name in the host program ("storage", ...), and back.
const char *opClassName(OpClass c);
std::optional<OpClass> parseOpClass(const std::string &name);

/// One operation: op name, operand and result slots, attributes.
struct Instr {
  std::string op;
  OpClass opClass = OpClass::Unspecified;
  std::vector<int> in, out;
  std::vector<ValueType> types;
  nlohmann::json attrs;
  int loc = -1;
  std::vector<Region> regions;

  /// Typed attribute access; errors name the op and the attribute.
  Result<int64_t> intAttr(const char *name) const;
  Result<double> floatAttr(const char *name) const;
  Result<std::string> stringAttr(const char *name) const;
  Result<std::vector<int64_t>> intArrayAttr(const char *name) const;
  Result<std::vector<double>> floatArrayAttr(const char *name) const;
  bool hasAttr(const char *name) const { return attrs.contains(name); }
};

struct Region {
  std::vector<int> args;
  std::vector<ValueType> argTypes;
  std::vector<Instr> body;
  std::vector<int> yield;
};

struct Function {
  std::string name;
  std::vector<int> args;
  std::vector<ValueType> argTypes;
  std::vector<int> results;
  std::vector<Instr> body;
  int numSlots = 0;
  int loc = -1;
};

/// Where an op came from (one entry of the location table).
struct SourceLocation {
  std::string module;     // "slat_flow_model/blocks.3.self_attn"
  std::string config;     // "pipeline.json:12:7"
  std::string source;     // "lib/Models/SLatFlow.cpp:88:3" or "model.py:12:5"
  std::string sourceKind; // "builder" or "user"
  std::string text;       // the MLIR location as printed
};

class Program {
public:
  /// Parses the "program" and "locations" sections; `what` names the bundle.
  static Result<Program> parse(const std::string &programJson,
                               const std::string &locationsJson,
                               const std::string &what);

  /// The functions the runtime may call.
  const std::vector<std::string> &entries() const { return entries_; }
  bool hasEntry(const std::string &name) const;
  const std::vector<Function> &functions() const { return functions_; }
  const Function *find(const std::string &name) const;
  const std::vector<SourceLocation> &locations() const { return locations_; }
  /// "in slat_flow_model/blocks.3.self_attn (traced at …, config …)".
  std::string describe(int loc) const;

private:
  std::vector<std::string> entries_;
  std::vector<Function> functions_;
  std::vector<SourceLocation> locations_;
};

} // namespace trellis

#endif // TRELLIS_RUNTIME_PROGRAM_H
