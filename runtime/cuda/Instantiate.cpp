//===- Instantiate.cpp - Inlines the call graph into one op tree ----------===//
//
// The first step of preparing an entry function: every func.call is inlined,
// so that the function becomes one tree of Nodes (sampler regions nested as
// Bodies) over one global numbering of value slots, which the memory plan
// and the command builders work on.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuExecutorImpl.h"

namespace trellis {

Status GpuExecutor::Impl::instantiate(Prepared &p, const Function &fn,
                                      const std::vector<int> &argSlots,
                                      std::vector<int> &resultSlots,
                                      Body &into) const {
  std::vector<int> map(size_t(fn.numSlots), -1);
  for (size_t i = 0; i < fn.args.size(); ++i)
    map[fn.args[i]] = argSlots[i];
  TRELLIS_RETURN_IF_ERROR(instantiateBody(p, fn.body, map, into));
  resultSlots.clear();
  for (int r : fn.results) {
    if (r < 0 || map[r] < 0)
      return Error{"function '" + fn.name + "' returns an undefined value"};
    resultSlots.push_back(map[r]);
  }
  return Status::ok();
}

Status GpuExecutor::Impl::instantiateBody(Prepared &p,
                                          const std::vector<Instr> &instrs,
                                          std::vector<int> &map,
                                          Body &into) const {
  auto mapped = [&](int local) -> Result<int> {
    if (local < 0 || size_t(local) >= map.size() || map[local] < 0)
      return Error{"uses a value that is not defined before it"};
    return map[local];
  };
  for (const Instr &instr : instrs) {
    if (instr.op == "func.call") {
      auto callee = instr.stringAttr("callee");
      if (!callee)
        return opError(instr, callee.message());
      const Function *fn = program.find(*callee);
      if (!fn)
        return opError(instr, "calls '" + *callee + "', which is missing");
      std::vector<int> args, results;
      for (int s : instr.in) {
        auto g = mapped(s);
        if (!g)
          return opError(instr, g.message());
        args.push_back(*g);
      }
      TRELLIS_RETURN_IF_ERROR(instantiate(p, *fn, args, results, into));
      for (size_t i = 0; i < instr.out.size(); ++i)
        map[instr.out[i]] = results.at(i);
      continue;
    }
    Node node;
    node.instr = &instr;
    for (int s : instr.in) {
      auto g = mapped(s);
      if (!g)
        return opError(instr, g.message());
      node.in.push_back(*g);
    }
    for (size_t i = 0; i < instr.out.size(); ++i) {
      int g = newSlot(p, instr.types.at(i));
      map[instr.out[i]] = g;
      node.out.push_back(g);
    }
    for (const Region &region : instr.regions) {
      Body body;
      for (size_t i = 0; i < region.args.size(); ++i) {
        int g = newSlot(p, region.argTypes.at(i));
        map[region.args[i]] = g;
        body.args.push_back(g);
      }
      TRELLIS_RETURN_IF_ERROR(instantiateBody(p, region.body, map, body));
      for (int y : region.yield) {
        auto g = mapped(y);
        if (!g)
          return opError(instr, "yields " + g.message());
        body.yields.push_back(*g);
      }
      node.regions.push_back(std::move(body));
    }
    into.nodes.push_back(std::move(node));
  }
  return Status::ok();
}

} // namespace trellis
