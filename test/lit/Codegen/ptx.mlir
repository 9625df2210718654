// RUN: trellis-opt --trellis-gpu-codegen="ptx-out=%t.ptx" %s -o /dev/null
// RUN: FileCheck %s --input-file=%t.ptx

// The sm_90a PTX: one .entry per kernel, named as the annotations say;
// parameters are bare pointers (operands, then results); vectorized
// accesses are 16-byte ld/st; libdevice's tanh is linked in (no call left).
// CHECK: .version 8.0
// CHECK: .target sm_90a
// CHECK-NOT: .extern .func
// CHECK: .visible .entry layer_norm_f16_2x4096x1024_k0(
// CHECK-NEXT: .param .u64 .ptr .align 1 layer_norm_f16_2x4096x1024_k0_param_0,
// CHECK-NEXT: .param .u64 .ptr .align 1 layer_norm_f16_2x4096x1024_k0_param_1
// CHECK-NEXT: )
// CHECK: ld.global.v4.b32
// CHECK: shfl.sync.bfly.b32
// CHECK: st.global.v4.b32
// CHECK: .visible .entry gelu_f16_2x4096x4096_k1(
// CHECK-NOT: call
// CHECK: .visible .entry im2col_f16_1x32x16x16x16_k2(
// CHECK: .visible .entry timestep_embedding_f32_1x256_k3(
// CHECK: .visible .entry flow_update_f32_1x8x16x16x16_k4(
// CHECK-NEXT: .param .u64 .ptr .align 1 flow_update_f32_1x8x16x16x16_k4_param_0,
// CHECK-NEXT: .param .u64 .ptr .align 1 flow_update_f32_1x8x16x16x16_k4_param_1,
// CHECK-NEXT: .param .u64 .ptr .align 1 flow_update_f32_1x8x16x16x16_k4_param_2,
// CHECK-NEXT: .param .u64 .ptr .align 1 flow_update_f32_1x8x16x16x16_k4_param_3,
// CHECK-NEXT: .param .f32 flow_update_f32_1x8x16x16x16_k4_param_4,
// CHECK-NEXT: .param .f32 flow_update_f32_1x8x16x16x16_k4_param_5,
// CHECK-NEXT: .param .u32 flow_update_f32_1x8x16x16x16_k4_param_6
// CHECK-NEXT: )
func.func @f(%x: tensor<2x4096x1024xf16>, %g: tensor<2x4096x4096xf16>, %c: tensor<1x32x16x16x16xf16>,
             %w: tensor<32x32x3x3x3xf16>, %t: tensor<1xf32>)
    attributes {trellis.device = "cuda"} {
  %0 = trellis.layer_norm %x {eps = 1.0e-06 : f64} : (tensor<2x4096x1024xf16>) -> tensor<2x4096x1024xf16>
  %1 = trellis.gelu %g : tensor<2x4096x4096xf16>
  %2 = trellis.conv3d %c, %w : (tensor<1x32x16x16x16xf16>, tensor<32x32x3x3x3xf16>) -> tensor<1x32x16x16x16xf16>
  return
}
func.func @velocity(%x: tensor<1x8x16x16x16xf32>, %t: tensor<1xf32>, %c: tensor<1x4x16xf32>) -> tensor<1x8x16x16x16xf32>
    attributes {trellis.device = "cuda"} {
  %e = trellis.timestep_embedding %t : (tensor<1xf32>) -> tensor<1x256xf32>
  return %x : tensor<1x8x16x16x16xf32>
}
func.func @sampler(%noise: tensor<1x8x16x16x16xf32>, %cond: tensor<1x4x16xf32>) -> tensor<1x8x16x16x16xf32>
    attributes {trellis.device = "cuda"} {
  %0 = trellis.flow_sample %noise, %cond, %cond {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64, rescale_t = 3.000000e+00 : f64, steps = 25 : i64} : (tensor<1x8x16x16x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8x16x16x16xf32> {
  ^bb0(%x: tensor<1x8x16x16x16xf32>, %t: tensor<1xf32>, %c: tensor<1x4x16xf32>):
    %v = func.call @velocity(%x, %t, %c) : (tensor<1x8x16x16x16xf32>, tensor<1xf32>, tensor<1x4x16xf32>) -> tensor<1x8x16x16x16xf32>
    trellis.yield %v : tensor<1x8x16x16x16xf32>
  }
  return %0 : tensor<1x8x16x16x16xf32>
}
