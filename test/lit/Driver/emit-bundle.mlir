// --target=cpu compiles through plan and bundle: the bundle holds the host
// program (generic over ops), the location table and metadata.
// RUN: trellisc %s --target=cpu --emit=bundle -o %t.bundle
// RUN: FileCheck %s --input-file=%t.bundle
// CHECK: TRELLISB
// CHECK: "entries":["main"]
// CHECK-SAME: "op":"trellis.linear"
// CHECK-SAME: "op":"trellis.silu"
// CHECK: "module":"slat_decoder_gs/blocks.0.mlp"
// CHECK-SAME: "source":"model.py:12:5","source_kind":"user"
// CHECK: "target":"cpu"

// A program needs an entry function.
// RUN: sed 's/@main/@other/' %s > %t.noentry.mlir
// RUN: not trellisc %t.noentry.mlir --target=cpu --emit=bundle -o %t.bad 2>&1 | FileCheck %s --check-prefix=NOENTRY
// NOENTRY: error: the module has no function @main
// RUN: not ls %t.bad

#loc = loc(fused["slat_decoder_gs/blocks.0.mlp", "user"("model.py":12:5)])
func.func @main(%x: tensor<?x8xf32, #trellis.bounds<[64]>>, %w: tensor<16x8xf32>) -> tensor<?x16xf32, #trellis.bounds<[64]>> {
  %y = trellis.linear %x, %w : (tensor<?x8xf32, #trellis.bounds<[64]>>, tensor<16x8xf32>) -> tensor<?x16xf32, #trellis.bounds<[64]>> loc(#loc)
  %s = trellis.silu %y : tensor<?x16xf32, #trellis.bounds<[64]>>
  return %s : tensor<?x16xf32, #trellis.bounds<[64]>>
}
