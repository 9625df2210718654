// RUN: trellis-opt --trellis-gpu-codegen=dump-kernels %s | FileCheck %s
// RUN: trellis-opt --trellis-gpu-codegen %s | FileCheck %s --check-prefix=ANN
// RUN: trellis-opt --trellis-gpu-codegen=dump-kernels %s | FileCheck %s --check-prefix=ERF

// Elementwise kernels: groups of V elements (16-byte vector accesses), one
// per thread, four per thread (a quarter of the tensor apart, every load
// before the first store) from 2^18 groups on; broadcast operands loaded as
// scalars and splatted, f32 math, one rounding to the result dtype.

// CHECK-LABEL: gpu.module @trellis_kernels
// CHECK-LABEL: gpu.func @cast_f32_to_f16_2x4096x1024_k0
// CHECK-SAME: (%{{.*}}: memref<8388608xf32>, %{{.*}}: memref<8388608xf16>) kernel
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: vector.load {{.*}} {alignment = 16 : i64} : memref<8388608xf32>, vector<8xf32>
// CHECK: arith.truncf {{.*}} : vector<8xf32> to vector<8xf16>
// CHECK: vector.store {{.*}} {alignment = 16 : i64} : memref<8388608xf16>, vector<8xf16>

// [1,512,128] + [512,128]: the rhs is contiguous too (NumPy broadcasting
// over the leading 1).
// CHECK-LABEL: gpu.func @add_f16_1x512x128_k1
// CHECK-SAME: (%{{.*}}: memref<65536xf16>, %{{.*}}: memref<65536xf16>, %{{.*}}: memref<65536xf16>)
// CHECK: arith.extf {{.*}} : vector<8xf16> to vector<8xf32>
// CHECK: arith.addf {{.*}} : vector<8xf32>

// [1,4096,1024] * [1,1024]: the rhs is a row broadcast over tokens.
// CHECK-LABEL: gpu.func @mul_f16_1x4096x1024_k2
// CHECK-SAME: (%{{.*}}: memref<4194304xf16>, %{{.*}}: memref<1024xf16>, %{{.*}}: memref<4194304xf16>)
// CHECK: arith.remui
// CHECK: vector.load {{.*}} : memref<4194304xf16>, vector<8xf16>
// CHECK: vector.load {{.*}} : memref<1024xf16>, vector<8xf16>
// CHECK: arith.mulf {{.*}} : vector<8xf32>

// A size-1 inner dimension broadcast: scalar load, splat.
// CHECK-LABEL: gpu.func @sub_f32_4x8_k3
// CHECK: memref.load {{.*}} : memref<4xf32>
// CHECK: vector.broadcast {{.*}} : f32 to vector<4xf32>

// gelu is the tanh form.
// CHECK-LABEL: gpu.func @gelu_f16_2x4096x4096_k4
// CHECK: math.tanh {{.*}} : vector<8xf32>
// CHECK-NOT: math.erf
// CHECK-LABEL: gpu.func @silu_f32_1x128_k5
// CHECK: math.exp {{.*}} : vector<4xf32>
// CHECK: arith.divf

// modulate / gated_residual: [B, C] vectors broadcast over tokens.
// CHECK-LABEL: gpu.func @modulate_f16_2x4096x1024_k6
// CHECK-SAME: (%{{.*}}: memref<8388608xf16>, %{{.*}}: memref<2048xf16>, %{{.*}}: memref<2048xf16>, %{{.*}}: memref<8388608xf16>)
// CHECK-LABEL: gpu.func @gated_residual_f16_2x4096x1024_k7
// CHECK-SAME: (%{{.*}}: memref<8388608xf16>, %{{.*}}: memref<8388608xf16>, %{{.*}}: memref<2048xf16>, %{{.*}}: memref<8388608xf16>)
// CHECK-COUNT-12: vector.load
// CHECK-NOT: vector.load
// CHECK-COUNT-4: vector.store {{.*}} : memref<8388608xf16>, vector<8xf16>
// CHECK-LABEL: gpu.func @maximum_f32_7_k8
// CHECK: arith.maximumf {{.*}} : f32
// Integer add stays integer.
// CHECK-LABEL: gpu.func @add_i32_16_k9
// CHECK: arith.addi {{.*}} : vector<4xi32>
// broadcast_rows: a copy of the row to every token.
// CHECK-LABEL: gpu.func @broadcast_rows_f16_2x1374x1024_k10
// CHECK-SAME: (%{{.*}}: memref<1024xf16>, %{{.*}}: memref<2813952xf16>)
// CHECK: vector.load {{.*}} : memref<1024xf16>, vector<8xf16>
// CHECK-NOT: arith.extf
// CHECK: vector.store
// The sampler's building blocks, with their scalars baked in as f32.
// CHECK-LABEL: gpu.func @cfg_combine_f32_7_k11
// CHECK: arith.constant 8.500000e+00 : f32
// CHECK: arith.constant 7.500000e+00 : f32
// CHECK-LABEL: gpu.func @euler_update_f32_7_k12
// CHECK: arith.constant 2.500000e-01 : f32
// CHECK-NOT: gpu.func @cast_f32_to_f16_2x4096x1024_k{{[1-9]}}

// ANN-LABEL: func.func @elementwise
// ANN: trellis.cast {{.*}}trellis.launch = {block = array<i64: 256, 1, 1>, grid = array<i64: 1024, 1, 1>, kernel = "cast_f32_to_f16_2x4096x1024_k0", smem = 0 : i64}
// ANN: trellis.add {{.*}}kernel = "add_f16_1x512x128_k1"
// ANN: trellis.mul {{.*}}grid = array<i64: 512, 1, 1>, kernel = "mul_f16_1x4096x1024_k2"
// ANN: trellis.sub {{.*}}kernel = "sub_f32_4x8_k3"
// ANN: trellis.gelu {{.*}}kernel = "gelu_f16_2x4096x4096_k4"
// ANN: trellis.silu {{.*}}kernel = "silu_f32_1x128_k5"
// ANN: trellis.modulate {{.*}}kernel = "modulate_f16_2x4096x1024_k6"
// ANN: trellis.gated_residual {{.*}}grid = array<i64: 1024, 1, 1>, kernel = "gated_residual_f16_2x4096x1024_k7"
// ANN: trellis.maximum {{.*}}grid = array<i64: 1, 1, 1>, kernel = "maximum_f32_7_k8"
// ANN: trellis.add {{.*}}kernel = "add_i32_16_k9"
// ANN: trellis.broadcast_rows {{.*}}kernel = "broadcast_rows_f16_2x1374x1024_k10"
// ANN: trellis.cfg_combine {{.*}}kernel = "cfg_combine_f32_7_k11"
// ANN: trellis.euler_update {{.*}}kernel = "euler_update_f32_7_k12"
// Identical ops share one kernel.
// ANN: trellis.cast {{.*}}kernel = "cast_f32_to_f16_2x4096x1024_k0"
// ANN-LABEL: func.func @not_cuda
// ANN-NOT: trellis.launch
func.func @elementwise(%x: tensor<2x4096x1024xf32>, %a: tensor<1x512x128xf16>, %b: tensor<512x128xf16>,
                       %h: tensor<1x4096x1024xf16>, %r: tensor<1x1024xf16>, %p: tensor<4x8xf32>, %q: tensor<4x1xf32>,
                       %g: tensor<2x4096x4096xf16>, %t: tensor<1x128xf32>, %y: tensor<2x4096x1024xf16>,
                       %v: tensor<2x1024xf16>, %m: tensor<7xf32>, %i: tensor<16xi32>, %row: tensor<1x1024xf16>)
    attributes {trellis.device = "cuda"} {
  %0 = trellis.cast %x : (tensor<2x4096x1024xf32>) -> tensor<2x4096x1024xf16>
  %1 = trellis.add %a, %b : (tensor<1x512x128xf16>, tensor<512x128xf16>) -> tensor<1x512x128xf16>
  %2 = trellis.mul %h, %r : (tensor<1x4096x1024xf16>, tensor<1x1024xf16>) -> tensor<1x4096x1024xf16>
  %3 = trellis.sub %p, %q : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %4 = trellis.gelu %g : tensor<2x4096x4096xf16>
  %5 = trellis.silu %t : tensor<1x128xf32>
  %6 = trellis.modulate %y, %v, %v : (tensor<2x4096x1024xf16>, tensor<2x1024xf16>, tensor<2x1024xf16>) -> tensor<2x4096x1024xf16>
  %7 = trellis.gated_residual %y, %6, %v : (tensor<2x4096x1024xf16>, tensor<2x4096x1024xf16>, tensor<2x1024xf16>) -> tensor<2x4096x1024xf16>
  %8 = trellis.maximum %m, %m : (tensor<7xf32>, tensor<7xf32>) -> tensor<7xf32>
  %9 = trellis.add %i, %i : (tensor<16xi32>, tensor<16xi32>) -> tensor<16xi32>
  %b0 = trellis.broadcast_rows %row : (tensor<1x1024xf16>) -> tensor<2x1374x1024xf16>
  %c0 = trellis.cfg_combine %m, %m {strength = 7.500000e+00 : f64} : (tensor<7xf32>, tensor<7xf32>) -> tensor<7xf32>
  %e0 = trellis.euler_update %m, %c0 {dt = 2.500000e-01 : f64} : (tensor<7xf32>, tensor<7xf32>) -> tensor<7xf32>
  %10 = trellis.cast %x : (tensor<2x4096x1024xf32>) -> tensor<2x4096x1024xf16>
  return
}

// gelu_erf (DINOv2's MLP) is the exact form: 0.5·x·(1 + erf(x/√2)), no tanh.
// ERF-LABEL: gpu.func @gelu_erf_f32_1x1374x4096_k{{[0-9]+}}
// ERF: math.erf {{.*}} : vector<4xf32>
// ERF-NOT: math.tanh
// ERF: gpu.return
func.func @exact_gelu(%x: tensor<1x1374x4096xf32>) attributes {trellis.device = "cuda"} {
  %0 = trellis.gelu_erf %x : tensor<1x1374x4096xf32>
  return
}

func.func @not_cuda(%x: tensor<4xf32>) -> tensor<4xf16> {
  %0 = trellis.cast %x : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

