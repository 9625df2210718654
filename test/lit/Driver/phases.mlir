// The graph phase runs canonicalize + CSE + the location check.
// RUN: trellisc %s --compile-to=graph | FileCheck %s --check-prefix=GRAPH
// GRAPH-LABEL: func.func @dup
// GRAPH-COUNT-1: trellis.linear
// GRAPH-NOT: trellis.linear
// GRAPH: trellis.add

// The trellis phase is the input itself (parsed and verified).
// RUN: trellisc %s --compile-to=trellis | FileCheck %s --check-prefix=INPUT
// INPUT-COUNT-2: trellis.linear

// --mlir-print-ir-after-all shows each pass of the phase.
// RUN: trellisc %s --compile-to=graph --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s --check-prefix=DUMP
// DUMP: IR Dump After Canonicalizer
// DUMP: IR Dump After CSE
// DUMP: IR Dump After TrellisVerifyLocations

// GPU-only phases do not apply to the CPU target.
// RUN: not trellisc %s --target=cpu --compile-to=fusion 2>&1 | FileCheck %s --check-prefix=GPUONLY
// GPUONLY: error: phase 'fusion' exists only for GPU targets

// Usage errors.
// RUN: not trellisc %s --compile-to=nonsense 2>&1 | FileCheck %s --check-prefix=BADPHASE
// BADPHASE: error: unknown phase 'nonsense' for --compile-to; the phases are: config, trace, trellis, graph, fusion, tiling, partition, codegen, plan, bundle
// RUN: not trellisc %s --compile-to=graph --emit=ptx 2>&1 | FileCheck %s --check-prefix=BADEMIT
// BADEMIT: error: --emit=ptx needs --compile-to=codegen or later
// RUN: not trellisc %s --compile-to=config 2>&1 | FileCheck %s --check-prefix=BEFORE
// BEFORE: error: --compile-to=config comes before the input's phase 'trellis'
// RUN: not trellisc %s.txt 2>&1 | FileCheck %s --check-prefix=KIND
// KIND: error: cannot tell the kind of input

func.func @dup(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %y = trellis.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %z = trellis.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %s = trellis.add %y, %z : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}
