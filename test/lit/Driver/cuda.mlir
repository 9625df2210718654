// --target=cuda (the default): fusion, tiling, partition and codegen annotate
// the ops;
// --emit=ptx prints the generated kernels; the bundle carries PTX and the
// attention kernel images, and names the GPU entry.
// RUN: trellisc %s --compile-to=codegen | FileCheck %s --check-prefix=IR
// IR-LABEL: func.func @main
// IR-SAME: trellis.device = "cuda"
// IR: trellis.linear {{.*}}activation = "gelu_tanh"
// IR: trellis.layer_norm {{.*}}trellis.launch = {block = array<i64: {{.*}}>, grid = array<i64: {{.*}}>, kernel = "[[LN:layer_norm_f16_[0-9a-z_]+]]"
// IR: trellis.attention {{.*}}tiles = ["trellis_attn_sm90_d64_m128_n64_s4", "trellis_attn_sm80_d64_m128_n64_s2", "trellis_attn_sm75_d64_m64_n64_s1"]

// The tiling phase: --mlp-chunk-tokens splits the MLP over tokens
// (trellis-chunk-mlp), as does --mlp-hidden-mib (a hidden row of one token
// is 256 f16 = 512 bytes: 1 MiB holds all 128 tokens, no split); the
// attention's tiles are chosen for --tile-for-sms.
// RUN: trellisc %s --compile-to=tiling --mlp-chunk-tokens=64 | FileCheck %s --check-prefix=CHUNK
// CHUNK-COUNT-2: trellis.linear {{.*}} -> tensor<1x64x256xf16>
// CHUNK: trellis.concat
// CHUNK: trellis.attention {{.*}}tiles =
// RUN: trellisc %s --compile-to=fusion --mlp-chunk-tokens=64 | FileCheck %s --check-prefix=FUSION
// FUSION-NOT: trellis.concat
// FUSION-NOT: tiles =
// RUN: trellisc %s --compile-to=tiling --mlp-hidden-mib=1 | FileCheck %s --check-prefix=BUDGET
// BUDGET-NOT: trellis.concat

// RUN: trellisc %s --compile-to=codegen --emit=ptx -o %t.ptx
// RUN: FileCheck %s --input-file=%t.ptx --check-prefix=PTX
// PTX: .target sm_90a
// PTX: .entry layer_norm_f16_

// --dump-phases-to writes the IR after every phase of the run and the PTX.
// RUN: rm -rf %t.dump
// RUN: trellisc %s --compile-to=codegen --dump-phases-to=%t.dump -o /dev/null
// RUN: ls %t.dump | FileCheck %s --check-prefix=DUMP
// DUMP: 02-trellis.mlir
// DUMP-NEXT: 03-graph.mlir
// DUMP-NEXT: 04-fusion.mlir
// DUMP-NEXT: 05-tiling.mlir
// DUMP-NEXT: 06-partition.mlir
// DUMP-NEXT: 07-codegen.mlir
// DUMP-NEXT: kernels.compute_75.ptx
// DUMP-NEXT: kernels.sm_90a.ptx
// RUN: FileCheck %s --input-file=%t.dump/06-partition.mlir --check-prefix=DUMPPART
// DUMPPART: trellis.device = "cuda"
// DUMPPART-NOT: trellis.launch
// RUN: FileCheck %s --input-file=%t.dump/kernels.sm_90a.ptx --check-prefix=PTX

// RUN: trellisc %s --emit=bundle -o %t.bundle
// RUN: trellis-runtime --bundle %t.bundle --inspect | FileCheck %s --check-prefix=BUNDLE
// BUNDLE: "gpu_entries":["main"]
// BUNDLE-SAME: "target":"cuda"
// BUNDLE: ptx.sm_90a:
// BUNDLE: ptx.compute_75:
// BUNDLE: attn.sm_90a:
// BUNDLE: attn.compute_80:
// BUNDLE: attn.compute_75:

// What the GPU cannot run is an error at the user's line, before any file.
// RUN: sed 's/1x128x1x64xf16/1x128x4x16xf16/g' %s > %t.d16.mlir
// RUN: not trellisc %t.d16.mlir -o %t.d16.exe 2>&1 | FileCheck %s --check-prefix=D16
// D16: model.py:7:3: error: 'trellis.attention' op cannot run on the GPU: no attention kernel of the sm_90a family for head dim 16 (runtime/kernels/attention.h has 64, 80 and 128)
// D16-NOT: see current operation
// RUN: not ls %t.d16.exe
#loc = loc(fused["user_model/block", "user"("model.py":7:3)])
func.func @main(%x: tensor<1x128x64xf16>, %w1: tensor<256x64xf16>, %b1: tensor<256xf16>,
                %w2: tensor<64x256xf16>) -> tensor<1x128x1x64xf16> {
  %h = trellis.linear %x, %w1, %b1 : (tensor<1x128x64xf16>, tensor<256x64xf16>, tensor<256xf16>) -> tensor<1x128x256xf16> loc(#loc)
  %g = trellis.gelu %h : tensor<1x128x256xf16> loc(#loc)
  %y = trellis.linear %g, %w2 : (tensor<1x128x256xf16>, tensor<64x256xf16>) -> tensor<1x128x64xf16> loc(#loc)
  %n = trellis.layer_norm %y {eps = 1.0e-6 : f64} : (tensor<1x128x64xf16>) -> tensor<1x128x64xf16> loc(#loc)
  %q = trellis.reshape %n : (tensor<1x128x64xf16>) -> tensor<1x128x1x64xf16> loc(#loc)
  %a = trellis.attention %q, %q, %q {scale = 0.125 : f64} : (tensor<1x128x1x64xf16>, tensor<1x128x1x64xf16>, tensor<1x128x1x64xf16>) -> tensor<1x128x1x64xf16> loc(#loc)
  return %a : tensor<1x128x1x64xf16>
}
