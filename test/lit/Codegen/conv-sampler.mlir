// RUN: trellis-opt --trellis-gpu-codegen=dump-kernels %s | FileCheck %s
// RUN: trellis-opt --trellis-gpu-codegen %s | FileCheck %s --check-prefix=ANN

// conv3d: the im2col kernel (x, col) with col [Cin·27, D·H·W] per batch
// item; the GEMM is the library's. The sampler: the update kernel
// (x, v_cond, v_uncond, x_next, strength, dt, guided).
// CHECK-LABEL: gpu.func @im2col_f16_1x512x16x16x16_k0
// CHECK-SAME: (%{{.*}}: memref<2097152xf16>, %{{.*}}: memref<56623104xf16>)
// CHECK: arith.cmpi sge
// CHECK: arith.select
// CHECK: vector.from_elements {{.*}} : vector<8xf16>
// CHECK: vector.store {{.*}} : memref<56623104xf16>, vector<8xf16>
// A conv with at most 4 output channels is one direct kernel (x, w, out):
// the 27 taps' offsets once, then a loop over the input channels carrying
// the Cout f32 sums; no scratch.
// CHECK-LABEL: gpu.func @conv3d_direct_f32_2x8x16x16x16_k1
// CHECK-SAME: (%{{.*}}: memref<65536xf32>, %{{.*}}: memref<864xf32>, %{{.*}}: memref<32768xf32>)
// CHECK-COUNT-27: arith.select {{.*}} : index
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32)
// CHECK-COUNT-108: arith.mulf
// CHECK: scf.yield
// CHECK-COUNT-4: memref.store
// CHECK-LABEL: gpu.func @im2col_f32_2x8x16x16x16_k2
// CHECK-SAME: (%{{.*}}: memref<65536xf32>, %{{.*}}: memref<1769472xf32>)
// CHECK-LABEL: gpu.func @flow_update_f32_1x8x16x16x16_k3
// CHECK-SAME: (%{{.*}}: memref<32768xf32>, %{{.*}}: memref<32768xf32>, %{{.*}}: memref<32768xf32>, %{{.*}}: memref<32768xf32>, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: i32)
// CHECK: arith.cmpi ne
// CHECK: scf.if {{.*}} -> (vector<4xf32>)
// CHECK: vector.load {{.*}} : memref<32768xf32>, vector<4xf32>
// CHECK: arith.subf
// CHECK: scf.yield
// CHECK: } else {
// CHECK: arith.mulf
// CHECK: arith.subf
// CHECK: vector.store {{.*}}, %arg3[
// Multidiffusion's velocity sum (sum, v, sum_next, scale): (sum + v)·scale.
// CHECK-LABEL: gpu.func @velocity_sum_f32_1x8x16x16x16_k4
// CHECK-SAME: (%{{.*}}: memref<32768xf32>, %{{.*}}: memref<32768xf32>, %{{.*}}: memref<32768xf32>, %{{.*}}: f32)
// CHECK: arith.addf {{.*}} : vector<4xf32>
// CHECK: arith.mulf {{.*}} : vector<4xf32>
// CHECK: vector.store {{.*}}, %arg2[
// CHECK-NOT: gpu.func

// ANN-LABEL: func.func @decoder
// ANN: trellis.conv3d {{.*}}trellis.launch = {block = array<i64: 256, 1, 1>, grid = array<i64: 27648, 1, 1>, kernel = "im2col_f16_1x512x16x16x16_k0", smem = 0 : i64}, trellis.scratch_bytes = 113246208 : i64
// Same input, kernel size and padding: the same im2col (other Cout).
// ANN: trellis.conv3d {{.*}}kernel = "im2col_f16_1x512x16x16x16_k0"{{.*}}trellis.scratch_bytes = 113246208 : i64
// ANN: trellis.conv3d {{.*}}trellis.conv_direct, trellis.launch = {block = array<i64: 256, 1, 1>, grid = array<i64: 32, 1, 1>, kernel = "conv3d_direct_f32_2x8x16x16x16_k1", smem = 0 : i64}}
// ANN-NOT: scratch_bytes
// ANN: trellis.conv3d {{.*}}kernel = "im2col_f32_2x8x16x16x16_k2"{{.*}}trellis.scratch_bytes = 7077888 : i64
// ANN-LABEL: func.func @sampler
// ANN: trellis.flow_sample
// ANN-SAME: trellis.update = {block = array<i64: 256, 1, 1>, grid = array<i64: 32, 1, 1>, kernel = "flow_update_f32_1x8x16x16x16_k3", smem = 0 : i64}
// ANN: func.call @velocity
// ANN-NOT: trellis.launch
// ANN: trellis.yield
// A multidiffusion sampler also gets the velocity-sum kernel; the update
// kernel is shared (same sample type).
// ANN-LABEL: func.func @multidiffusion
// ANN: trellis.flow_sample
// ANN-SAME: kernel = "flow_update_f32_1x8x16x16x16_k3"
// ANN-SAME: trellis.velocity_sum = {block = array<i64: 256, 1, 1>, grid = array<i64: 32, 1, 1>, kernel = "velocity_sum_f32_1x8x16x16x16_k4", smem = 0 : i64}
func.func @decoder(%x: tensor<1x512x16x16x16xf16>, %w: tensor<1024x512x3x3x3xf16>, %b: tensor<1024xf16>,
                   %w2: tensor<32x512x3x3x3xf16>, %y: tensor<2x8x16x16x16xf32>, %w3: tensor<4x8x3x3x3xf32>,
                   %w4: tensor<5x8x3x3x3xf32>)
    attributes {trellis.device = "cuda"} {
  %0 = trellis.conv3d %x, %w, %b {padding = 1 : i64} : (tensor<1x512x16x16x16xf16>, tensor<1024x512x3x3x3xf16>, tensor<1024xf16>) -> tensor<1x1024x16x16x16xf16>
  %1 = trellis.conv3d %x, %w2 : (tensor<1x512x16x16x16xf16>, tensor<32x512x3x3x3xf16>) -> tensor<1x32x16x16x16xf16>
  %2 = trellis.conv3d %y, %w3 : (tensor<2x8x16x16x16xf32>, tensor<4x8x3x3x3xf32>) -> tensor<2x4x16x16x16xf32>
  %3 = trellis.conv3d %y, %w4 : (tensor<2x8x16x16x16xf32>, tensor<5x8x3x3x3xf32>) -> tensor<2x5x16x16x16xf32>
  return
}

func.func @velocity(%x: tensor<1x8x16x16x16xf32>, %t: tensor<1xf32>, %c: tensor<1x4x16xf32>) -> tensor<1x8x16x16x16xf32>
    attributes {trellis.device = "cuda"} {
  return %x : tensor<1x8x16x16x16xf32>
}

func.func @sampler(%noise: tensor<1x8x16x16x16xf32>, %cond: tensor<1x4x16xf32>, %neg: tensor<1x4x16xf32>) -> tensor<1x8x16x16x16xf32>
    attributes {trellis.device = "cuda"} {
  %0 = trellis.flow_sample %noise, %cond, %neg {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64, rescale_t = 3.000000e+00 : f64, steps = 25 : i64} : (tensor<1x8x16x16x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8x16x16x16xf32> {
  ^bb0(%x: tensor<1x8x16x16x16xf32>, %t: tensor<1xf32>, %c: tensor<1x4x16xf32>):
    %v = func.call @velocity(%x, %t, %c) : (tensor<1x8x16x16x16xf32>, tensor<1xf32>, tensor<1x4x16xf32>) -> tensor<1x8x16x16x16xf32>
    trellis.yield %v : tensor<1x8x16x16x16xf32>
  }
  return %0 : tensor<1x8x16x16x16xf32>
}

func.func @multidiffusion(%noise: tensor<1x8x16x16x16xf32>, %cond: tensor<3x4x16xf32>, %neg: tensor<1x4x16xf32>) -> tensor<1x8x16x16x16xf32>
    attributes {trellis.device = "cuda"} {
  %0 = trellis.flow_sample %noise, %cond, %neg {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64, multi_image = #trellis.multi_image<multidiffusion>, rescale_t = 3.000000e+00 : f64, steps = 25 : i64} : (tensor<1x8x16x16x16xf32>, tensor<3x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8x16x16x16xf32> {
  ^bb0(%x: tensor<1x8x16x16x16xf32>, %t: tensor<1xf32>, %c: tensor<1x4x16xf32>):
    %v = func.call @velocity(%x, %t, %c) : (tensor<1x8x16x16x16xf32>, tensor<1xf32>, tensor<1x4x16xf32>) -> tensor<1x8x16x16x16xf32>
    trellis.yield %v : tensor<1x8x16x16x16xf32>
  }
  return %0 : tensor<1x8x16x16x16xf32>
}
