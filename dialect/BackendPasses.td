//===- BackendPasses.td - The GPU backend's passes ---------*- tablegen -*-===//
//
// The passes of the partition and codegen phases (lib/Conversion,
// lib/Codegen), declared apart from Passes.td's graph and fusion passes so
// that lib/Transforms does not link the backend: registerTrellisBackendPasses()
// is called where both are linked (trellis-opt).
//
//===----------------------------------------------------------------------===//
#ifndef TRELLIS_BACKEND_PASSES_TD
#define TRELLIS_BACKEND_PASSES_TD

include "mlir/Pass/PassBase.td"

def TrellisPartitionCuda : Pass<"trellis-partition-cuda", "ModuleOp"> {
  let summary = "Mark the GPU functions and rewrite their ops for the GPU";
  let description = [{
    Marks the GPU entry functions and their callees (`trellis.device =
    "cuda"`) and rewrites their ops into forms the GPU backend runs: a
    conv3d's bias into a broadcast add, the sparse resampling ops
    (`sparse.upsample`, `sparse.downsample`, `sparse.batch_broadcast`) into
    an index computed from the coordinates at bind time and a gather kernel
    (docs/design/gpu-backend.md).
  }];
  let options = [
    ListOption<"entries", "entries", "std::string",
               "GPU entry functions (default: ss_stage)">
  ];
}

def TrellisGpuCodegen : Pass<"trellis-gpu-codegen", "ModuleOp"> {
  let summary = "Classify and annotate the ops of CUDA functions and generate "
                "their kernels as PTX";
  let description = [{
    Classifies every op of the CUDA functions by its traits
    (lib/Codegen/Classify.cpp), builds one kernel per distinct generated op
    (one file per kernel family), annotates the ops (`trellis.launch`, ...;
    docs/design/gpu-backend.md) and lowers the
    kernels to PTX (sm_90a, and compute_75 unless `portable=false`).
  }];
  let options = [
    Option<"ptxOut", "ptx-out", "std::string", /*default=*/"",
           "Write the sm_90a PTX to a file">,
    Option<"dumpKernels", "dump-kernels", "bool", /*default=*/"false",
           "Print the kernels' module before lowering">,
    Option<"cudaPath", "cuda-path", "std::string", /*default=*/"",
           "CUDA toolkit with libdevice (default: $CUDA_ROOT, $CUDA_HOME, "
           "$CUDA_PATH, /usr/local/cuda)">,
    Option<"portable", "portable", "bool", /*default=*/"true",
           "Also lower to compute_75 PTX">
  ];
}

#endif // TRELLIS_BACKEND_PASSES_TD
