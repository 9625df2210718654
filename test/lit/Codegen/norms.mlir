// RUN: trellis-opt --trellis-gpu-codegen=dump-kernels %s | FileCheck %s
// RUN: trellis-opt --trellis-gpu-codegen %s | FileCheck %s --check-prefix=ANN

// Row reductions over the last axis: G lanes per row, K vectors of V
// elements per lane in registers, f32 statistics reduced with shuffles.
// LN over 1024 f16 channels: V = 8, a warp per row (xor 16, 8, 4, 2, 1 for
// the mean and again for the variance), 8 rows per 256-thread block.
// CHECK-LABEL: gpu.func @layer_norm_f16_2x4096x1024_k0
// CHECK-COUNT-4: vector.load {{.*}} : memref<8388608xf16>, vector<8xf16>
// CHECK: gpu.shuffle  xor {{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK: arith.divf
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: math.sqrt
// CHECK: scf.if
// CHECK-COUNT-4: vector.store {{.*}} : memref<8388608xf16>, vector<8xf16>
// With the f32 affine parameters: γ and β are staged in workgroup memory by
// the block (16-byte copies), read from there after a barrier.
// CHECK-LABEL: gpu.func @layer_norm_f16_1x512x128_k1
// CHECK-SAME: (%{{.*}}: memref<65536xf16>, %{{.*}}: memref<128xf32>, %{{.*}}: memref<128xf32>, %{{.*}}: memref<65536xf16>)
// CHECK-SAME: workgroup(%{{.*}} : memref<256xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK: vector.load {{.*}} : memref<128xf32>, vector<4xf32>
// CHECK: vector.store {{.*}} : memref<256xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: gpu.shuffle  xor
// CHECK: gpu.barrier
// CHECK: vector.load {{.*}} : memref<256xf32, #gpu.address_space<workgroup>>, vector<8xf32>
// CHECK: scf.if
// head_rms_norm over d = 64: 8 lanes per head vector; γ[h] loaded with x.
// CHECK-LABEL: gpu.func @head_rms_norm_f16_2x4096x16x64_k2
// CHECK-SAME: (%{{.*}}: memref<8388608xf16>, %{{.*}}: memref<1024xf32>, %{{.*}}: memref<8388608xf16>)
// CHECK: vector.load {{.*}} : memref<1024xf32>, vector<8xf32>
// CHECK: gpu.shuffle  xor
// CHECK: arith.maximumf
// Channel-first LN (the SS decoder): 128 position threads x 2 channel slices
// per block, 2 positions per vector (C = 32 -> 16 vectors per thread, x read
// once), slice partial sums combined in workgroup memory, no loops.
// CHECK-LABEL: gpu.func @layer_norm_f16_1x32x16x16x16_k3
// CHECK-SAME: workgroup(%{{.*}} : memref<1024xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-NOT: scf.for
// CHECK-COUNT-16: vector.load {{.*}} : memref<131072xf16>, vector<2xf16>
// CHECK: gpu.barrier
// CHECK: math.sqrt
// CHECK-NOT: gpu.shuffle
// CHECK: scf.if
// CHECK-COUNT-16: vector.store {{.*}} : memref<131072xf16>, vector<2xf16>
// CHECK-LABEL: gpu.func @layer_norm_f32_1x16x32x32x32_k4
// Long rows fall back to a loop over the row (32 lanes).
// CHECK-LABEL: gpu.func @layer_norm_f32_2x16384_k5
// CHECK: scf.for
// CHECK: gpu.shuffle  xor
// CHECK-LABEL: gpu.func @softmax_f16_4x1374_k6
// CHECK: arith.maximumf
// layer_norm_modulate: the LN statistics, then ·(1 + scale) + shift with the
// [B, C] vectors of the row's sample (row / L), one rounding; the vectors are
// loaded with x, before the reductions.
// CHECK-LABEL: gpu.func @layer_norm_modulate_f16_2x4096x1024_k7
// CHECK-SAME: (%{{.*}}: memref<8388608xf16>, %{{.*}}: memref<2048xf16>, %{{.*}}: memref<2048xf16>, %{{.*}}: memref<8388608xf16>)
// CHECK-COUNT-4: vector.load {{.*}} : memref<8388608xf16>, vector<8xf16>
// CHECK: arith.divui %{{.*}}, %c4096
// CHECK-COUNT-8: vector.load {{.*}} : memref<2048xf16>, vector<8xf16>
// CHECK-COUNT-10: gpu.shuffle  xor
// CHECK-NOT: arith.truncf
// CHECK: arith.addf
// CHECK: arith.truncf

// ANN-LABEL: func.func @norms
// ANN: trellis.layer_norm {{.*}}grid = array<i64: 1024, 1, 1>, kernel = "layer_norm_f16_2x4096x1024_k0"
// ANN: trellis.layer_norm {{.*}}grid = array<i64: 32, 1, 1>, kernel = "layer_norm_f16_1x512x128_k1"
// ANN: trellis.head_rms_norm {{.*}}grid = array<i64: 4096, 1, 1>, kernel = "head_rms_norm_f16_2x4096x16x64_k2"
// ANN: trellis.layer_norm {{.*}}grid = array<i64: 16, 1, 1>, kernel = "layer_norm_f16_1x32x16x16x16_k3"
// ANN: trellis.layer_norm {{.*}}grid = array<i64: 64, 1, 1>, kernel = "layer_norm_f32_1x16x32x32x32_k4"
// ANN: trellis.layer_norm {{.*}}kernel = "layer_norm_f32_2x16384_k5"
// ANN: trellis.softmax {{.*}}kernel = "softmax_f16_4x1374_k6"
// ANN: trellis.layer_norm_modulate {{.*}}grid = array<i64: 1024, 1, 1>, kernel = "layer_norm_modulate_f16_2x4096x1024_k7"
func.func @norms(%x: tensor<2x4096x1024xf16>, %y: tensor<1x512x128xf16>, %w: tensor<128xf32>,
                 %q: tensor<2x4096x16x64xf16>, %g: tensor<16x64xf32>, %c: tensor<1x32x16x16x16xf16>,
                 %cw: tensor<32xf32>, %d: tensor<1x16x32x32x32xf32>, %l: tensor<2x16384xf32>,
                 %s: tensor<4x1374xf16>, %v: tensor<2x1024xf16>)
    attributes {trellis.device = "cuda"} {
  %0 = trellis.layer_norm %x {eps = 1.0e-06 : f64} : (tensor<2x4096x1024xf16>) -> tensor<2x4096x1024xf16>
  %1 = trellis.layer_norm %y, %w, %w {eps = 1.0e-06 : f64} : (tensor<1x512x128xf16>, tensor<128xf32>, tensor<128xf32>) -> tensor<1x512x128xf16>
  %2 = trellis.head_rms_norm %q, %g : (tensor<2x4096x16x64xf16>, tensor<16x64xf32>) -> tensor<2x4096x16x64xf16>
  %3 = trellis.layer_norm %c, %cw, %cw {axis = 1 : i64, eps = 1.0e-05 : f64} : (tensor<1x32x16x16x16xf16>, tensor<32xf32>, tensor<32xf32>) -> tensor<1x32x16x16x16xf16>
  %4 = trellis.layer_norm %d {axis = 1 : i64, eps = 1.0e-05 : f64} : (tensor<1x16x32x32x32xf32>) -> tensor<1x16x32x32x32xf32>
  %5 = trellis.layer_norm %l {eps = 1.0e-05 : f64} : (tensor<2x16384xf32>) -> tensor<2x16384xf32>
  %6 = trellis.softmax %s : (tensor<4x1374xf16>) -> tensor<4x1374xf16>
  %7 = trellis.layer_norm_modulate %x, %v, %v {eps = 1.0e-06 : f64} : (tensor<2x4096x1024xf16>, tensor<2x1024xf16>, tensor<2x1024xf16>) -> tensor<2x4096x1024xf16>
  return
}
