// RUN: trellis-opt --trellis-gpu-codegen=dump-kernels %s | FileCheck %s
// RUN: trellis-opt --trellis-gpu-codegen %s | FileCheck %s --check-prefix=ANN

// Data movement and the timestep embedding.
// The frequency table is baked in (the reference's f32 values).
// CHECK: gpu.module @trellis_kernels
// CHECK-NEXT: memref.global "private" constant @timestep_embedding_f32_2x256_k6_freq : memref<128xf32> = dense<"0x0000803FF8396E3FD6AF5D3F
// split along axis 2 of [2,4096,3,16,64]: pieces of 1024 contiguous
// elements; parameters (x, q, k, v).
// CHECK-LABEL: gpu.func @split_f16_2x4096x3x16x64_k0
// CHECK-SAME: (%{{.*}}: memref<25165824xf16>, %{{.*}}: memref<8388608xf16>, %{{.*}}: memref<8388608xf16>, %{{.*}}: memref<8388608xf16>)
// CHECK: vector.load {{.*}} : memref<25165824xf16>, vector<8xf16>
// CHECK: scf.if
// CHECK: vector.store
// CHECK: scf.if
// adaLN chunks: split of [2,6144] along axis 1.
// CHECK-LABEL: gpu.func @split_f16_2x6144_k1
// CHECK-LABEL: gpu.func @concat_f16_5x6_k2
// CHECK-SAME: (%{{.*}}: memref<10xf16>, %{{.*}}: memref<20xf16>, %{{.*}}: memref<30xf16>)
// CHECK: vector.load {{.*}} : memref<10xf16>, vector<2xf16>
// permute [1,8,4096] -> [1,4096,8]: a gather, scalar.
// CHECK-LABEL: gpu.func @permute_f32_1x4096x8_k3
// CHECK: memref.load {{.*}} : memref<32768xf32>
// Permutations keeping the innermost axis move vectors.
// CHECK-LABEL: gpu.func @permute_f16_4x2x64_k4
// CHECK: vector.load {{.*}} : memref<512xf16>, vector<8xf16>
// CHECK-LABEL: gpu.func @pixel_shuffle_3d_f16_1x128x32x32x32_k5
// CHECK-SAME: (%{{.*}}: memref<4194304xf16>, %{{.*}}: memref<4194304xf16>)
// CHECK-LABEL: gpu.func @timestep_embedding_f32_2x256_k6
// CHECK: memref.get_global @timestep_embedding_f32_2x256_k6_freq
// CHECK: arith.extf {{.*}} : f32 to f64
// CHECK: math.cos {{.*}} : f64
// CHECK: math.sin {{.*}} : f64

// ANN-LABEL: func.func @data
// ANN: trellis.split {{.*}}grid = array<i64: 12288, 1, 1>, kernel = "split_f16_2x4096x3x16x64_k0"
// ANN: trellis.split {{.*}}kernel = "split_f16_2x6144_k1"
// ANN: trellis.concat {{.*}}kernel = "concat_f16_5x6_k2"
// ANN: trellis.permute {{.*}}kernel = "permute_f32_1x4096x8_k3"
// ANN: trellis.permute {{.*}}kernel = "permute_f16_4x2x64_k4"
// ANN: trellis.pixel_shuffle_3d {{.*}}kernel = "pixel_shuffle_3d_f16_1x128x32x32x32_k5"
// ANN: trellis.timestep_embedding {{.*}}grid = array<i64: 1, 1, 1>, kernel = "timestep_embedding_f32_2x256_k6"
func.func @data(%x: tensor<2x4096x3x16x64xf16>, %m: tensor<2x6144xf16>, %a: tensor<5x2xf16>, %b: tensor<5x4xf16>,
                %p: tensor<1x8x4096xf32>, %r: tensor<2x4x64xf16>, %s: tensor<1x1024x16x16x16xf16>, %t: tensor<2xf32>)
    attributes {trellis.device = "cuda"} {
  %0:3 = trellis.split %x {axis = 2 : i64, sizes = array<i64: 1, 1, 1>} : (tensor<2x4096x3x16x64xf16>) -> (tensor<2x4096x1x16x64xf16>, tensor<2x4096x1x16x64xf16>, tensor<2x4096x1x16x64xf16>)
  %1:6 = trellis.split %m {axis = 1 : i64, sizes = array<i64: 1024, 1024, 1024, 1024, 1024, 1024>} : (tensor<2x6144xf16>) -> (tensor<2x1024xf16>, tensor<2x1024xf16>, tensor<2x1024xf16>, tensor<2x1024xf16>, tensor<2x1024xf16>, tensor<2x1024xf16>)
  %2 = trellis.concat %a, %b {axis = 1 : i64} : (tensor<5x2xf16>, tensor<5x4xf16>) -> tensor<5x6xf16>
  %3 = trellis.permute %p {perm = array<i64: 0, 2, 1>} : (tensor<1x8x4096xf32>) -> tensor<1x4096x8xf32>
  %4 = trellis.permute %r {perm = array<i64: 1, 0, 2>} : (tensor<2x4x64xf16>) -> tensor<4x2x64xf16>
  %5 = trellis.pixel_shuffle_3d %s {factor = 2 : i64} : (tensor<1x1024x16x16x16xf16>) -> tensor<1x128x32x32x32xf16>
  %6 = trellis.timestep_embedding %t {dim = 256 : i64, max_period = 1.000000e+04 : f64} : (tensor<2xf32>) -> tensor<2x256xf32>
  return
}
