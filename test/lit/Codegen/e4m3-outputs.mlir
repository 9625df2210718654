// RUN: trellis-opt --trellis-gpu-codegen=dump-kernels %s | FileCheck %s
// RUN: trellis-opt --trellis-gpu-codegen %s | FileCheck %s --check-prefix=ANN
// RUN: trellis-opt --trellis-gpu-codegen="ptx-out=%t.ptx" %s -o /dev/null
// RUN: FileCheck %s --input-file=%t.ptx --check-prefix=PTX

// A fused layer norm whose normalized result only a static-scale FP8 linear
// reads (through reshapes) also gets an E4M3 variant of its kernel: that
// result as i8 bytes, an f32 quantize scale after the results (before a
// dynamic-row kernel's rows). Each value is rounded to f16, scaled and
// converted in pairs (cvt.rn.satfinite.e4m3x2.f32), as the FP8 GEMM's own
// static quantization of the f16 result computes it.

// CHECK-LABEL: gpu.func @layer_norm_modulate_f16_1x64x1024_k0
// CHECK-SAME: %{{.*}}: memref<65536xf16>)
// CHECK-LABEL: gpu.func @layer_norm_modulate_e4m3_f16_1x64x1024_k1
// CHECK-SAME: (%{{.*}}: memref<65536xf16>, %{{.*}}: memref<1024xf16>, %{{.*}}: memref<1024xf16>, %{{.*}}: memref<65536xi8>, %[[Q:.*]]: f32)
// CHECK: arith.truncf {{.*}} : vector<8xf32> to vector<8xf16>
// CHECK: arith.extf {{.*}} : vector<8xf16> to vector<8xf32>
// CHECK: arith.mulf
// CHECK-COUNT-4: nvvm.convert.f32x2.to.f8x2 {{.*}} {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : i16(f8E4M3FN)
// CHECK: vector.bitcast {{.*}} : vector<4xi16> to vector<8xi8>
// CHECK: vector.store {{.*}} : memref<65536xi8>, vector<8xi8>
// gated_residual_norm: the residual stays f16, the normalized result (its
// second) is the E4M3 one.
// CHECK-LABEL: gpu.func @gated_residual_norm_e4m3_f16_1x64x1024_k3
// CHECK-SAME: %{{.*}}: memref<65536xf16>, %{{.*}}: memref<65536xi8>, %{{.*}}: f32)
// Dynamic rows: the scale, then the rows.
// CHECK-LABEL: gpu.func @layer_norm_modulate_e4m3_f16_dx1024_k5
// CHECK-SAME: %{{.*}}: memref<4194304xi8>, %{{.*}}: f32, %{{.*}}: i64)

// ANN: trellis.layer_norm_modulate {{.*}}trellis.launch = {{{.*}}kernel = "layer_norm_modulate_f16_1x64x1024_k0"
// ANN-SAME: trellis.launch_e4m3 = {{{.*}}kernel = "layer_norm_modulate_e4m3_f16_1x64x1024_k1", result = 0 : i64
// ANN: trellis.gated_residual_norm {{.*}}trellis.launch_e4m3 = {{{.*}}kernel = "gated_residual_norm_e4m3_f16_1x64x1024_k3", result = 1 : i64
// No variant: read by a dynamic-scale FP8 linear, by two ops, or returned.
// ANN-COUNT-3: trellis.layer_norm_modulate {{.*}}kernel = "layer_norm_modulate_f16_1x64x1024_k0", smem = 0 : i64}} :
// ANN: trellis.layer_norm_modulate {{.*}}trellis.launch_e4m3 = {{{.*}}kernel = "layer_norm_modulate_e4m3_f16_dx1024_k5", result = 0 : i64, smem = 0 : i64, threads_per_row = 32 : i64}

// The kernels store E4M3, so there is no sm_75 lowering (it has no such
// conversion): the pass succeeds with the sm_90a PTX alone.
// PTX: .target sm_90a
// PTX: .visible .entry layer_norm_modulate_e4m3_f16_1x64x1024_k1(
// PTX: cvt.rn.f16.f32
// PTX: cvt.f32.f16
// PTX: mul.rn.f32
// PTX: cvt.rn.satfinite.e4m3x2.f32
func.func @f(%x: tensor<1x64x1024xf16>, %s: tensor<1x1024xf16>, %sh: tensor<1x1024xf16>,
             %w: tensor<256x1024xf16>, %h: tensor<1x64x1024xf16>, %g: tensor<1x1024xf16>,
             %w2: tensor<1024x1024xf16>, %xs: tensor<?x1024xf16, #trellis.bounds<[4096]>>)
    -> (tensor<1x64x256xf16>, tensor<1x64x1024xf16>, tensor<1x64x1024xf16>, tensor<1x64x1024xf16>,
        tensor<1x64x1024xf16>, tensor<1x64x1024xf16>, tensor<1x64x1024xf16>, tensor<1x64x1024xf16>,
        tensor<?x1024xf16, #trellis.bounds<[4096]>>)
    attributes {trellis.device = "cuda"} {
  %y = trellis.layer_norm_modulate %x, %sh, %s {eps = 1.0e-06 : f64} : (tensor<1x64x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>) -> tensor<1x64x1024xf16>
  %r = trellis.reshape %y : (tensor<1x64x1024xf16>) -> tensor<64x1024xf16>
  %o = trellis.linear %r, %w {activation_amax = 4.0 : f32, precision = "fp8_e4m3"} : (tensor<64x1024xf16>, tensor<256x1024xf16>) -> tensor<64x256xf16>
  %o2 = trellis.reshape %o : (tensor<64x256xf16>) -> tensor<1x64x256xf16>
  %res, %n = trellis.gated_residual_norm %x, %h, %g modulate %sh, %s {eps = 1.0e-06 : f64} : (tensor<1x64x1024xf16>, tensor<1x64x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>) -> (tensor<1x64x1024xf16>, tensor<1x64x1024xf16>)
  %l2 = trellis.linear %n, %w2 {activation_amax = 2.0 : f32, precision = "fp8_e4m3"} : (tensor<1x64x1024xf16>, tensor<1024x1024xf16>) -> tensor<1x64x1024xf16>
  %d = trellis.layer_norm_modulate %h, %sh, %s {eps = 1.0e-06 : f64} : (tensor<1x64x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>) -> tensor<1x64x1024xf16>
  %dl = trellis.linear %d, %w2 {precision = "fp8_e4m3"} : (tensor<1x64x1024xf16>, tensor<1024x1024xf16>) -> tensor<1x64x1024xf16>
  %t = trellis.layer_norm_modulate %res, %sh, %s {eps = 1.0e-06 : f64} : (tensor<1x64x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>) -> tensor<1x64x1024xf16>
  %t1 = trellis.linear %t, %w2 {activation_amax = 2.0 : f32, precision = "fp8_e4m3"} : (tensor<1x64x1024xf16>, tensor<1024x1024xf16>) -> tensor<1x64x1024xf16>
  %t2 = trellis.linear %t, %w2 {activation_amax = 2.0 : f32, precision = "fp8_e4m3"} : (tensor<1x64x1024xf16>, tensor<1024x1024xf16>) -> tensor<1x64x1024xf16>
  %ret = trellis.layer_norm_modulate %l2, %sh, %s {eps = 1.0e-06 : f64} : (tensor<1x64x1024xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>) -> tensor<1x64x1024xf16>
  %ys = trellis.layer_norm_modulate %xs, %sh, %s {eps = 1.0e-06 : f64} : (tensor<?x1024xf16, #trellis.bounds<[4096]>>, tensor<1x1024xf16>, tensor<1x1024xf16>) -> tensor<?x1024xf16, #trellis.bounds<[4096]>>
  %ls = trellis.linear %ys, %w2 {activation_amax = 2.0 : f32, precision = "fp8_e4m3"} : (tensor<?x1024xf16, #trellis.bounds<[4096]>>, tensor<1024x1024xf16>) -> tensor<?x1024xf16, #trellis.bounds<[4096]>>
  return %o2, %res, %l2, %dl, %t1, %t2, %ret, %l2, %ls : tensor<1x64x256xf16>, tensor<1x64x1024xf16>, tensor<1x64x1024xf16>, tensor<1x64x1024xf16>, tensor<1x64x1024xf16>, tensor<1x64x1024xf16>, tensor<1x64x1024xf16>, tensor<1x64x1024xf16>, tensor<?x1024xf16, #trellis.bounds<[4096]>>
}
