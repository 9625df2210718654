// RUN: trellis-opt %s -split-input-file -verify-diagnostics

// One case per verifier rule of every trellis op, in the order of the op
// reference (TrellisOps.td). Type and attribute verifiers are in types.mlir.

//===----------------------------------------------------------------------===//
// Bounded shapes (every op)
//===----------------------------------------------------------------------===//

func.func @linear_feature_mismatch(%x: tensor<4x16xf16>, %w: tensor<8x32xf16>) {
  // expected-error @+1 {{input has 16 features but the weight expects 32}}
  %y = trellis.linear %x, %w : (tensor<4x16xf16>, tensor<8x32xf16>) -> tensor<4x8xf16>
  return
}

// -----

func.func @unbounded_dynamic(%x: tensor<?x16xf16>, %w: tensor<8x16xf16>) {
  // expected-error @+1 {{has a dynamic dimension without a #trellis.bounds upper bound}}
  %y = trellis.linear %x, %w : (tensor<?x16xf16>, tensor<8x16xf16>) -> tensor<?x8xf16>
  return
}

// -----

func.func @bounds_count(%x: tensor<?x?xf16, #trellis.bounds<[4]>>) {
  // expected-error @+1 {{operand #0 of type 'tensor<?x?xf16, #trellis.bounds<[4]>>' has 2 dynamic dimension(s) but 1 bound(s)}}
  %y = trellis.silu %x : tensor<?x?xf16, #trellis.bounds<[4]>>
  return
}

// -----

func.func @bounds_on_static(%x: tensor<4xf16, #trellis.bounds<[4]>>) {
  // expected-error @+1 {{has 0 dynamic dimension(s) but 1 bound(s)}}
  %y = trellis.silu %x : tensor<4xf16, #trellis.bounds<[4]>>
  return
}

// -----

func.func @bounds_on_result(%x: tensor<4x16xf16>, %w: tensor<8x16xf16>) {
  // expected-error @+1 {{result #0 of type 'tensor<?x8xf16>' has a dynamic dimension without a #trellis.bounds upper bound}}
  %y = trellis.linear %x, %w : (tensor<4x16xf16>, tensor<8x16xf16>) -> tensor<?x8xf16>
  return
}

//===----------------------------------------------------------------------===//
// Weights, constants and casts
//===----------------------------------------------------------------------===//

// -----

func.func @weight_name() {
  // expected-error @+1 {{needs a non-empty tensor name}}
  %w = trellis.weight "" of "m" : tensor<4xf16>
  return
}

// -----

func.func @weight_model() {
  // expected-error @+1 {{needs a non-empty model key}}
  %w = trellis.weight "w" of "" : tensor<4xf16>
  return
}

// -----

func.func @weight_dynamic() {
  // expected-error @+1 {{weight shapes are static, found 'tensor<?xf16, #trellis.bounds<[4]>>'}}
  %w = trellis.weight "w" of "m" : tensor<?xf16, #trellis.bounds<[4]>>
  return
}

// -----

func.func @constant_element_type() {
  // expected-error @+1 {{result #0 must be ranked tensor of 16-bit float or 32-bit float or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2xi8>'}}
  %c = trellis.constant dense<[1, 2]> : tensor<2xi8>
  return
}

// -----

func.func @cast_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{result must have the input's shape and bounds, found 'tensor<4x8xf32>' -> 'tensor<8x4xf16>'}}
  %y = trellis.cast %x : (tensor<4x8xf32>) -> tensor<8x4xf16>
  return
}

// -----

func.func @cast_bounds(%x: tensor<?x8xf32, #trellis.bounds<[10]>>) {
  // expected-error @+1 {{result must have the input's shape and bounds}}
  %y = trellis.cast %x : (tensor<?x8xf32, #trellis.bounds<[10]>>) -> tensor<?x8xf16, #trellis.bounds<[20]>>
  return
}

// -----

func.func @cast_pair(%x: tensor<4xf32>) {
  // expected-error @+1 {{unsupported cast from 'f32' to 'i32' (supported: f16 -> f32, f32 -> f16, i32 -> f32)}}
  %y = trellis.cast %x : (tensor<4xf32>) -> tensor<4xi32>
  return
}

// -----

func.func @cast_identity(%x: tensor<4xf16>) {
  // expected-error @+1 {{unsupported cast from 'f16' to 'f16'}}
  %y = trellis.cast %x : (tensor<4xf16>) -> tensor<4xf16>
  return
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

// -----

func.func @unary_type(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 16-bit float or 32-bit float values, but got 'tensor<4xi32>'}}
  %y = trellis.gelu %x : tensor<4xi32>
  return
}

// -----

func.func @unary_result(%x: tensor<4xf16>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "trellis.gelu"(%x) : (tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @binary_element_types(%a: tensor<4xf16>, %b: tensor<4xf32>) {
  // expected-error @+1 {{rhs element type 'f32' differs from lhs element type 'f16'}}
  %y = trellis.add %a, %b : (tensor<4xf16>, tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @binary_broadcast(%a: tensor<4x3xf16>, %b: tensor<4x5xf16>) {
  // expected-error @+1 {{shapes [4, 3] and [4, 5] do not broadcast at dimension 1}}
  %y = trellis.sub %a, %b : (tensor<4x3xf16>, tensor<4x5xf16>) -> tensor<4x3xf16>
  return
}

// -----

// A dynamic dimension broadcasts only against itself or 1.
func.func @binary_broadcast_dynamic(%a: tensor<?x3xf16, #trellis.bounds<[8]>>, %b: tensor<4x3xf16>) {
  // expected-error @+1 {{shapes [?, 3] and [4, 3] do not broadcast at dimension 0}}
  %y = trellis.mul %a, %b : (tensor<?x3xf16, #trellis.bounds<[8]>>, tensor<4x3xf16>) -> tensor<?x3xf16, #trellis.bounds<[8]>>
  return
}

// -----

func.func @binary_result(%a: tensor<4x1xf16>, %b: tensor<3xf16>) {
  // expected-error @+1 {{result #0 has type 'tensor<4x1xf16>' but the operands and attributes give 'tensor<4x3xf16>'}}
  %y = trellis.maximum %a, %b : (tensor<4x1xf16>, tensor<3xf16>) -> tensor<4x1xf16>
  return
}

// -----

func.func @binary_result_bounds(%a: tensor<?x3xf16, #trellis.bounds<[8]>>, %b: tensor<3xf16>) {
  // expected-error @+1 {{result #0 has type 'tensor<?x3xf16, #trellis.bounds<[9]>>' but the operands and attributes give 'tensor<?x3xf16, #trellis.bounds<[8]>>'}}
  %y = trellis.add %a, %b : (tensor<?x3xf16, #trellis.bounds<[8]>>, tensor<3xf16>) -> tensor<?x3xf16, #trellis.bounds<[9]>>
  return
}

// -----

func.func @div_int(%a: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 16-bit float or 32-bit float values, but got 'tensor<4xi32>'}}
  %y = trellis.div %a, %a : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @modulate_element_type(%x: tensor<2x16x8xf16>, %s: tensor<2x8xf32>) {
  // expected-error @+1 {{shift element type 'f32' differs from input element type 'f16'}}
  %y = trellis.modulate %x, %s, %s : (tensor<2x16x8xf16>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x16x8xf16>
  return
}

// -----

func.func @modulate_shift(%x: tensor<2x16x8xf16>, %s: tensor<2x8xf16>, %bad: tensor<2x16xf16>) {
  // expected-error @+1 {{shift must have the input's type 'tensor<2x16x8xf16>' or be a per-sample [B, C] = [2, 8], found 'tensor<2x16xf16>'}}
  %y = trellis.modulate %x, %bad, %s : (tensor<2x16x8xf16>, tensor<2x16xf16>, tensor<2x8xf16>) -> tensor<2x16x8xf16>
  return
}

// -----

func.func @modulate_scale(%x: tensor<16x8xf16>, %bad: tensor<2x8xf16>) {
  // expected-error @+1 {{scale must have the input's type 'tensor<16x8xf16>' or be one row [1, 8], found 'tensor<2x8xf16>'}}
  %y = trellis.modulate %x, %x, %bad : (tensor<16x8xf16>, tensor<16x8xf16>, tensor<2x8xf16>) -> tensor<16x8xf16>
  return
}

// -----

func.func @modulate_result(%x: tensor<16x8xf16>) {
  // expected-error @+1 {{result #0 has type 'tensor<16x8xf32>' but the operands and attributes give 'tensor<16x8xf16>'}}
  %y = trellis.modulate %x, %x, %x : (tensor<16x8xf16>, tensor<16x8xf16>, tensor<16x8xf16>) -> tensor<16x8xf32>
  return
}

// -----

func.func @gated_residual_h(%x: tensor<2x16x8xf16>, %h: tensor<2x16x4xf16>, %g: tensor<2x8xf16>) {
  // expected-error @+1 {{h must have the input's type 'tensor<2x16x8xf16>', found 'tensor<2x16x4xf16>'}}
  %y = trellis.gated_residual %x, %h, %g : (tensor<2x16x8xf16>, tensor<2x16x4xf16>, tensor<2x8xf16>) -> tensor<2x16x8xf16>
  return
}

// -----

func.func @gated_residual_gate(%x: tensor<2x16x8xf16>, %g: tensor<3x8xf16>) {
  // expected-error @+1 {{gate must have the input's type 'tensor<2x16x8xf16>' or be a per-sample [B, C] = [2, 8], found 'tensor<3x8xf16>'}}
  %y = trellis.gated_residual %x, %x, %g : (tensor<2x16x8xf16>, tensor<2x16x8xf16>, tensor<3x8xf16>) -> tensor<2x16x8xf16>
  return
}

// -----

func.func @gated_residual_gate_type(%x: tensor<2x16x8xf16>, %g: tensor<2x8xf32>) {
  // expected-error @+1 {{gate element type 'f32' differs from input element type 'f16'}}
  %y = trellis.gated_residual %x, %x, %g : (tensor<2x16x8xf16>, tensor<2x16x8xf16>, tensor<2x8xf32>) -> tensor<2x16x8xf16>
  return
}

// -----

func.func @gated_residual_result(%x: tensor<2x16x8xf16>) {
  // expected-error @+1 {{result #0 has type 'tensor<2x16x9xf16>' but the operands and attributes give 'tensor<2x16x8xf16>'}}
  %y = trellis.gated_residual %x, %x, %x : (tensor<2x16x8xf16>, tensor<2x16x8xf16>, tensor<2x16x8xf16>) -> tensor<2x16x9xf16>
  return
}

//===----------------------------------------------------------------------===//
// Linear algebra, normalization and attention
//===----------------------------------------------------------------------===//

// -----

func.func @linear_input_rank(%x: tensor<f16>, %w: tensor<8x16xf16>) {
  // expected-error @+1 {{input must have rank >= 1, found 'tensor<f16>'}}
  %y = trellis.linear %x, %w : (tensor<f16>, tensor<8x16xf16>) -> tensor<8xf16>
  return
}

// -----

func.func @linear_weight_rank(%x: tensor<4x16xf16>, %w: tensor<8x16x1xf16>) {
  // expected-error @+1 {{weight must be [out, in], found 'tensor<8x16x1xf16>'}}
  %y = trellis.linear %x, %w : (tensor<4x16xf16>, tensor<8x16x1xf16>) -> tensor<4x8xf16>
  return
}

// -----

func.func @linear_element_type(%x: tensor<4x16xf32>, %w: tensor<8x16xf16>) {
  // expected-error @+1 {{input element type 'f32' differs from weight element type 'f16'}}
  %y = trellis.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf16>) -> tensor<4x8xf32>
  return
}

// -----

func.func @linear_bias_shape(%x: tensor<4x16xf16>, %w: tensor<8x16xf16>, %b: tensor<16xf16>) {
  // expected-error @+1 {{bias must be [8], found 'tensor<16xf16>'}}
  %y = trellis.linear %x, %w, %b : (tensor<4x16xf16>, tensor<8x16xf16>, tensor<16xf16>) -> tensor<4x8xf16>
  return
}

// -----

func.func @linear_bias_type(%x: tensor<4x16xf16>, %w: tensor<8x16xf16>, %b: tensor<8xf32>) {
  // expected-error @+1 {{bias element type 'f32' differs from weight element type 'f16'}}
  %y = trellis.linear %x, %w, %b : (tensor<4x16xf16>, tensor<8x16xf16>, tensor<8xf32>) -> tensor<4x8xf16>
  return
}

// -----

func.func @linear_residual_without_bias(%x: tensor<4x16xf16>, %w: tensor<8x16xf16>, %r: tensor<4x8xf16>) {
  // expected-error @+1 {{a residual needs a bias and no activation}}
  %y = trellis.linear %x, %w residual %r : (tensor<4x16xf16>, tensor<8x16xf16>, tensor<4x8xf16>) -> tensor<4x8xf16>
  return
}

// -----

func.func @linear_residual_activation(%x: tensor<4x16xf16>, %w: tensor<8x16xf16>, %b: tensor<8xf16>, %r: tensor<4x8xf16>) {
  // expected-error @+1 {{a residual needs a bias and no activation}}
  %y = trellis.linear %x, %w, %b residual %r {activation = "gelu_tanh"} : (tensor<4x16xf16>, tensor<8x16xf16>, tensor<8xf16>, tensor<4x8xf16>) -> tensor<4x8xf16>
  return
}

// -----

func.func @linear_residual_type(%x: tensor<4x16xf16>, %w: tensor<8x16xf16>, %b: tensor<8xf16>, %r: tensor<1x8xf16>) {
  // expected-error @+1 {{residual must have the result's type 'tensor<4x8xf16>', found 'tensor<1x8xf16>'}}
  %y = trellis.linear %x, %w, %b residual %r : (tensor<4x16xf16>, tensor<8x16xf16>, tensor<8xf16>, tensor<1x8xf16>) -> tensor<4x8xf16>
  return
}

// -----

func.func @linear_result(%x: tensor<?x16xf16, #trellis.bounds<[10]>>, %w: tensor<8x16xf16>) {
  // expected-error @+1 {{result #0 has type 'tensor<10x8xf16>' but the operands and attributes give 'tensor<?x8xf16, #trellis.bounds<[10]>>'}}
  %y = trellis.linear %x, %w : (tensor<?x16xf16, #trellis.bounds<[10]>>, tensor<8x16xf16>) -> tensor<10x8xf16>
  return
}

// -----

func.func @matmul_lhs_rank(%a: tensor<4xf16>, %b: tensor<4x8xf16>) {
  // expected-error @+1 {{lhs must be [..., M, K] (rank >= 2), found 'tensor<4xf16>'}}
  %y = trellis.matmul %a, %b : (tensor<4xf16>, tensor<4x8xf16>) -> tensor<8xf16>
  return
}

// -----

func.func @matmul_rhs_rank(%a: tensor<2x4xf16>, %b: tensor<4xf16>) {
  // expected-error @+1 {{rhs must be [..., K, N] (rank >= 2), found 'tensor<4xf16>'}}
  %y = trellis.matmul %a, %b : (tensor<2x4xf16>, tensor<4xf16>) -> tensor<2xf16>
  return
}

// -----

func.func @matmul_element_type(%a: tensor<2x4xf16>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{rhs element type 'f32' differs from lhs element type 'f16'}}
  %y = trellis.matmul %a, %b : (tensor<2x4xf16>, tensor<4x8xf32>) -> tensor<2x8xf16>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<2x4xf16>, %b: tensor<5x8xf16>) {
  // expected-error @+1 {{contraction sizes K differ: lhs has 4, rhs has 5}}
  %y = trellis.matmul %a, %b : (tensor<2x4xf16>, tensor<5x8xf16>) -> tensor<2x8xf16>
  return
}

// -----

func.func @matmul_batch(%a: tensor<3x2x4xf16>, %b: tensor<5x4x8xf16>) {
  // expected-error @+1 {{batch dimensions of [3, 2, 4] and [5, 4, 8] do not broadcast at dimension 0}}
  %y = trellis.matmul %a, %b : (tensor<3x2x4xf16>, tensor<5x4x8xf16>) -> tensor<3x2x8xf16>
  return
}

// -----

func.func @matmul_result(%a: tensor<3x2x4xf16>, %b: tensor<4x8xf16>) {
  // expected-error @+1 {{result #0 has type 'tensor<2x8xf16>' but the operands and attributes give 'tensor<3x2x8xf16>'}}
  %y = trellis.matmul %a, %b : (tensor<3x2x4xf16>, tensor<4x8xf16>) -> tensor<2x8xf16>
  return
}

// -----

func.func @layer_norm_eps(%x: tensor<4x8xf16>) {
  // expected-error @+1 {{eps must be > 0, found 0}}
  %y = trellis.layer_norm %x {eps = 0.0 : f64} : (tensor<4x8xf16>) -> tensor<4x8xf16>
  return
}

// -----

func.func @layer_norm_axis(%x: tensor<4x8xf16>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2 (expected [-2, 2))}}
  %y = trellis.layer_norm %x {axis = 2 : i64, eps = 1.0e-6 : f64} : (tensor<4x8xf16>) -> tensor<4x8xf16>
  return
}

// -----

func.func @layer_norm_weight_alone(%x: tensor<4x8xf16>, %w: tensor<8xf32>) {
  // expected-error @+1 {{weight and bias must be given together (both or neither)}}
  %y = "trellis.layer_norm"(%x, %w) <{axis = -1 : i64, eps = 1.0e-6 : f64, operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<4x8xf16>, tensor<8xf32>) -> tensor<4x8xf16>
  return
}

// -----

func.func @layer_norm_dynamic_affine(%x: tensor<4x?xf16, #trellis.bounds<[8]>>, %w: tensor<8xf32>) {
  // expected-error @+1 {{an affine layer_norm needs a static normalized dimension, found dimension 1 of 'tensor<4x?xf16, #trellis.bounds<[8]>>'}}
  %y = trellis.layer_norm %x, %w, %w {eps = 1.0e-6 : f64} : (tensor<4x?xf16, #trellis.bounds<[8]>>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x?xf16, #trellis.bounds<[8]>>
  return
}

// -----

func.func @layer_norm_weight_shape(%x: tensor<1x32x4x4x4xf32>, %w: tensor<4xf32>, %b: tensor<32xf32>) {
  // expected-error @+1 {{weight must be [C] = [32] (the size of dimension 1), found 'tensor<4xf32>'}}
  %y = trellis.layer_norm %x, %w, %b {axis = 1 : i64, eps = 1.0e-5 : f64} : (tensor<1x32x4x4x4xf32>, tensor<4xf32>, tensor<32xf32>) -> tensor<1x32x4x4x4xf32>
  return
}

// -----

func.func @layer_norm_bias_shape(%x: tensor<4x8xf16>, %w: tensor<8xf32>, %b: tensor<1x8xf32>) {
  // expected-error @+1 {{bias must be [C] = [8] (the size of dimension 1), found 'tensor<1x8xf32>'}}
  %y = trellis.layer_norm %x, %w, %b {eps = 1.0e-6 : f64} : (tensor<4x8xf16>, tensor<8xf32>, tensor<1x8xf32>) -> tensor<4x8xf16>
  return
}

// -----

func.func @layer_norm_affine_type(%x: tensor<4x8xf16>, %w: tensor<8xf16>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit float values, but got 'tensor<8xf16>'}}
  %y = trellis.layer_norm %x, %w, %w {eps = 1.0e-6 : f64} : (tensor<4x8xf16>, tensor<8xf16>, tensor<8xf16>) -> tensor<4x8xf16>
  return
}

// -----

func.func @layer_norm_result(%x: tensor<4x8xf16>) {
  // expected-error @+1 {{result #0 has type 'tensor<4x8xf32>' but the operands and attributes give 'tensor<4x8xf16>'}}
  %y = trellis.layer_norm %x {eps = 1.0e-6 : f64} : (tensor<4x8xf16>) -> tensor<4x8xf32>
  return
}

// -----

func.func @head_rms_norm_rank(%x: tensor<64xf16>, %g: tensor<1x64xf32>) {
  // expected-error @+1 {{input must be [..., H, d] (rank >= 2), found 'tensor<64xf16>'}}
  %y = trellis.head_rms_norm %x, %g : (tensor<64xf16>, tensor<1x64xf32>) -> tensor<64xf16>
  return
}

// -----

func.func @head_rms_norm_dynamic(%x: tensor<4x?x64xf16, #trellis.bounds<[16]>>, %g: tensor<16x64xf32>) {
  // expected-error @+1 {{the head dimensions [H, d] of the input must be static, found 'tensor<4x?x64xf16, #trellis.bounds<[16]>>'}}
  %y = trellis.head_rms_norm %x, %g : (tensor<4x?x64xf16, #trellis.bounds<[16]>>, tensor<16x64xf32>) -> tensor<4x?x64xf16, #trellis.bounds<[16]>>
  return
}

// -----

func.func @head_rms_norm_gamma(%x: tensor<4x16x64xf16>, %g: tensor<64x16xf32>) {
  // expected-error @+1 {{gamma must be [H, d] = [16, 64] (the input's last two dimensions), found 'tensor<64x16xf32>'}}
  %y = trellis.head_rms_norm %x, %g : (tensor<4x16x64xf16>, tensor<64x16xf32>) -> tensor<4x16x64xf16>
  return
}

// -----

func.func @head_rms_norm_gamma_type(%x: tensor<4x16x64xf16>, %g: tensor<16x64xf16>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit float values, but got 'tensor<16x64xf16>'}}
  %y = trellis.head_rms_norm %x, %g : (tensor<4x16x64xf16>, tensor<16x64xf16>) -> tensor<4x16x64xf16>
  return
}

// -----

func.func @head_rms_norm_result(%x: tensor<4x16x64xf16>, %g: tensor<16x64xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<4x16x64xf32>' but the operands and attributes give 'tensor<4x16x64xf16>'}}
  %y = trellis.head_rms_norm %x, %g : (tensor<4x16x64xf16>, tensor<16x64xf32>) -> tensor<4x16x64xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<4x8xf16>) {
  // expected-error @+1 {{axis -3 is out of range for rank 2 (expected [-2, 2))}}
  %y = trellis.softmax %x {axis = -3 : i64} : (tensor<4x8xf16>) -> tensor<4x8xf16>
  return
}

// -----

func.func @reduce_kind(%x: tensor<4x8xf16>) {
  // expected-error @+1 {{kind must be "sum", "mean" or "max", found "min"}}
  %y = trellis.reduce %x {kind = "min"} : (tensor<4x8xf16>) -> tensor<4xf16>
  return
}

// -----

func.func @reduce_axis(%x: tensor<4x8xf16>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2 (expected [-2, 2))}}
  %y = trellis.reduce %x {kind = "sum", axis = 2 : i64} : (tensor<4x8xf16>) -> tensor<4xf16>
  return
}

// -----

func.func @reduce_result(%x: tensor<4x8xf16>) {
  // expected-error @+1 {{result #0 has type 'tensor<4xf16>' but the operands and attributes give 'tensor<4x1xf16>'}}
  %y = trellis.reduce %x {kind = "sum", keepdim = true} : (tensor<4x8xf16>) -> tensor<4xf16>
  return
}

// -----

func.func @reduce_int(%x: tensor<4x8xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 16-bit float or 32-bit float values}}
  %y = trellis.reduce %x {kind = "sum"} : (tensor<4x8xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @softmax_result(%x: tensor<4x8xf16>) {
  // expected-error @+1 {{result #0 has type 'tensor<8x4xf16>' but the operands and attributes give 'tensor<4x8xf16>'}}
  %y = trellis.softmax %x : (tensor<4x8xf16>) -> tensor<8x4xf16>
  return
}

// -----

func.func @attention_q_rank(%q: tensor<2x16x64xf16>, %k: tensor<2x8x16x64xf16>) {
  // expected-error @+1 {{q must be [B, Lq, H, d] (rank 4), found 'tensor<2x16x64xf16>'}}
  %o = trellis.attention %q, %k, %k {scale = 0.125 : f64} : (tensor<2x16x64xf16>, tensor<2x8x16x64xf16>, tensor<2x8x16x64xf16>) -> tensor<2x16x64xf16>
  return
}

// -----

func.func @attention_k_rank(%q: tensor<2x4x16x64xf16>, %k: tensor<8x16x64xf16>, %v: tensor<2x8x16x64xf16>) {
  // expected-error @+1 {{k must be [B, Lk, H, d] (rank 4), found 'tensor<8x16x64xf16>'}}
  %o = trellis.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x4x16x64xf16>, tensor<8x16x64xf16>, tensor<2x8x16x64xf16>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_v_rank(%q: tensor<2x4x16x64xf16>, %k: tensor<2x8x16x64xf16>, %v: tensor<2x8x1024xf16>) {
  // expected-error @+1 {{v must be [B, Lk, H, dv] (rank 4), found 'tensor<2x8x1024xf16>'}}
  %o = trellis.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x4x16x64xf16>, tensor<2x8x16x64xf16>, tensor<2x8x1024xf16>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_k_type(%q: tensor<2x4x16x64xf16>, %k: tensor<2x8x16x64xf32>, %v: tensor<2x8x16x64xf16>) {
  // expected-error @+1 {{k element type 'f32' differs from q element type 'f16'}}
  %o = trellis.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x4x16x64xf16>, tensor<2x8x16x64xf32>, tensor<2x8x16x64xf16>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_v_type(%q: tensor<2x4x16x64xf16>, %k: tensor<2x8x16x64xf16>, %v: tensor<2x8x16x64xf32>) {
  // expected-error @+1 {{v element type 'f32' differs from q element type 'f16'}}
  %o = trellis.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x4x16x64xf16>, tensor<2x8x16x64xf16>, tensor<2x8x16x64xf32>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_tiles_empty(%q: tensor<2x4x16x64xf16>) {
  // expected-error @+1 {{tiles must name at least one kernel}}
  %o = trellis.attention %q, %q, %q {scale = 0.125 : f64, tiles = []} : (tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_tiles_twice(%q: tensor<2x4x16x64xf16>) {
  // expected-error @+1 {{tiles names 'trellis_attn_sm90_d64_m128_n64_s4' twice}}
  %o = trellis.attention %q, %q, %q {scale = 0.125 : f64, tiles = ["trellis_attn_sm90_d64_m128_n64_s4", "trellis_attn_sm90_d64_m128_n64_s4"]} : (tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_tiles_type(%q: tensor<2x4x16x64xf16>) {
  // expected-error @+1 {{attribute 'tiles' failed to satisfy constraint: string array attribute}}
  %o = trellis.attention %q, %q, %q {scale = 0.125 : f64, tiles = [64]} : (tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @sparse_attention_tiles_empty_name(%q: tensor<?x12x64xf16, #trellis.bounds<[32768]>>, %s: !trellis.segments<max_length = 512, bound = 32768>) {
  // expected-error @+1 {{tiles holds an empty kernel name}}
  %o = trellis.sparse.attention %q, %q, %q, %s {scale = 1.250000e-01 : f64, tiles = [""]} : (tensor<?x12x64xf16, #trellis.bounds<[32768]>>, tensor<?x12x64xf16, #trellis.bounds<[32768]>>, tensor<?x12x64xf16, #trellis.bounds<[32768]>>, !trellis.segments<max_length = 512, bound = 32768>) -> tensor<?x12x64xf16, #trellis.bounds<[32768]>>
  return
}

// -----

func.func @attention_batch_k(%q: tensor<2x4x16x64xf16>, %k: tensor<3x8x16x64xf16>, %v: tensor<2x8x16x64xf16>) {
  // expected-error @+1 {{batch sizes differ: q has 2, k has 3}}
  %o = trellis.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x4x16x64xf16>, tensor<3x8x16x64xf16>, tensor<2x8x16x64xf16>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_batch_v(%q: tensor<2x4x16x64xf16>, %k: tensor<2x8x16x64xf16>, %v: tensor<1x8x16x64xf16>) {
  // expected-error @+1 {{batch sizes differ: q has 2, v has 1}}
  %o = trellis.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x4x16x64xf16>, tensor<2x8x16x64xf16>, tensor<1x8x16x64xf16>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_heads_k(%q: tensor<2x4x16x64xf16>, %k: tensor<2x8x8x64xf16>, %v: tensor<2x8x16x64xf16>) {
  // expected-error @+1 {{head counts differ: q has 16, k has 8}}
  %o = trellis.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x4x16x64xf16>, tensor<2x8x8x64xf16>, tensor<2x8x16x64xf16>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_heads_v(%q: tensor<2x4x16x64xf16>, %k: tensor<2x8x16x64xf16>, %v: tensor<2x8x4x64xf16>) {
  // expected-error @+1 {{head counts differ: q has 16, v has 4}}
  %o = trellis.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x4x16x64xf16>, tensor<2x8x16x64xf16>, tensor<2x8x4x64xf16>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_head_dim(%q: tensor<2x4x16x64xf16>, %k: tensor<2x8x16x32xf16>, %v: tensor<2x8x16x64xf16>) {
  // expected-error @+1 {{head dims differ: q has 64, k has 32}}
  %o = trellis.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x4x16x64xf16>, tensor<2x8x16x32xf16>, tensor<2x8x16x64xf16>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_key_length(%q: tensor<2x4x16x64xf16>, %k: tensor<2x8x16x64xf16>, %v: tensor<2x9x16x64xf16>) {
  // expected-error @+1 {{key lengths differ: k has 8, v has 9}}
  %o = trellis.attention %q, %k, %v {scale = 0.125 : f64} : (tensor<2x4x16x64xf16>, tensor<2x8x16x64xf16>, tensor<2x9x16x64xf16>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_scale(%q: tensor<2x4x16x64xf16>) {
  // expected-error @+1 {{scale must be > 0, found -1}}
  %o = trellis.attention %q, %q, %q {scale = -1.0 : f64} : (tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_result(%q: tensor<2x4x16x64xf16>, %v: tensor<2x4x16x32xf16>) {
  // expected-error @+1 {{result #0 has type 'tensor<2x4x16x64xf16>' but the operands and attributes give 'tensor<2x4x16x32xf16>'}}
  %o = trellis.attention %q, %q, %v {scale = 0.125 : f64} : (tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>, tensor<2x4x16x32xf16>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_precision_name(%q: tensor<2x4x16x64xf16>) {
  // expected-error @+1 {{precision must be "fp8_e4m3", found "fp16"}}
  %o = trellis.attention %q, %q, %q {precision = "fp16", scale = 0.125 : f64} : (tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_fp8_head_dim_q(%q: tensor<2x4x16x32xf16>) {
  // expected-error @+1 {{precision "fp8_e4m3" needs head dim 64, q has 32}}
  %o = trellis.attention %q, %q, %q {precision = "fp8_e4m3", scale = 0.125 : f64} : (tensor<2x4x16x32xf16>, tensor<2x4x16x32xf16>, tensor<2x4x16x32xf16>) -> tensor<2x4x16x32xf16>
  return
}

// -----

func.func @attention_fp8_head_dim_v(%q: tensor<2x4x16x64xf16>, %v: tensor<2x4x16x128xf16>) {
  // expected-error @+1 {{precision "fp8_e4m3" needs head dim 64, v has 128}}
  %o = trellis.attention %q, %q, %v {precision = "fp8_e4m3", scale = 0.125 : f64} : (tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>, tensor<2x4x16x128xf16>) -> tensor<2x4x16x128xf16>
  return
}

// -----

func.func @attention_fp8_cross(%q: tensor<2x4x16x64xf16>, %k: tensor<2x8x16x64xf16>, %g: tensor<16x64xf32>) {
  // expected-error @+1 {{precision "fp8_e4m3" is for self-attention, but the sequence lengths differ: q has 4, k has 8}}
  %o = trellis.attention %q, %k, %k q_gamma %g k_gamma %g {precision = "fp8_e4m3", scale = 0.125 : f64} : (tensor<2x4x16x64xf16>, tensor<2x8x16x64xf16>, tensor<2x8x16x64xf16>, tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_fp8_gammas(%q: tensor<2x4x16x64xf16>, %g: tensor<16x64xf32>) {
  // expected-error @+1 {{precision "fp8_e4m3" needs q_gamma and k_gamma (the head RMS norms of q and k)}}
  %o = trellis.attention %q, %q, %q q_gamma %g {precision = "fp8_e4m3", scale = 0.125 : f64} : (tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>, tensor<16x64xf32>) -> tensor<2x4x16x64xf16>
  return
}

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//


// -----

func.func @attention_v_amax_without_fp8(%q: tensor<2x4x16x64xf16>, %g: tensor<16x64xf32>) {
  // expected-error @+1 {{v_amax (static v scales) needs precision "fp8_e4m3"}}
  %o = trellis.attention %q, %q, %q q_gamma %g k_gamma %g {scale = 0.125 : f64, v_amax = array<f32: 1.0>} : (tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>, tensor<2x4x16x64xf16>, tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<2x4x16x64xf16>
  return
}

// -----

func.func @attention_v_amax_heads(%q: tensor<2x4x2x64xf16>, %g: tensor<2x64xf32>) {
  // expected-error @+1 {{v_amax must hold one value per head (2), found 3}}
  %o = trellis.attention %q, %q, %q q_gamma %g k_gamma %g {precision = "fp8_e4m3", scale = 0.125 : f64, v_amax = array<f32: 1.0, 2.0, 3.0>} : (tensor<2x4x2x64xf16>, tensor<2x4x2x64xf16>, tensor<2x4x2x64xf16>, tensor<2x64xf32>, tensor<2x64xf32>) -> tensor<2x4x2x64xf16>
  return
}

// -----

func.func @attention_v_amax_positive(%q: tensor<2x4x2x64xf16>, %g: tensor<2x64xf32>) {
  // expected-error @+1 {{v_amax values must be positive and finite, found 0}}
  %o = trellis.attention %q, %q, %q q_gamma %g k_gamma %g {precision = "fp8_e4m3", scale = 0.125 : f64, v_amax = array<f32: 1.0, 0.0>} : (tensor<2x4x2x64xf16>, tensor<2x4x2x64xf16>, tensor<2x4x2x64xf16>, tensor<2x64xf32>, tensor<2x64xf32>) -> tensor<2x4x2x64xf16>
  return
}
// -----

func.func @timestep_rank(%t: tensor<2x1xf32>) {
  // expected-error @+1 {{t must be [B] (rank 1), found 'tensor<2x1xf32>'}}
  %e = trellis.timestep_embedding %t : (tensor<2x1xf32>) -> tensor<2x256xf32>
  return
}

// -----

func.func @timestep_dim(%t: tensor<2xf32>) {
  // expected-error @+1 {{dim must be even and >= 2, found 255}}
  %e = trellis.timestep_embedding %t {dim = 255 : i64} : (tensor<2xf32>) -> tensor<2x255xf32>
  return
}

// -----

func.func @timestep_max_period(%t: tensor<2xf32>) {
  // expected-error @+1 {{max_period must be > 0, found 0}}
  %e = trellis.timestep_embedding %t {max_period = 0.0 : f64} : (tensor<2xf32>) -> tensor<2x256xf32>
  return
}

// -----

func.func @timestep_type(%t: tensor<2xf16>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float values, but got 'tensor<2xf16>'}}
  %e = trellis.timestep_embedding %t : (tensor<2xf16>) -> tensor<2x256xf32>
  return
}

// -----

func.func @timestep_result(%t: tensor<2xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<2x128xf32>' but the operands and attributes give 'tensor<2x256xf32>'}}
  %e = trellis.timestep_embedding %t : (tensor<2xf32>) -> tensor<2x128xf32>
  return
}

// -----

func.func @ape_pos(%p: tensor<16x4xi32>) {
  // expected-error @+1 {{pos must be [L, 3] (x, y, z), found 'tensor<16x4xi32>'}}
  %e = trellis.ape %p {channels = 768 : i64} : (tensor<16x4xi32>) -> tensor<16x768xf32>
  return
}

// -----

func.func @ape_channels(%p: tensor<16x3xi32>) {
  // expected-error @+1 {{channels must be >= 6 (floor(channels / 6) frequencies per axis), found 5}}
  %e = trellis.ape %p {channels = 5 : i64} : (tensor<16x3xi32>) -> tensor<16x5xf32>
  return
}

// -----

func.func @ape_type(%p: tensor<16x3xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit signless integer values, but got 'tensor<16x3xf32>'}}
  %e = trellis.ape %p {channels = 768 : i64} : (tensor<16x3xf32>) -> tensor<16x768xf32>
  return
}

// -----

func.func @ape_result(%p: tensor<?x3xi32, #trellis.bounds<[100]>>) {
  // expected-error @+1 {{result #0 has type 'tensor<100x768xf32>' but the operands and attributes give 'tensor<?x768xf32, #trellis.bounds<[100]>>'}}
  %e = trellis.ape %p {channels = 768 : i64} : (tensor<?x3xi32, #trellis.bounds<[100]>>) -> tensor<100x768xf32>
  return
}

//===----------------------------------------------------------------------===//
// Dense convolution and layout
//===----------------------------------------------------------------------===//

// -----

func.func @conv3d_input_rank(%x: tensor<8x16x16x16xf32>, %w: tensor<4x8x3x3x3xf32>) {
  // expected-error @+1 {{input must be [B, I, D, H, W] (rank 5), found 'tensor<8x16x16x16xf32>'}}
  %y = trellis.conv3d %x, %w : (tensor<8x16x16x16xf32>, tensor<4x8x3x3x3xf32>) -> tensor<4x16x16x16xf32>
  return
}

// -----

func.func @conv3d_weight_rank(%x: tensor<1x8x16x16x16xf32>, %w: tensor<4x8x3x3xf32>) {
  // expected-error @+1 {{weight must be [O, I, k, k, k] (rank 5), found 'tensor<4x8x3x3xf32>'}}
  %y = trellis.conv3d %x, %w : (tensor<1x8x16x16x16xf32>, tensor<4x8x3x3xf32>) -> tensor<1x4x16x16x16xf32>
  return
}

// -----

func.func @conv3d_weight_static(%x: tensor<1x8x16x16x16xf32>, %w: tensor<?x8x3x3x3xf32, #trellis.bounds<[4]>>) {
  // expected-error @+1 {{weight must have a static shape, found 'tensor<?x8x3x3x3xf32, #trellis.bounds<[4]>>'}}
  %y = trellis.conv3d %x, %w : (tensor<1x8x16x16x16xf32>, tensor<?x8x3x3x3xf32, #trellis.bounds<[4]>>) -> tensor<1x?x16x16x16xf32, #trellis.bounds<[4]>>
  return
}

// -----

func.func @conv3d_kernel(%x: tensor<1x8x16x16x16xf32>, %w: tensor<4x8x3x3x1xf32>) {
  // expected-error @+1 {{weight kernel must be cubic (k x k x k), found 3x3x1}}
  %y = trellis.conv3d %x, %w : (tensor<1x8x16x16x16xf32>, tensor<4x8x3x3x1xf32>) -> tensor<1x4x16x16x18xf32>
  return
}

// -----

func.func @conv3d_type(%x: tensor<1x8x16x16x16xf32>, %w: tensor<4x8x3x3x3xf16>) {
  // expected-error @+1 {{weight element type 'f16' differs from input element type 'f32'}}
  %y = trellis.conv3d %x, %w : (tensor<1x8x16x16x16xf32>, tensor<4x8x3x3x3xf16>) -> tensor<1x4x16x16x16xf32>
  return
}

// -----

func.func @conv3d_channels(%x: tensor<1x8x16x16x16xf32>, %w: tensor<4x16x3x3x3xf32>) {
  // expected-error @+1 {{input channels differ: input has 8, weight has 16}}
  %y = trellis.conv3d %x, %w : (tensor<1x8x16x16x16xf32>, tensor<4x16x3x3x3xf32>) -> tensor<1x4x16x16x16xf32>
  return
}

// -----

func.func @conv3d_bias_shape(%x: tensor<1x8x16x16x16xf32>, %w: tensor<4x8x3x3x3xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{bias must be [4], found 'tensor<8xf32>'}}
  %y = trellis.conv3d %x, %w, %b : (tensor<1x8x16x16x16xf32>, tensor<4x8x3x3x3xf32>, tensor<8xf32>) -> tensor<1x4x16x16x16xf32>
  return
}

// -----

func.func @conv3d_bias_type(%x: tensor<1x8x16x16x16xf32>, %w: tensor<4x8x3x3x3xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{bias element type 'f16' differs from input element type 'f32'}}
  %y = trellis.conv3d %x, %w, %b : (tensor<1x8x16x16x16xf32>, tensor<4x8x3x3x3xf32>, tensor<4xf16>) -> tensor<1x4x16x16x16xf32>
  return
}

// -----

func.func @conv3d_padding(%x: tensor<1x8x16x16x16xf32>, %w: tensor<4x8x3x3x3xf32>) {
  // expected-error @+1 {{padding must be >= 0, found -1}}
  %y = trellis.conv3d %x, %w {padding = -1 : i64} : (tensor<1x8x16x16x16xf32>, tensor<4x8x3x3x3xf32>) -> tensor<1x4x12x12x12xf32>
  return
}

// -----

func.func @conv3d_empty(%x: tensor<1x8x2x16x16xf32>, %w: tensor<4x8x3x3x3xf32>) {
  // expected-error @+1 {{output dimension 2 would be empty: input size 2, padding 0, kernel 3}}
  %y = trellis.conv3d %x, %w {padding = 0 : i64} : (tensor<1x8x2x16x16xf32>, tensor<4x8x3x3x3xf32>) -> tensor<1x4x0x14x14xf32>
  return
}

// -----

func.func @conv3d_result(%x: tensor<1x8x16x16x16xf32>, %w: tensor<4x8x3x3x3xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<1x4x16x16x16xf32>' but the operands and attributes give 'tensor<1x4x14x14x14xf32>'}}
  %y = trellis.conv3d %x, %w {padding = 0 : i64} : (tensor<1x8x16x16x16xf32>, tensor<4x8x3x3x3xf32>) -> tensor<1x4x16x16x16xf32>
  return
}

// -----

func.func @pixel_shuffle_rank(%x: tensor<64x4x4x4xf16>) {
  // expected-error @+1 {{input must be [B, C*f^3, D, H, W] (rank 5), found 'tensor<64x4x4x4xf16>'}}
  %y = trellis.pixel_shuffle_3d %x : (tensor<64x4x4x4xf16>) -> tensor<8x8x8x8xf16>
  return
}

// -----

func.func @pixel_shuffle_factor(%x: tensor<1x64x4x4x4xf16>) {
  // expected-error @+1 {{factor must be >= 1, found 0}}
  %y = trellis.pixel_shuffle_3d %x {factor = 0 : i64} : (tensor<1x64x4x4x4xf16>) -> tensor<1x64x4x4x4xf16>
  return
}

// -----

func.func @pixel_shuffle_channels(%x: tensor<1x60x4x4x4xf16>) {
  // expected-error @+1 {{input channels (60) must be a static multiple of factor^3 = 8}}
  %y = trellis.pixel_shuffle_3d %x : (tensor<1x60x4x4x4xf16>) -> tensor<1x7x8x8x8xf16>
  return
}

// -----

func.func @pixel_shuffle_result(%x: tensor<1x64x4x4x4xf16>) {
  // expected-error @+1 {{result #0 has type 'tensor<1x64x4x4x4xf16>' but the operands and attributes give 'tensor<1x8x8x8x8xf16>'}}
  %y = trellis.pixel_shuffle_3d %x : (tensor<1x64x4x4x4xf16>) -> tensor<1x64x4x4x4xf16>
  return
}

// -----

func.func @reshape_type(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{result element type 'f16' differs from input element type 'f32'}}
  %y = trellis.reshape %x : (tensor<4x8xf32>) -> tensor<32xf16>
  return
}

// -----

func.func @reshape_dynamic(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{input and result must both be static or both have exactly one dynamic dimension, found 'tensor<4x8xf32>' -> 'tensor<?xf32, #trellis.bounds<[32]>>'}}
  %y = trellis.reshape %x : (tensor<4x8xf32>) -> tensor<?xf32, #trellis.bounds<[32]>>
  return
}

// -----

func.func @reshape_two_dynamic(%x: tensor<?x?xf32, #trellis.bounds<[4, 8]>>) {
  // expected-error @+1 {{input and result must both be static or both have exactly one dynamic dimension}}
  %y = trellis.reshape %x : (tensor<?x?xf32, #trellis.bounds<[4, 8]>>) -> tensor<?xf32, #trellis.bounds<[32]>>
  return
}

// -----

func.func @reshape_count(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{element counts differ: input 'tensor<4x8xf32>' has 32, result 'tensor<4x4xf32>' has 16}}
  %y = trellis.reshape %x : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @reshape_max_count(%x: tensor<?x8xf32, #trellis.bounds<[10]>>) {
  // expected-error @+1 {{maximal element counts differ: input 'tensor<?x8xf32, #trellis.bounds<[10]>>' holds up to 80, result 'tensor<?x4xf32, #trellis.bounds<[10]>>' up to 40}}
  %y = trellis.reshape %x : (tensor<?x8xf32, #trellis.bounds<[10]>>) -> tensor<?x4xf32, #trellis.bounds<[10]>>
  return
}

// -----

func.func @permute_duplicate(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{perm must be a permutation of 0..2, found [0, 0, 1]}}
  %y = trellis.permute %x {perm = array<i64: 0, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<2x2x3xf32>
  return
}

// -----

func.func @permute_length(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{perm must be a permutation of 0..2, found [1, 0]}}
  %y = trellis.permute %x {perm = array<i64: 1, 0>} : (tensor<2x3x4xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @permute_result(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<2x3x4xf32>' but the operands and attributes give 'tensor<4x2x3xf32>'}}
  %y = trellis.permute %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @concat_empty() {
  // expected-error @+1 {{needs at least one input}}
  %y = "trellis.concat"() <{axis = 0 : i64}> : () -> tensor<4xf32>
  return
}

// -----

func.func @concat_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2 (expected [-2, 2))}}
  %y = trellis.concat %x, %x {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_type(%x: tensor<2x3xf32>, %y: tensor<2x3xf16>) {
  // expected-error @+1 {{input #1 element type 'f16' differs from input #0 element type 'f32'}}
  %z = trellis.concat %x, %y {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_rank(%x: tensor<2x3xf32>, %y: tensor<2x3x1xf32>) {
  // expected-error @+1 {{input #1 has rank 3 but input #0 has 2}}
  %z = trellis.concat %x, %y {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3x1xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_dims(%x: tensor<2x3xf32>, %y: tensor<4x3xf32>) {
  // expected-error @+1 {{input #1 dimension 0 (4) differs from input #0 (2)}}
  %z = trellis.concat %x, %y {axis = 1 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_result(%x: tensor<?x3xf32, #trellis.bounds<[5]>>, %y: tensor<4x3xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<?x3xf32, #trellis.bounds<[5]>>' but the operands and attributes give 'tensor<?x3xf32, #trellis.bounds<[9]>>'}}
  %z = trellis.concat %x, %y {axis = 0 : i64} : (tensor<?x3xf32, #trellis.bounds<[5]>>, tensor<4x3xf32>) -> tensor<?x3xf32, #trellis.bounds<[5]>>
  return
}

// -----

func.func @split_axis(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2 (expected [-2, 2))}}
  %a, %b = trellis.split %x {axis = 2 : i64, sizes = array<i64: 3, 3>} : (tensor<2x6xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @split_results(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{has 2 results but 3 sizes (one result per size)}}
  %a, %b = trellis.split %x {axis = 1 : i64, sizes = array<i64: 2, 2, 2>} : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
  return
}

// -----

func.func @split_size(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{split sizes must be >= 1, found 0}}
  %a, %b = trellis.split %x {axis = 1 : i64, sizes = array<i64: 6, 0>} : (tensor<2x6xf32>) -> (tensor<2x6xf32>, tensor<2x0xf32>)
  return
}

// -----

func.func @split_sum(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{sizes sum to 5 but dimension 1 has size 6}}
  %a, %b = trellis.split %x {axis = 1 : i64, sizes = array<i64: 3, 2>} : (tensor<2x6xf32>) -> (tensor<2x3xf32>, tensor<2x2xf32>)
  return
}

// -----

func.func @split_dynamic(%x: tensor<?x6xf32, #trellis.bounds<[4]>>) {
  // expected-error @+1 {{sizes sum to 4 but dimension 0 has size ?}}
  %a, %b = trellis.split %x {axis = 0 : i64, sizes = array<i64: 2, 2>} : (tensor<?x6xf32, #trellis.bounds<[4]>>) -> (tensor<2x6xf32>, tensor<2x6xf32>)
  return
}

// -----

func.func @split_result(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{result #1 has type 'tensor<2x3xf32>' but the operands and attributes give 'tensor<2x2xf32>'}}
  %a, %b = trellis.split %x {axis = 1 : i64, sizes = array<i64: 4, 2>} : (tensor<2x6xf32>) -> (tensor<2x4xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @constant_result() {
  // expected-error @+1 {{result #0 has type 'tensor<3xf32>' but the operands and attributes give 'tensor<2xf32>'}}
  %c = "trellis.constant"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<3xf32>
  return
}

//===----------------------------------------------------------------------===//
// Flow sampler
//===----------------------------------------------------------------------===//

// -----

func.func @flow_noise_type(%n: tensor<1x8xf16>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{noise must be f32 (the sampler state), found 'tensor<1x8xf16>'}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf16>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf16> {
  ^bb0(%x: tensor<1x8xf16>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<1x8xf16>
  }
  return
}

// -----

func.func @flow_cond_shape(%n: tensor<1x8xf32>, %c: tensor<4x16xf32>) {
  // expected-error @+1 {{cond must be a static [N, Lc, Cc] tensor, found 'tensor<4x16xf32>'}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_neg_type(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>, %u: tensor<1x4x16xf16>) {
  // expected-error @+1 {{neg_cond element type 'f16' differs from cond element type 'f32'}}
  %x = trellis.flow_sample %n, %c, %u {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf16>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_neg_shape(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>, %u: tensor<1x1x16xf32>) {
  // expected-error @+1 {{neg_cond must be a static [1 or B, 4, 16] tensor, found 'tensor<1x1x16xf32>'}}
  %x = trellis.flow_sample %n, %c, %u {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x1x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_steps(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{steps must be >= 1, found 0}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 0 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_rescale(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{rescale_t must be > 0, found 0}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 0.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_sigma_min(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{sigma_min must be >= 0, found -1e-05}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, sigma_min = -1.0e-5 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_cfg_strength(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{cfg_strength must be >= 0, found -3}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = -3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_interval_size(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{cfg_interval must be [lo, hi] with lo <= hi, found [0.5, 0.75, 1]}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 0.75, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_interval_order(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{cfg_interval must be [lo, hi] with lo <= hi, found [1, 0.5]}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 1.0, 0.5>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_body_arity(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{body must take 3 arguments (x, tau, c), found 2}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>):
    trellis.yield %x : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_body_x(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>, %v: tensor<1x8xf32>) {
  // expected-error @+1 {{body argument #0 (x) must have the noise type 'tensor<1x8xf32>', found 'tensor<8xf32>'}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    trellis.yield %v : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_body_tau(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{body argument #1 (tau) must be tensor<Bxf32>, found 'tensor<1xf16>'}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf16>, %cc: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_body_c(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{body argument #2 (c) must be [B, Lc, Cc] = [1, 4, 16] of cond's element type 'f32', found 'tensor<1x4x8xf32>'}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x8xf32>):
    trellis.yield %x : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_cond_batch(%n: tensor<2x8xf32>, %c: tensor<3x4x16xf32>, %u: tensor<1x4x16xf32>) {
  // expected-error @+1 {{cond batch 3 must be 1 or B = 2 with multi_image mode none}}
  %x = trellis.flow_sample %n, %c, %u {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<2x8xf32>, tensor<3x4x16xf32>, tensor<1x4x16xf32>) -> tensor<2x8xf32> {
  ^bb0(%x: tensor<2x8xf32>, %tau: tensor<2xf32>, %cc: tensor<2x4x16xf32>):
    trellis.yield %x : tensor<2x8xf32>
  }
  return
}

// -----

func.func @flow_neg_batch(%n: tensor<2x8xf32>, %c: tensor<2x4x16xf32>, %u: tensor<3x4x16xf32>) {
  // expected-error @+1 {{neg_cond batch 3 must be 1 or B = 2}}
  %x = trellis.flow_sample %n, %c, %u {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<2x8xf32>, tensor<2x4x16xf32>, tensor<3x4x16xf32>) -> tensor<2x8xf32> {
  ^bb0(%x: tensor<2x8xf32>, %tau: tensor<2xf32>, %cc: tensor<2x4x16xf32>):
    trellis.yield %x : tensor<2x8xf32>
  }
  return
}

// -----

func.func @flow_noise_batch(%n: tensor<2x8xf32>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{noise batch 2 differs from the body's batch B = 1}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<2x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<2x8xf32> {
  ^bb0(%x: tensor<2x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<2x8xf32>
  }
  return
}

// -----

func.func @flow_terminator(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{body must end with trellis.yield}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    llvm.unreachable
  }
  return
}

// -----

func.func @flow_yield_type(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>, %v: tensor<1x4xf32>) {
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    // expected-error @+1 {{yields 'tensor<1x4xf32>' but the velocity must have x's type 'tensor<1x8xf32>'}}
    trellis.yield %v : tensor<1x4xf32>
  }
  return
}

// -----

func.func @flow_result(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<1x4xf32>' but the operands and attributes give 'tensor<1x8xf32>'}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_two_blocks(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{expects region #0 to have 0 or 1 blocks}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    cf.br ^bb1
  ^bb1:
    trellis.yield %n : tensor<1x8xf32>
  }
  return
}

// -----

func.func @yield_parent(%v: tensor<4xf32>) {
  // expected-error @+1 {{expects parent op 'trellis.flow_sample'}}
  trellis.yield %v : tensor<4xf32>
}

// -----

func.func @cfg_combine_types(%a: tensor<4xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{vu must have vc's type 'tensor<4xf32>', found 'tensor<5xf32>'}}
  %v = trellis.cfg_combine %a, %b {strength = 3.0 : f64} : (tensor<4xf32>, tensor<5xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @cfg_combine_strength(%a: tensor<4xf32>) {
  // expected-error @+1 {{strength must be >= 0, found -1}}
  %v = trellis.cfg_combine %a, %a {strength = -1.0 : f64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @cfg_combine_f16(%a: tensor<4xf16>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float values, but got 'tensor<4xf16>'}}
  %v = trellis.cfg_combine %a, %a {strength = 1.0 : f64} : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  return
}

// -----

func.func @cfg_combine_result(%a: tensor<4xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<1x4xf32>' but the operands and attributes give 'tensor<4xf32>'}}
  %v = trellis.cfg_combine %a, %a {strength = 1.0 : f64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<1x4xf32>
  return
}

// -----

func.func @euler_types(%x: tensor<4xf32>, %v: tensor<1x4xf32>) {
  // expected-error @+1 {{v must have the input's type 'tensor<4xf32>', found 'tensor<1x4xf32>'}}
  %y = trellis.euler_update %x, %v {dt = 0.1 : f64} : (tensor<4xf32>, tensor<1x4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @euler_f16(%x: tensor<4xf16>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float values, but got 'tensor<4xf16>'}}
  %y = trellis.euler_update %x, %x {dt = 0.1 : f64} : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
  return
}

// -----

func.func @euler_result(%x: tensor<?x4xf32, #trellis.bounds<[9]>>) {
  // expected-error @+1 {{result #0 has type 'tensor<?x4xf32, #trellis.bounds<[10]>>' but the operands and attributes give 'tensor<?x4xf32, #trellis.bounds<[9]>>'}}
  %y = trellis.euler_update %x, %x {dt = 0.1 : f64} : (tensor<?x4xf32, #trellis.bounds<[9]>>, tensor<?x4xf32, #trellis.bounds<[9]>>) -> tensor<?x4xf32, #trellis.bounds<[10]>>
  return
}

// -----

func.func @time_grid_steps() {
  // expected-error @+1 {{steps must be >= 1, found 0}}
  %g = trellis.time_grid {rescale_t = 3.0 : f64, steps = 0 : i64} : () -> tensor<1xf32>
  return
}

// -----

func.func @time_grid_rescale() {
  // expected-error @+1 {{rescale_t must be > 0}}
  %g = trellis.time_grid {rescale_t = 0.0 : f64, steps = 4 : i64} : () -> tensor<4xf32>
  return
}

// -----

func.func @time_grid_result() {
  // expected-error @+1 {{result must be a static [R] tensor with R >= steps (4), found 'tensor<3xf32>'}}
  %g = trellis.time_grid {rescale_t = 3.0 : f64, steps = 4 : i64} : () -> tensor<3xf32>
  return
}

// -----

func.func @time_row_grid(%t: tensor<4x8xf16>, %g: tensor<4x1xf32>, %tau: tensor<1xf32>) {
  // expected-error @+1 {{grid must be a static [S] tensor, found 'tensor<4x1xf32>'}}
  %r = trellis.time_row %t, %g, %tau : (tensor<4x8xf16>, tensor<4x1xf32>, tensor<1xf32>) -> tensor<1x8xf16>
  return
}

// -----

func.func @time_row_rows(%t: tensor<5x8xf16>, %g: tensor<4xf32>, %tau: tensor<1xf32>) {
  // expected-error @+1 {{table must be a static [4, D...] tensor (one row per grid value), found 'tensor<5x8xf16>'}}
  %r = trellis.time_row %t, %g, %tau : (tensor<5x8xf16>, tensor<4xf32>, tensor<1xf32>) -> tensor<1x8xf16>
  return
}

// -----

func.func @time_row_rank(%t: tensor<4xf16>, %g: tensor<4xf32>, %tau: tensor<1xf32>) {
  // expected-error @+1 {{table must be a static [4, D...] tensor (one row per grid value), found 'tensor<4xf16>'}}
  %r = trellis.time_row %t, %g, %tau : (tensor<4xf16>, tensor<4xf32>, tensor<1xf32>) -> tensor<1xf16>
  return
}

// -----

func.func @time_row_tau(%t: tensor<4x8xf16>, %g: tensor<4xf32>, %tau: tensor<1x1xf32>) {
  // expected-error @+1 {{tau must be [B] (rank 1), found 'tensor<1x1xf32>'}}
  %r = trellis.time_row %t, %g, %tau : (tensor<4x8xf16>, tensor<4xf32>, tensor<1x1xf32>) -> tensor<1x8xf16>
  return
}

// -----

func.func @time_row_result(%t: tensor<4x8xf16>, %g: tensor<4xf32>, %tau: tensor<2xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<1x8xf16>' but the operands and attributes give 'tensor<2x8xf16>'}}
  %r = trellis.time_row %t, %g, %tau : (tensor<4x8xf16>, tensor<4xf32>, tensor<2xf32>) -> tensor<1x8xf16>
  return
}

// -----

func.func @time_row_grid_type(%t: tensor<4x8xf16>, %g: tensor<4xf16>, %tau: tensor<1xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit float values}}
  %r = trellis.time_row %t, %g, %tau : (tensor<4x8xf16>, tensor<4xf16>, tensor<1xf32>) -> tensor<1x8xf16>
  return
}

//===----------------------------------------------------------------------===//
// Sparse coordinate sets
//===----------------------------------------------------------------------===//

// -----

func.func @occupancy_rank(%l: tensor<1x64x64x64xf32>) {
  // expected-error @+1 {{logits must be [B, 1, R, R, R] (rank 5), found 'tensor<1x64x64x64xf32>'}}
  %c = trellis.occupancy %l : (tensor<1x64x64x64xf32>) -> !trellis.coords<resolution = 64, bound = 262144>
  return
}

// -----

func.func @occupancy_channels(%l: tensor<1x2x64x64x64xf32>) {
  // expected-error @+1 {{logits must be [B, 1, R, R, R] with a static cubic grid, found 'tensor<1x2x64x64x64xf32>'}}
  %c = trellis.occupancy %l : (tensor<1x2x64x64x64xf32>) -> !trellis.coords<resolution = 64, bound = 262144>
  return
}

// -----

func.func @occupancy_cubic(%l: tensor<1x1x64x64x32xf32>) {
  // expected-error @+1 {{logits must be [B, 1, R, R, R] with a static cubic grid, found 'tensor<1x1x64x64x32xf32>'}}
  %c = trellis.occupancy %l : (tensor<1x1x64x64x32xf32>) -> !trellis.coords<resolution = 64, bound = 262144>
  return
}

// -----

func.func @occupancy_resolution(%l: tensor<1x1x2048x2048x2048xf32>) {
  // expected-error @+1 {{grid resolution 2048 exceeds the coordinate limit 1024}}
  %c = "trellis.occupancy"(%l) : (tensor<1x1x2048x2048x2048xf32>) -> !trellis.coords<resolution = 1024, bound = 1>
  return
}

// -----

func.func @occupancy_f16(%l: tensor<1x1x64x64x64xf16>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float values, but got 'tensor<1x1x64x64x64xf16>'}}
  %c = trellis.occupancy %l : (tensor<1x1x64x64x64xf16>) -> !trellis.coords<resolution = 64, bound = 262144>
  return
}

// -----

func.func @occupancy_result(%l: tensor<2x1x64x64x64xf32>) {
  // expected-error @+1 {{result #0 has type '!trellis.coords<resolution = 64, bound = 262144>' but the operands and attributes give '!trellis.coords<resolution = 64, bound = 524288>'}}
  %c = trellis.occupancy %l : (tensor<2x1x64x64x64xf32>) -> !trellis.coords<resolution = 64, bound = 262144>
  return
}

// -----

func.func @neighbor_map_kernel(%c: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{kernel must be odd and >= 1, found 4}}
  %n = trellis.sparse.neighbor_map %c {kernel = 4 : i64} : (!trellis.coords<resolution = 64, bound = 100>) -> !trellis.neighbor_map<kernel = 3, bound = 100>
  return
}

// -----

func.func @neighbor_map_result(%c: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{result #0 has type '!trellis.neighbor_map<kernel = 3, bound = 99>' but the operands and attributes give '!trellis.neighbor_map<kernel = 3, bound = 100>'}}
  %n = trellis.sparse.neighbor_map %c {kernel = 3 : i64} : (!trellis.coords<resolution = 64, bound = 100>) -> !trellis.neighbor_map<kernel = 3, bound = 99>
  return
}

// -----

func.func @coarsen_factor(%c: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{factor must be >= 2, found 1}}
  %d = trellis.sparse.coarsen %c {factor = 1 : i64} : (!trellis.coords<resolution = 64, bound = 100>) -> !trellis.coords<resolution = 64, bound = 100>
  return
}

// -----

func.func @coarsen_divides(%c: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{factor 3 does not divide the resolution 64}}
  %d = trellis.sparse.coarsen %c {factor = 3 : i64} : (!trellis.coords<resolution = 64, bound = 100>) -> !trellis.coords<resolution = 21, bound = 100>
  return
}

// -----

func.func @coarsen_result(%c: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{result #0 has type '!trellis.coords<resolution = 32, bound = 50>' but the operands and attributes give '!trellis.coords<resolution = 32, bound = 100>'}}
  %d = trellis.sparse.coarsen %c : (!trellis.coords<resolution = 64, bound = 100>) -> !trellis.coords<resolution = 32, bound = 50>
  return
}

// -----

func.func @subdivide_limit(%c: !trellis.coords<resolution = 1024, bound = 100>) {
  // expected-error @+1 {{subdividing resolution 1024 exceeds the coordinate limit 1024}}
  %f = "trellis.sparse.subdivide"(%c) : (!trellis.coords<resolution = 1024, bound = 100>) -> !trellis.coords<resolution = 1024, bound = 800>
  return
}

// -----

func.func @subdivide_result(%c: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{result #0 has type '!trellis.coords<resolution = 128, bound = 100>' but the operands and attributes give '!trellis.coords<resolution = 128, bound = 800>'}}
  %f = trellis.sparse.subdivide %c : (!trellis.coords<resolution = 64, bound = 100>) -> !trellis.coords<resolution = 128, bound = 100>
  return
}

// -----

func.func @xyz_result(%c: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{result #0 has type 'tensor<?x4xi32, #trellis.bounds<[100]>>' but the operands and attributes give 'tensor<?x3xi32, #trellis.bounds<[100]>>'}}
  %t = trellis.sparse.xyz %c : (!trellis.coords<resolution = 64, bound = 100>) -> tensor<?x4xi32, #trellis.bounds<[100]>>
  return
}

// -----

func.func @to_tensor_result(%c: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{result #0 has type 'tensor<100x4xi32>' but the operands and attributes give 'tensor<?x4xi32, #trellis.bounds<[100]>>'}}
  %t = trellis.sparse.to_tensor %c : (!trellis.coords<resolution = 64, bound = 100>) -> tensor<100x4xi32>
  return
}

// -----

func.func @from_tensor_shape(%t: tensor<?x3xi32, #trellis.bounds<[100]>>) {
  // expected-error @+1 {{input must be [N, 4] rows (b, x, y, z), found 'tensor<?x3xi32, #trellis.bounds<[100]>>'}}
  %c = trellis.sparse.from_tensor %t {resolution = 64 : i64} : (tensor<?x3xi32, #trellis.bounds<[100]>>) -> !trellis.coords<resolution = 64, bound = 100>
  return
}

// -----

func.func @from_tensor_rows(%t: tensor<0x4xi32>) {
  // expected-error @+1 {{input must have at least one row (bound >= 1), found 'tensor<0x4xi32>'}}
  %c = "trellis.sparse.from_tensor"(%t) <{resolution = 64 : i64}> : (tensor<0x4xi32>) -> !trellis.coords<resolution = 64, bound = 1>
  return
}

// -----

func.func @from_tensor_resolution(%t: tensor<?x4xi32, #trellis.bounds<[100]>>) {
  // expected-error @+1 {{resolution must be in [1, 1024], found 2048}}
  %c = "trellis.sparse.from_tensor"(%t) <{resolution = 2048 : i64}> : (tensor<?x4xi32, #trellis.bounds<[100]>>) -> !trellis.coords<resolution = 1024, bound = 100>
  return
}

// -----

func.func @from_tensor_result(%t: tensor<?x4xi32, #trellis.bounds<[100]>>) {
  // expected-error @+1 {{result #0 has type '!trellis.coords<resolution = 32, bound = 100>' but the operands and attributes give '!trellis.coords<resolution = 64, bound = 100>'}}
  %c = trellis.sparse.from_tensor %t {resolution = 64 : i64} : (tensor<?x4xi32, #trellis.bounds<[100]>>) -> !trellis.coords<resolution = 32, bound = 100>
  return
}

// -----

func.func @batch_segments_result(%c: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{result #0 has type '!trellis.segments<max_length = 512, bound = 100>' but the operands and attributes give '!trellis.segments<max_length = 100, bound = 100>'}}
  %s = trellis.sparse.batch_segments %c : (!trellis.coords<resolution = 64, bound = 100>) -> !trellis.segments<max_length = 512, bound = 100>
  return
}

// -----

func.func @window_segments_window(%c: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{window must be >= 1, found 0}}
  %s = "trellis.sparse.window_segments"(%c) <{shift = 0 : i64, window = 0 : i64}> : (!trellis.coords<resolution = 64, bound = 100>) -> !trellis.segments<max_length = 1, bound = 100>
  return
}

// -----

func.func @window_segments_shift(%c: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{shift must be in [0, 8), found 8}}
  %s = trellis.sparse.window_segments %c {shift = 8 : i64} : (!trellis.coords<resolution = 64, bound = 100>) -> !trellis.segments<max_length = 512, bound = 100>
  return
}

// -----

func.func @window_segments_negative_shift(%c: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{shift must be in [0, 8), found -4}}
  %s = trellis.sparse.window_segments %c {shift = -4 : i64} : (!trellis.coords<resolution = 64, bound = 100>) -> !trellis.segments<max_length = 512, bound = 100>
  return
}

// -----

func.func @window_segments_result(%c: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{result #0 has type '!trellis.segments<max_length = 100, bound = 100>' but the operands and attributes give '!trellis.segments<max_length = 512, bound = 100>'}}
  %s = trellis.sparse.window_segments %c : (!trellis.coords<resolution = 64, bound = 100>) -> !trellis.segments<max_length = 100, bound = 100>
  return
}

//===----------------------------------------------------------------------===//
// Sparse feature operations
//===----------------------------------------------------------------------===//

// -----

func.func @sconv_feats_rank(%h: tensor<?x8x1xf16, #trellis.bounds<[100]>>, %w: tensor<16x1x1x1x8xf16>) {
  // expected-error @+1 {{feats must be [N, I] (rank 2), found 'tensor<?x8x1xf16, #trellis.bounds<[100]>>'}}
  %y = trellis.sparse.conv3d %h, %w : (tensor<?x8x1xf16, #trellis.bounds<[100]>>, tensor<16x1x1x1x8xf16>) -> tensor<?x16xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sconv_weight_rank(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %w: tensor<16x8xf16>) {
  // expected-error @+1 {{weight must be [O, k, k, k, I] (KRSC) (rank 5), found 'tensor<16x8xf16>'}}
  %y = trellis.sparse.conv3d %h, %w : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<16x8xf16>) -> tensor<?x16xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sconv_weight_static(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %w: tensor<?x1x1x1x8xf16, #trellis.bounds<[16]>>) {
  // expected-error @+1 {{weight must have a static shape, found 'tensor<?x1x1x1x8xf16, #trellis.bounds<[16]>>'}}
  %y = trellis.sparse.conv3d %h, %w : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<?x1x1x1x8xf16, #trellis.bounds<[16]>>) -> tensor<?x?xf16, #trellis.bounds<[100, 16]>>
  return
}

// -----

func.func @sconv_kernel_cubic(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %w: tensor<16x3x3x1x8xf16>) {
  // expected-error @+1 {{weight kernel must be cubic (k x k x k), found 3x3x1}}
  %y = trellis.sparse.conv3d %h, %w : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<16x3x3x1x8xf16>) -> tensor<?x16xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sconv_kernel_odd(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %w: tensor<16x2x2x2x8xf16>) {
  // expected-error @+1 {{kernel size must be odd, found 2}}
  %y = trellis.sparse.conv3d %h, %w : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<16x2x2x2x8xf16>) -> tensor<?x16xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sconv_type(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %w: tensor<16x1x1x1x8xf32>) {
  // expected-error @+1 {{weight element type 'f32' differs from feats element type 'f16'}}
  %y = trellis.sparse.conv3d %h, %w : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<16x1x1x1x8xf32>) -> tensor<?x16xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sconv_channels(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %w: tensor<16x1x1x1x4xf16>) {
  // expected-error @+1 {{input channels differ: feats has 8, weight has 4}}
  %y = trellis.sparse.conv3d %h, %w : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<16x1x1x1x4xf16>) -> tensor<?x16xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sconv_bias_shape(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %w: tensor<16x1x1x1x8xf16>, %b: tensor<8xf16>) {
  // expected-error @+1 {{bias must be [16], found 'tensor<8xf16>'}}
  %y = trellis.sparse.conv3d %h, %w, %b : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<16x1x1x1x8xf16>, tensor<8xf16>) -> tensor<?x16xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sconv_bias_type(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %w: tensor<16x1x1x1x8xf16>, %b: tensor<16xf32>) {
  // expected-error @+1 {{bias element type 'f32' differs from feats element type 'f16'}}
  %y = trellis.sparse.conv3d %h, %w, %b : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<16x1x1x1x8xf16>, tensor<16xf32>) -> tensor<?x16xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sconv_1x1_map(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %w: tensor<16x1x1x1x8xf16>, %nb: !trellis.neighbor_map<kernel = 1, bound = 100>) {
  // expected-error @+1 {{a 1x1x1 convolution takes no neighbour map (it is spconv's conv1x1 path)}}
  %y = trellis.sparse.conv3d %h, %w neighbors %nb : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<16x1x1x1x8xf16>, !trellis.neighbor_map<kernel = 1, bound = 100>) -> tensor<?x16xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sconv_needs_map(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %w: tensor<16x3x3x3x8xf16>) {
  // expected-error @+1 {{a 3x3x3 convolution needs a neighbour map of kernel 3}}
  %y = trellis.sparse.conv3d %h, %w : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<16x3x3x3x8xf16>) -> tensor<?x16xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sconv_map_kernel(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %w: tensor<16x3x3x3x8xf16>, %nb: !trellis.neighbor_map<kernel = 5, bound = 100>) {
  // expected-error @+1 {{neighbour map kernel 5 differs from the weight's kernel 3}}
  %y = trellis.sparse.conv3d %h, %w neighbors %nb : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<16x3x3x3x8xf16>, !trellis.neighbor_map<kernel = 5, bound = 100>) -> tensor<?x16xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sconv_map_bound(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %w: tensor<16x3x3x3x8xf16>, %nb: !trellis.neighbor_map<kernel = 3, bound = 200>) {
  // expected-error @+1 {{feats dimension 0 must be the voxel dimension of the neighbour map (? with bound 200), found 'tensor<?x8xf16, #trellis.bounds<[100]>>'}}
  %y = trellis.sparse.conv3d %h, %w neighbors %nb : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<16x3x3x3x8xf16>, !trellis.neighbor_map<kernel = 3, bound = 200>) -> tensor<?x16xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sconv_static_rows(%h: tensor<100x8xf16>, %w: tensor<16x3x3x3x8xf16>, %nb: !trellis.neighbor_map<kernel = 3, bound = 100>) {
  // expected-error @+1 {{feats dimension 0 must be the voxel dimension of the neighbour map (? with bound 100), found 'tensor<100x8xf16>'}}
  %y = trellis.sparse.conv3d %h, %w neighbors %nb : (tensor<100x8xf16>, tensor<16x3x3x3x8xf16>, !trellis.neighbor_map<kernel = 3, bound = 100>) -> tensor<100x16xf16>
  return
}

// -----

func.func @sconv_result(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %w: tensor<16x1x1x1x8xf16>) {
  // expected-error @+1 {{result #0 has type 'tensor<?x8xf16, #trellis.bounds<[100]>>' but the operands and attributes give 'tensor<?x16xf16, #trellis.bounds<[100]>>'}}
  %y = trellis.sparse.conv3d %h, %w : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<16x1x1x1x8xf16>) -> tensor<?x8xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @downsample_factor(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %f: !trellis.coords<resolution = 64, bound = 100>,
                             %c: !trellis.coords<resolution = 16, bound = 100>) {
  // expected-error @+1 {{fine resolution 64 must be twice the coarse resolution 16}}
  %d = trellis.sparse.downsample %h, %f, %c : (tensor<?x8xf16, #trellis.bounds<[100]>>, !trellis.coords<resolution = 64, bound = 100>, !trellis.coords<resolution = 16, bound = 100>) -> tensor<?x8xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @downsample_rank(%h: tensor<?xf16, #trellis.bounds<[100]>>, %f: !trellis.coords<resolution = 64, bound = 100>,
                           %c: !trellis.coords<resolution = 32, bound = 100>) {
  // expected-error @+1 {{feats must be [N, C] (rank 2), found 'tensor<?xf16, #trellis.bounds<[100]>>'}}
  %d = trellis.sparse.downsample %h, %f, %c : (tensor<?xf16, #trellis.bounds<[100]>>, !trellis.coords<resolution = 64, bound = 100>, !trellis.coords<resolution = 32, bound = 100>) -> tensor<?xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @downsample_rows(%h: tensor<?x8xf16, #trellis.bounds<[50]>>, %f: !trellis.coords<resolution = 64, bound = 100>,
                           %c: !trellis.coords<resolution = 32, bound = 100>) {
  // expected-error @+1 {{feats dimension 0 must be the voxel dimension of the fine coordinate set (? with bound 100), found 'tensor<?x8xf16, #trellis.bounds<[50]>>'}}
  %d = trellis.sparse.downsample %h, %f, %c : (tensor<?x8xf16, #trellis.bounds<[50]>>, !trellis.coords<resolution = 64, bound = 100>, !trellis.coords<resolution = 32, bound = 100>) -> tensor<?x8xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @downsample_result(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %f: !trellis.coords<resolution = 64, bound = 100>,
                             %c: !trellis.coords<resolution = 32, bound = 40>) {
  // expected-error @+1 {{result #0 has type 'tensor<?x8xf16, #trellis.bounds<[100]>>' but the operands and attributes give 'tensor<?x8xf16, #trellis.bounds<[40]>>'}}
  %d = trellis.sparse.downsample %h, %f, %c : (tensor<?x8xf16, #trellis.bounds<[100]>>, !trellis.coords<resolution = 64, bound = 100>, !trellis.coords<resolution = 32, bound = 40>) -> tensor<?x8xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @upsample_factor(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %c: !trellis.coords<resolution = 32, bound = 100>,
                           %f: !trellis.coords<resolution = 32, bound = 100>) {
  // expected-error @+1 {{fine resolution 32 must be twice the coarse resolution 32}}
  %u = trellis.sparse.upsample %h, %c, %f : (tensor<?x8xf16, #trellis.bounds<[100]>>, !trellis.coords<resolution = 32, bound = 100>, !trellis.coords<resolution = 32, bound = 100>) -> tensor<?x8xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @upsample_rank(%h: tensor<?x8x1xf16, #trellis.bounds<[100]>>, %c: !trellis.coords<resolution = 32, bound = 100>,
                         %f: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{feats must be [N', C] (rank 2), found 'tensor<?x8x1xf16, #trellis.bounds<[100]>>'}}
  %u = trellis.sparse.upsample %h, %c, %f : (tensor<?x8x1xf16, #trellis.bounds<[100]>>, !trellis.coords<resolution = 32, bound = 100>, !trellis.coords<resolution = 64, bound = 100>) -> tensor<?x8x1xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @upsample_rows(%h: tensor<?x8xf16, #trellis.bounds<[100]>>, %c: !trellis.coords<resolution = 32, bound = 40>,
                         %f: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{feats dimension 0 must be the voxel dimension of the coarse coordinate set (? with bound 40), found 'tensor<?x8xf16, #trellis.bounds<[100]>>'}}
  %u = trellis.sparse.upsample %h, %c, %f : (tensor<?x8xf16, #trellis.bounds<[100]>>, !trellis.coords<resolution = 32, bound = 40>, !trellis.coords<resolution = 64, bound = 100>) -> tensor<?x8xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @upsample_result(%h: tensor<?x8xf16, #trellis.bounds<[40]>>, %c: !trellis.coords<resolution = 32, bound = 40>,
                           %f: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{result #0 has type 'tensor<?x8xf16, #trellis.bounds<[40]>>' but the operands and attributes give 'tensor<?x8xf16, #trellis.bounds<[100]>>'}}
  %u = trellis.sparse.upsample %h, %c, %f : (tensor<?x8xf16, #trellis.bounds<[40]>>, !trellis.coords<resolution = 32, bound = 40>, !trellis.coords<resolution = 64, bound = 100>) -> tensor<?x8xf16, #trellis.bounds<[40]>>
  return
}

// -----

func.func @parent_neighbors_factor(%nb: !trellis.neighbor_map<kernel = 3, bound = 100>, %c: !trellis.coords<resolution = 16, bound = 40>,
                                   %f: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{fine resolution 64 must be twice the coarse resolution 16}}
  %pm = trellis.sparse.parent_neighbor_map %nb, %c, %f : (!trellis.neighbor_map<kernel = 3, bound = 100>, !trellis.coords<resolution = 16, bound = 40>, !trellis.coords<resolution = 64, bound = 100>) -> !trellis.neighbor_map<kernel = 3, bound = 100>
  return
}

// -----

func.func @parent_neighbors_map_set(%nb: !trellis.neighbor_map<kernel = 3, bound = 40>, %c: !trellis.coords<resolution = 32, bound = 40>,
                                    %f: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{the neighbour map (bound 40) must be the fine set's (bound 100)}}
  %pm = trellis.sparse.parent_neighbor_map %nb, %c, %f : (!trellis.neighbor_map<kernel = 3, bound = 40>, !trellis.coords<resolution = 32, bound = 40>, !trellis.coords<resolution = 64, bound = 100>) -> !trellis.neighbor_map<kernel = 3, bound = 40>
  return
}

// -----

func.func @conv_parent_neighbors_rows(%u: tensor<?x8xf16, #trellis.bounds<[100]>>, %w: tensor<4x3x3x3x8xf16>,
                                      %nb: !trellis.neighbor_map<kernel = 3, bound = 100>, %c: !trellis.coords<resolution = 32, bound = 40>,
                                      %f: !trellis.coords<resolution = 64, bound = 100>) {
  %pm = trellis.sparse.parent_neighbor_map %nb, %c, %f : (!trellis.neighbor_map<kernel = 3, bound = 100>, !trellis.coords<resolution = 32, bound = 40>, !trellis.coords<resolution = 64, bound = 100>) -> !trellis.neighbor_map<kernel = 3, bound = 100>
  // expected-error @+1 {{feats dimension 0 must be the voxel dimension of the parent neighbour map's coarse set (? with bound 40), found 'tensor<?x8xf16, #trellis.bounds<[100]>>'}}
  %y = trellis.sparse.conv3d %u, %w neighbors %pm : (tensor<?x8xf16, #trellis.bounds<[100]>>, tensor<4x3x3x3x8xf16>, !trellis.neighbor_map<kernel = 3, bound = 100>) -> tensor<?x4xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @subdivide_features_rank(%h: tensor<?xf16, #trellis.bounds<[100]>>) {
  // expected-error @+1 {{feats must be [N, C] (rank 2), found 'tensor<?xf16, #trellis.bounds<[100]>>'}}
  %f = trellis.sparse.subdivide_features %h : (tensor<?xf16, #trellis.bounds<[100]>>) -> tensor<?xf16, #trellis.bounds<[800]>>
  return
}

// -----

func.func @subdivide_features_result(%h: tensor<?x8xf16, #trellis.bounds<[100]>>) {
  // expected-error @+1 {{result #0 has type 'tensor<?x8xf16, #trellis.bounds<[100]>>' but the operands and attributes give 'tensor<?x8xf16, #trellis.bounds<[800]>>'}}
  %f = trellis.sparse.subdivide_features %h : (tensor<?x8xf16, #trellis.bounds<[100]>>) -> tensor<?x8xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @group_norm_rank(%h: tensor<?xf16, #trellis.bounds<[100]>>, %c: !trellis.coords<resolution = 64, bound = 100>, %w: tensor<64xf32>) {
  // expected-error @+1 {{feats must be [N, C] (rank 2), found 'tensor<?xf16, #trellis.bounds<[100]>>'}}
  %g = trellis.sparse.group_norm %h, %c, %w, %w {eps = 1.0e-5 : f64} : (tensor<?xf16, #trellis.bounds<[100]>>, !trellis.coords<resolution = 64, bound = 100>, tensor<64xf32>, tensor<64xf32>) -> tensor<?xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @group_norm_rows(%h: tensor<?x64xf16, #trellis.bounds<[50]>>, %c: !trellis.coords<resolution = 64, bound = 100>, %w: tensor<64xf32>) {
  // expected-error @+1 {{feats dimension 0 must be the voxel dimension of the coordinate set (? with bound 100), found 'tensor<?x64xf16, #trellis.bounds<[50]>>'}}
  %g = trellis.sparse.group_norm %h, %c, %w, %w {eps = 1.0e-5 : f64} : (tensor<?x64xf16, #trellis.bounds<[50]>>, !trellis.coords<resolution = 64, bound = 100>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x64xf16, #trellis.bounds<[50]>>
  return
}

// -----

func.func @group_norm_channels(%h: tensor<?x?xf16, #trellis.bounds<[100, 64]>>, %c: !trellis.coords<resolution = 64, bound = 100>, %w: tensor<64xf32>) {
  // expected-error @+1 {{feats must have a static channel count, found 'tensor<?x?xf16, #trellis.bounds<[100, 64]>>'}}
  %g = trellis.sparse.group_norm %h, %c, %w, %w {eps = 1.0e-5 : f64} : (tensor<?x?xf16, #trellis.bounds<[100, 64]>>, !trellis.coords<resolution = 64, bound = 100>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?xf16, #trellis.bounds<[100, 64]>>
  return
}

// -----

func.func @group_norm_groups(%h: tensor<?x48xf16, #trellis.bounds<[100]>>, %c: !trellis.coords<resolution = 64, bound = 100>, %w: tensor<48xf32>) {
  // expected-error @+1 {{groups 32 must be >= 1 and divide the channel count 48}}
  %g = trellis.sparse.group_norm %h, %c, %w, %w {eps = 1.0e-5 : f64} : (tensor<?x48xf16, #trellis.bounds<[100]>>, !trellis.coords<resolution = 64, bound = 100>, tensor<48xf32>, tensor<48xf32>) -> tensor<?x48xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @group_norm_weight(%h: tensor<?x64xf16, #trellis.bounds<[100]>>, %c: !trellis.coords<resolution = 64, bound = 100>, %w: tensor<32xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{weight must be [C] = [64], found 'tensor<32xf32>'}}
  %g = trellis.sparse.group_norm %h, %c, %w, %b {eps = 1.0e-5 : f64} : (tensor<?x64xf16, #trellis.bounds<[100]>>, !trellis.coords<resolution = 64, bound = 100>, tensor<32xf32>, tensor<64xf32>) -> tensor<?x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @group_norm_bias(%h: tensor<?x64xf16, #trellis.bounds<[100]>>, %c: !trellis.coords<resolution = 64, bound = 100>, %w: tensor<64xf32>, %b: tensor<1xf32>) {
  // expected-error @+1 {{bias must be [C] = [64], found 'tensor<1xf32>'}}
  %g = trellis.sparse.group_norm %h, %c, %w, %b {eps = 1.0e-5 : f64} : (tensor<?x64xf16, #trellis.bounds<[100]>>, !trellis.coords<resolution = 64, bound = 100>, tensor<64xf32>, tensor<1xf32>) -> tensor<?x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @group_norm_eps(%h: tensor<?x64xf16, #trellis.bounds<[100]>>, %c: !trellis.coords<resolution = 64, bound = 100>, %w: tensor<64xf32>) {
  // expected-error @+1 {{eps must be > 0, found -1e-05}}
  %g = trellis.sparse.group_norm %h, %c, %w, %w {eps = -1.0e-5 : f64} : (tensor<?x64xf16, #trellis.bounds<[100]>>, !trellis.coords<resolution = 64, bound = 100>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @group_norm_weight_type(%h: tensor<?x64xf16, #trellis.bounds<[100]>>, %c: !trellis.coords<resolution = 64, bound = 100>, %w: tensor<64xf16>) {
  // expected-error @+1 {{operand #2 must be ranked tensor of 32-bit float values, but got 'tensor<64xf16>'}}
  %g = trellis.sparse.group_norm %h, %c, %w, %w {eps = 1.0e-5 : f64} : (tensor<?x64xf16, #trellis.bounds<[100]>>, !trellis.coords<resolution = 64, bound = 100>, tensor<64xf16>, tensor<64xf16>) -> tensor<?x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @group_norm_result(%h: tensor<?x64xf16, #trellis.bounds<[100]>>, %c: !trellis.coords<resolution = 64, bound = 100>, %w: tensor<64xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<?x64xf32, #trellis.bounds<[100]>>' but the operands and attributes give 'tensor<?x64xf16, #trellis.bounds<[100]>>'}}
  %g = trellis.sparse.group_norm %h, %c, %w, %w {eps = 1.0e-5 : f64} : (tensor<?x64xf16, #trellis.bounds<[100]>>, !trellis.coords<resolution = 64, bound = 100>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x64xf32, #trellis.bounds<[100]>>
  return
}

// -----

func.func @batch_broadcast_rank(%v: tensor<128xf16>, %c: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{values must be [B, C] (rank 2), found 'tensor<128xf16>'}}
  %r = trellis.sparse.batch_broadcast %v, %c : (tensor<128xf16>, !trellis.coords<resolution = 64, bound = 100>) -> tensor<?x128xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @batch_broadcast_result(%v: tensor<2x128xf16>, %c: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{result #0 has type 'tensor<?x128xf16, #trellis.bounds<[200]>>' but the operands and attributes give 'tensor<?x128xf16, #trellis.bounds<[100]>>'}}
  %r = trellis.sparse.batch_broadcast %v, %c : (tensor<2x128xf16>, !trellis.coords<resolution = 64, bound = 100>) -> tensor<?x128xf16, #trellis.bounds<[200]>>
  return
}

// -----

func.func @parent_rows_factor(%c: !trellis.coords<resolution = 16, bound = 40>, %f: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{fine resolution 64 must be twice the coarse resolution 16}}
  %p = trellis.sparse.parent_rows %f, %c : (!trellis.coords<resolution = 64, bound = 100>, !trellis.coords<resolution = 16, bound = 40>) -> tensor<?xi32, #trellis.bounds<[100]>>
  return
}

// -----

func.func @child_rows_factor(%c: !trellis.coords<resolution = 16, bound = 40>, %f: !trellis.coords<resolution = 64, bound = 100>) {
  // expected-error @+1 {{fine resolution 64 must be twice the coarse resolution 16}}
  %o, %ch = trellis.sparse.child_rows %f, %c : (!trellis.coords<resolution = 64, bound = 100>, !trellis.coords<resolution = 16, bound = 40>) -> (tensor<?xi32, #trellis.bounds<[41]>>, tensor<?xi32, #trellis.bounds<[100]>>)
  return
}

// -----

func.func @gather_rows_index_rank(%x: tensor<8x4xf32>, %i: tensor<2x3xi32>) {
  // expected-error @+1 {{index must be [N] (rank 1), found 'tensor<2x3xi32>'}}
  %g = trellis.gather_rows %x, %i : (tensor<8x4xf32>, tensor<2x3xi32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @segment_mean_extra_count(%x: tensor<8x4xf32>, %o: tensor<3xi32>, %r: tensor<8xi32>) {
  // expected-error @+1 {{extra_count must be >= 0, found -1}}
  %m = trellis.segment_mean %x, %o, %r {extra_count = -1 : i64} : (tensor<8x4xf32>, tensor<3xi32>, tensor<8xi32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @segment_mean_x_rank(%x: tensor<8xf32>, %o: tensor<3xi32>, %r: tensor<8xi32>) {
  // expected-error @+1 {{x must be [M, C] (rank 2), found 'tensor<8xf32>'}}
  %m = trellis.segment_mean %x, %o, %r : (tensor<8xf32>, tensor<3xi32>, tensor<8xi32>) -> tensor<2xf32>
  return
}

// -----

func.func @sattn_gamma(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %s: !trellis.segments<max_length = 512, bound = 100>, %g: tensor<12x32xf32>) {
  // expected-error @+1 {{k_gamma must be [H, d] = [12, 64], found 'tensor<12x32xf32>'}}
  %o = trellis.sparse.attention %q, %q, %q, %s k_gamma %g {scale = 0.125 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 100>, tensor<12x32xf32>) -> tensor<?x12x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_q_rank(%q: tensor<?x768xf16, #trellis.bounds<[100]>>, %k: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %s: !trellis.segments<max_length = 512, bound = 100>) {
  // expected-error @+1 {{q must be [N, H, d] (rank 3), found 'tensor<?x768xf16, #trellis.bounds<[100]>>'}}
  %o = trellis.sparse.attention %q, %k, %k, %s {scale = 0.125 : f64} : (tensor<?x768xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 100>) -> tensor<?x12x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_k_rank(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %k: tensor<?x768xf16, #trellis.bounds<[100]>>, %s: !trellis.segments<max_length = 512, bound = 100>) {
  // expected-error @+1 {{k must be [N, H, d] (rank 3), found 'tensor<?x768xf16, #trellis.bounds<[100]>>'}}
  %o = trellis.sparse.attention %q, %k, %q, %s {scale = 0.125 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x768xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 100>) -> tensor<?x12x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_v_rank(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %v: tensor<?x768xf16, #trellis.bounds<[100]>>, %s: !trellis.segments<max_length = 512, bound = 100>) {
  // expected-error @+1 {{v must be [N, H, dv] (rank 3), found 'tensor<?x768xf16, #trellis.bounds<[100]>>'}}
  %o = trellis.sparse.attention %q, %q, %v, %s {scale = 0.125 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x768xf16, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 100>) -> tensor<?x12x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_k_type(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %k: tensor<?x12x64xf32, #trellis.bounds<[100]>>, %s: !trellis.segments<max_length = 512, bound = 100>) {
  // expected-error @+1 {{k element type 'f32' differs from q element type 'f16'}}
  %o = trellis.sparse.attention %q, %k, %q, %s {scale = 0.125 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf32, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 100>) -> tensor<?x12x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_v_type(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %v: tensor<?x12x64xf32, #trellis.bounds<[100]>>, %s: !trellis.segments<max_length = 512, bound = 100>) {
  // expected-error @+1 {{v element type 'f32' differs from q element type 'f16'}}
  %o = trellis.sparse.attention %q, %q, %v, %s {scale = 0.125 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf32, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 100>) -> tensor<?x12x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_q_rows(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %s: !trellis.segments<max_length = 512, bound = 200>) {
  // expected-error @+1 {{q dimension 0 must be the voxel dimension of the segments (? with bound 200), found 'tensor<?x12x64xf16, #trellis.bounds<[100]>>'}}
  %o = trellis.sparse.attention %q, %q, %q, %s {scale = 0.125 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 200>) -> tensor<?x12x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_k_rows(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %k: tensor<?x12x64xf16, #trellis.bounds<[99]>>, %s: !trellis.segments<max_length = 512, bound = 100>) {
  // expected-error @+1 {{k dimension 0 must be the voxel dimension of the segments (? with bound 100), found 'tensor<?x12x64xf16, #trellis.bounds<[99]>>'}}
  %o = trellis.sparse.attention %q, %k, %q, %s {scale = 0.125 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[99]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 100>) -> tensor<?x12x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_v_rows(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %v: tensor<100x12x64xf16>, %s: !trellis.segments<max_length = 512, bound = 100>) {
  // expected-error @+1 {{v dimension 0 must be the voxel dimension of the segments (? with bound 100), found 'tensor<100x12x64xf16>'}}
  %o = trellis.sparse.attention %q, %q, %v, %s {scale = 0.125 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<100x12x64xf16>, !trellis.segments<max_length = 512, bound = 100>) -> tensor<?x12x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_heads_k(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %k: tensor<?x6x64xf16, #trellis.bounds<[100]>>, %s: !trellis.segments<max_length = 512, bound = 100>) {
  // expected-error @+1 {{head counts differ: q has 12, k has 6}}
  %o = trellis.sparse.attention %q, %k, %q, %s {scale = 0.125 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x6x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 100>) -> tensor<?x12x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_heads_v(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %v: tensor<?x6x64xf16, #trellis.bounds<[100]>>, %s: !trellis.segments<max_length = 512, bound = 100>) {
  // expected-error @+1 {{head counts differ: q has 12, v has 6}}
  %o = trellis.sparse.attention %q, %q, %v, %s {scale = 0.125 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x6x64xf16, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 100>) -> tensor<?x6x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_head_dim(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %k: tensor<?x12x32xf16, #trellis.bounds<[100]>>, %s: !trellis.segments<max_length = 512, bound = 100>) {
  // expected-error @+1 {{head dims differ: q has 64, k has 32}}
  %o = trellis.sparse.attention %q, %k, %q, %s {scale = 0.125 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x32xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 100>) -> tensor<?x12x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_scale(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %s: !trellis.segments<max_length = 512, bound = 100>) {
  // expected-error @+1 {{scale must be > 0, found 0}}
  %o = trellis.sparse.attention %q, %q, %q, %s {scale = 0.0 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 100>) -> tensor<?x12x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_result(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %s: !trellis.segments<max_length = 512, bound = 100>) {
  // expected-error @+1 {{result #0 has type 'tensor<?x768xf16, #trellis.bounds<[100]>>' but the operands and attributes give 'tensor<?x12x64xf16, #trellis.bounds<[100]>>'}}
  %o = trellis.sparse.attention %q, %q, %q, %s {scale = 0.125 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 100>) -> tensor<?x768xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_precision_name(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %s: !trellis.segments<max_length = 512, bound = 100>) {
  // expected-error @+1 {{precision must be "fp8_e4m3", found "fp8_e5m2"}}
  %o = trellis.sparse.attention %q, %q, %q, %s {precision = "fp8_e5m2", scale = 0.125 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 100>) -> tensor<?x12x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_fp8_gammas(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %s: !trellis.segments<max_length = 512, bound = 100>) {
  // expected-error @+1 {{precision "fp8_e4m3" needs q_gamma and k_gamma (the head RMS norms of q and k)}}
  %o = trellis.sparse.attention %q, %q, %q, %s {precision = "fp8_e4m3", scale = 0.125 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 100>) -> tensor<?x12x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @sattn_fp8_head_dim_v(%q: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %k: tensor<?x12x64xf16, #trellis.bounds<[100]>>, %v: tensor<?x12x32xf16, #trellis.bounds<[100]>>, %s: !trellis.segments<max_length = 512, bound = 100>) {
  // expected-error @+1 {{precision "fp8_e4m3" needs head dim 64, v has 32}}
  %o = trellis.sparse.attention %q, %k, %v, %s {precision = "fp8_e4m3", scale = 0.125 : f64} : (tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x64xf16, #trellis.bounds<[100]>>, tensor<?x12x32xf16, #trellis.bounds<[100]>>, !trellis.segments<max_length = 512, bound = 100>) -> tensor<?x12x32xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @xattn_q_rank(%q: tensor<?x1024xf16, #trellis.bounds<[100]>>, %k: tensor<2x77x16x64xf16>, %c: !trellis.coords<resolution = 32, bound = 100>) {
  // expected-error @+1 {{q must be [N, H, d] (rank 3), found 'tensor<?x1024xf16, #trellis.bounds<[100]>>'}}
  %o = trellis.sparse.cross_attention %q, %k, %k, %c {scale = 0.125 : f64} : (tensor<?x1024xf16, #trellis.bounds<[100]>>, tensor<2x77x16x64xf16>, tensor<2x77x16x64xf16>, !trellis.coords<resolution = 32, bound = 100>) -> tensor<?x16x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @xattn_k_rank(%q: tensor<?x16x64xf16, #trellis.bounds<[100]>>, %k: tensor<77x16x64xf16>, %v: tensor<2x77x16x64xf16>, %c: !trellis.coords<resolution = 32, bound = 100>) {
  // expected-error @+1 {{k must be [B, Lc, H, d] (rank 4), found 'tensor<77x16x64xf16>'}}
  %o = trellis.sparse.cross_attention %q, %k, %v, %c {scale = 0.125 : f64} : (tensor<?x16x64xf16, #trellis.bounds<[100]>>, tensor<77x16x64xf16>, tensor<2x77x16x64xf16>, !trellis.coords<resolution = 32, bound = 100>) -> tensor<?x16x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @xattn_v_rank(%q: tensor<?x16x64xf16, #trellis.bounds<[100]>>, %k: tensor<2x77x16x64xf16>, %v: tensor<2x77x1024xf16>, %c: !trellis.coords<resolution = 32, bound = 100>) {
  // expected-error @+1 {{v must be [B, Lc, H, dv] (rank 4), found 'tensor<2x77x1024xf16>'}}
  %o = trellis.sparse.cross_attention %q, %k, %v, %c {scale = 0.125 : f64} : (tensor<?x16x64xf16, #trellis.bounds<[100]>>, tensor<2x77x16x64xf16>, tensor<2x77x1024xf16>, !trellis.coords<resolution = 32, bound = 100>) -> tensor<?x16x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @xattn_k_type(%q: tensor<?x16x64xf16, #trellis.bounds<[100]>>, %k: tensor<2x77x16x64xf32>, %v: tensor<2x77x16x64xf16>, %c: !trellis.coords<resolution = 32, bound = 100>) {
  // expected-error @+1 {{k element type 'f32' differs from q element type 'f16'}}
  %o = trellis.sparse.cross_attention %q, %k, %v, %c {scale = 0.125 : f64} : (tensor<?x16x64xf16, #trellis.bounds<[100]>>, tensor<2x77x16x64xf32>, tensor<2x77x16x64xf16>, !trellis.coords<resolution = 32, bound = 100>) -> tensor<?x16x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @xattn_v_type(%q: tensor<?x16x64xf16, #trellis.bounds<[100]>>, %k: tensor<2x77x16x64xf16>, %v: tensor<2x77x16x64xf32>, %c: !trellis.coords<resolution = 32, bound = 100>) {
  // expected-error @+1 {{v element type 'f32' differs from q element type 'f16'}}
  %o = trellis.sparse.cross_attention %q, %k, %v, %c {scale = 0.125 : f64} : (tensor<?x16x64xf16, #trellis.bounds<[100]>>, tensor<2x77x16x64xf16>, tensor<2x77x16x64xf32>, !trellis.coords<resolution = 32, bound = 100>) -> tensor<?x16x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @xattn_rows(%q: tensor<?x16x64xf16, #trellis.bounds<[100]>>, %k: tensor<2x77x16x64xf16>, %c: !trellis.coords<resolution = 32, bound = 64>) {
  // expected-error @+1 {{q dimension 0 must be the voxel dimension of the coordinate set (? with bound 64), found 'tensor<?x16x64xf16, #trellis.bounds<[100]>>'}}
  %o = trellis.sparse.cross_attention %q, %k, %k, %c {scale = 0.125 : f64} : (tensor<?x16x64xf16, #trellis.bounds<[100]>>, tensor<2x77x16x64xf16>, tensor<2x77x16x64xf16>, !trellis.coords<resolution = 32, bound = 64>) -> tensor<?x16x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @xattn_batch(%q: tensor<?x16x64xf16, #trellis.bounds<[100]>>, %k: tensor<2x77x16x64xf16>, %v: tensor<1x77x16x64xf16>, %c: !trellis.coords<resolution = 32, bound = 100>) {
  // expected-error @+1 {{batch sizes differ: k has 2, v has 1}}
  %o = trellis.sparse.cross_attention %q, %k, %v, %c {scale = 0.125 : f64} : (tensor<?x16x64xf16, #trellis.bounds<[100]>>, tensor<2x77x16x64xf16>, tensor<1x77x16x64xf16>, !trellis.coords<resolution = 32, bound = 100>) -> tensor<?x16x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @xattn_context(%q: tensor<?x16x64xf16, #trellis.bounds<[100]>>, %k: tensor<2x77x16x64xf16>, %v: tensor<2x76x16x64xf16>, %c: !trellis.coords<resolution = 32, bound = 100>) {
  // expected-error @+1 {{context lengths differ: k has 77, v has 76}}
  %o = trellis.sparse.cross_attention %q, %k, %v, %c {scale = 0.125 : f64} : (tensor<?x16x64xf16, #trellis.bounds<[100]>>, tensor<2x77x16x64xf16>, tensor<2x76x16x64xf16>, !trellis.coords<resolution = 32, bound = 100>) -> tensor<?x16x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @xattn_heads_k(%q: tensor<?x16x64xf16, #trellis.bounds<[100]>>, %k: tensor<2x77x8x64xf16>, %v: tensor<2x77x16x64xf16>, %c: !trellis.coords<resolution = 32, bound = 100>) {
  // expected-error @+1 {{head counts differ: q has 16, k has 8}}
  %o = trellis.sparse.cross_attention %q, %k, %v, %c {scale = 0.125 : f64} : (tensor<?x16x64xf16, #trellis.bounds<[100]>>, tensor<2x77x8x64xf16>, tensor<2x77x16x64xf16>, !trellis.coords<resolution = 32, bound = 100>) -> tensor<?x16x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @xattn_heads_v(%q: tensor<?x16x64xf16, #trellis.bounds<[100]>>, %k: tensor<2x77x16x64xf16>, %v: tensor<2x77x8x64xf16>, %c: !trellis.coords<resolution = 32, bound = 100>) {
  // expected-error @+1 {{head counts differ: q has 16, v has 8}}
  %o = trellis.sparse.cross_attention %q, %k, %v, %c {scale = 0.125 : f64} : (tensor<?x16x64xf16, #trellis.bounds<[100]>>, tensor<2x77x16x64xf16>, tensor<2x77x8x64xf16>, !trellis.coords<resolution = 32, bound = 100>) -> tensor<?x16x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @xattn_head_dim(%q: tensor<?x16x64xf16, #trellis.bounds<[100]>>, %k: tensor<2x77x16x32xf16>, %v: tensor<2x77x16x64xf16>, %c: !trellis.coords<resolution = 32, bound = 100>) {
  // expected-error @+1 {{head dims differ: q has 64, k has 32}}
  %o = trellis.sparse.cross_attention %q, %k, %v, %c {scale = 0.125 : f64} : (tensor<?x16x64xf16, #trellis.bounds<[100]>>, tensor<2x77x16x32xf16>, tensor<2x77x16x64xf16>, !trellis.coords<resolution = 32, bound = 100>) -> tensor<?x16x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @xattn_scale(%q: tensor<?x16x64xf16, #trellis.bounds<[100]>>, %k: tensor<2x77x16x64xf16>, %c: !trellis.coords<resolution = 32, bound = 100>) {
  // expected-error @+1 {{scale must be > 0, found -0.125}}
  %o = trellis.sparse.cross_attention %q, %k, %k, %c {scale = -0.125 : f64} : (tensor<?x16x64xf16, #trellis.bounds<[100]>>, tensor<2x77x16x64xf16>, tensor<2x77x16x64xf16>, !trellis.coords<resolution = 32, bound = 100>) -> tensor<?x16x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @xattn_result(%q: tensor<?x16x64xf16, #trellis.bounds<[100]>>, %k: tensor<2x77x16x64xf16>, %v: tensor<2x77x16x32xf16>, %c: !trellis.coords<resolution = 32, bound = 100>) {
  // expected-error @+1 {{result #0 has type 'tensor<?x16x64xf16, #trellis.bounds<[100]>>' but the operands and attributes give 'tensor<?x16x32xf16, #trellis.bounds<[100]>>'}}
  %o = trellis.sparse.cross_attention %q, %k, %v, %c {scale = 0.125 : f64} : (tensor<?x16x64xf16, #trellis.bounds<[100]>>, tensor<2x77x16x64xf16>, tensor<2x77x16x32xf16>, !trellis.coords<resolution = 32, bound = 100>) -> tensor<?x16x64xf16, #trellis.bounds<[100]>>
  return
}

// -----

func.func @unique_mean_keys_rank(%k: tensor<12x1xi64>, %v: tensor<12x3xf32>) {
  // expected-error @+1 {{keys must be [M] (rank 1), found 'tensor<12x1xi64>'}}
  %u, %m = trellis.sparse.unique_mean %k, %v : (tensor<12x1xi64>, tensor<12x3xf32>) -> (tensor<?x1xi64, #trellis.bounds<[12]>>, tensor<?x3xf32, #trellis.bounds<[12]>>)
  return
}

// -----

func.func @unique_mean_values_rank(%k: tensor<12xi64>, %v: tensor<12xf32>) {
  // expected-error @+1 {{values must be [M, K] (rank 2), found 'tensor<12xf32>'}}
  %u, %m = trellis.sparse.unique_mean %k, %v : (tensor<12xi64>, tensor<12xf32>) -> (tensor<?xi64, #trellis.bounds<[12]>>, tensor<?xf32, #trellis.bounds<[12]>>)
  return
}

// -----

func.func @unique_mean_rows(%k: tensor<12xi64>, %v: tensor<10x3xf32>) {
  // expected-error @+1 {{row counts differ: keys has 12, values has 10}}
  %u, %m = trellis.sparse.unique_mean %k, %v : (tensor<12xi64>, tensor<10x3xf32>) -> (tensor<?xi64, #trellis.bounds<[12]>>, tensor<?x3xf32, #trellis.bounds<[12]>>)
  return
}

// -----

func.func @unique_mean_key_type(%k: tensor<12xi32>, %v: tensor<12x3xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 64-bit signless integer values, but got 'tensor<12xi32>'}}
  %u, %m = trellis.sparse.unique_mean %k, %v : (tensor<12xi32>, tensor<12x3xf32>) -> (tensor<?xi32, #trellis.bounds<[12]>>, tensor<?x3xf32, #trellis.bounds<[12]>>)
  return
}

// -----

func.func @unique_mean_result(%k: tensor<12xi64>, %v: tensor<12x3xf32>) {
  // expected-error @+1 {{result #1 has type 'tensor<?x3xf32, #trellis.bounds<[24]>>' but the operands and attributes give 'tensor<?x3xf32, #trellis.bounds<[12]>>'}}
  %u, %m = trellis.sparse.unique_mean %k, %v : (tensor<12xi64>, tensor<12x3xf32>) -> (tensor<?xi64, #trellis.bounds<[12]>>, tensor<?x3xf32, #trellis.bounds<[24]>>)
  return
}

//===----------------------------------------------------------------------===//
// Mesh extraction
//===----------------------------------------------------------------------===//

// -----

func.func @flexicubes_fields(%c: !trellis.coords<resolution = 256, bound = 10>, %f: tensor<?x100xf32, #trellis.bounds<[10]>>) {
  // expected-error @+1 {{fields must be [N, 101] (sdf 8, deform 24, weights 21, colour 48), found 'tensor<?x100xf32, #trellis.bounds<[10]>>'}}
  %v, %t, %a = trellis.mesh.flexicubes %c, %f : (!trellis.coords<resolution = 256, bound = 10>, tensor<?x100xf32, #trellis.bounds<[10]>>) -> (tensor<?x3xf32, #trellis.bounds<[1080]>>, tensor<?x3xi32, #trellis.bounds<[1620]>>, tensor<?x6xf32, #trellis.bounds<[1080]>>)
  return
}

// -----

func.func @flexicubes_rows(%c: !trellis.coords<resolution = 256, bound = 10>, %f: tensor<?x101xf32, #trellis.bounds<[20]>>) {
  // expected-error @+1 {{fields dimension 0 must be the voxel dimension of the coordinate set (? with bound 10), found 'tensor<?x101xf32, #trellis.bounds<[20]>>'}}
  %v, %t, %a = trellis.mesh.flexicubes %c, %f : (!trellis.coords<resolution = 256, bound = 10>, tensor<?x101xf32, #trellis.bounds<[20]>>) -> (tensor<?x3xf32, #trellis.bounds<[1080]>>, tensor<?x3xi32, #trellis.bounds<[1620]>>, tensor<?x6xf32, #trellis.bounds<[1080]>>)
  return
}

// -----

func.func @flexicubes_resolution(%c: !trellis.coords<resolution = 128, bound = 10>, %f: tensor<?x101xf32, #trellis.bounds<[10]>>) {
  // expected-error @+1 {{resolution 256 differs from the coordinate set's resolution 128}}
  %v, %t, %a = trellis.mesh.flexicubes %c, %f : (!trellis.coords<resolution = 128, bound = 10>, tensor<?x101xf32, #trellis.bounds<[10]>>) -> (tensor<?x3xf32, #trellis.bounds<[1080]>>, tensor<?x3xi32, #trellis.bounds<[1620]>>, tensor<?x6xf32, #trellis.bounds<[1080]>>)
  return
}

// -----

func.func @flexicubes_bound(%c: !trellis.coords<resolution = 256, bound = 20000000>, %f: tensor<?x101xf32, #trellis.bounds<[20000000]>>) {
  // expected-error @+1 {{coordinate bound 20000000 allows 108 vertices per cube, more than i32 face indices address}}
  %v, %t, %a = trellis.mesh.flexicubes %c, %f : (!trellis.coords<resolution = 256, bound = 20000000>, tensor<?x101xf32, #trellis.bounds<[20000000]>>) -> (tensor<?x3xf32, #trellis.bounds<[2160000000]>>, tensor<?x3xi32, #trellis.bounds<[3240000000]>>, tensor<?x6xf32, #trellis.bounds<[2160000000]>>)
  return
}

// -----

func.func @flexicubes_type(%c: !trellis.coords<resolution = 256, bound = 10>, %f: tensor<?x101xf16, #trellis.bounds<[10]>>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit float values, but got 'tensor<?x101xf16, #trellis.bounds<[10]>>'}}
  %v, %t, %a = trellis.mesh.flexicubes %c, %f : (!trellis.coords<resolution = 256, bound = 10>, tensor<?x101xf16, #trellis.bounds<[10]>>) -> (tensor<?x3xf32, #trellis.bounds<[1080]>>, tensor<?x3xi32, #trellis.bounds<[1620]>>, tensor<?x6xf32, #trellis.bounds<[1080]>>)
  return
}

// -----

func.func @flexicubes_result(%c: !trellis.coords<resolution = 256, bound = 10>, %f: tensor<?x101xf32, #trellis.bounds<[10]>>) {
  // expected-error @+1 {{result #1 has type 'tensor<?x3xi32, #trellis.bounds<[1080]>>' but the operands and attributes give 'tensor<?x3xi32, #trellis.bounds<[1620]>>'}}
  %v, %t, %a = trellis.mesh.flexicubes %c, %f : (!trellis.coords<resolution = 256, bound = 10>, tensor<?x101xf32, #trellis.bounds<[10]>>) -> (tensor<?x3xf32, #trellis.bounds<[1080]>>, tensor<?x3xi32, #trellis.bounds<[1080]>>, tensor<?x6xf32, #trellis.bounds<[1080]>>)
  return
}

//===----------------------------------------------------------------------===//
// Fused ops and forms (lib/Transforms)
//===----------------------------------------------------------------------===//

// -----

func.func @broadcast_rows_row_shape(%r: tensor<2x8xf16>) {
  // expected-error @+1 {{row must be a static [1, R...] tensor of rank >= 2, found 'tensor<2x8xf16>'}}
  %b = trellis.broadcast_rows %r : (tensor<2x8xf16>) -> tensor<2x4x8xf16>
  return
}

// -----

func.func @broadcast_rows_trailing(%r: tensor<1x8xf16>) {
  // expected-error @+1 {{result must be [N..., 8] (row's dimensions after the first, after one or more leading ones), found 'tensor<2x4x6xf16>'}}
  %b = trellis.broadcast_rows %r : (tensor<1x8xf16>) -> tensor<2x4x6xf16>
  return
}

// -----

func.func @broadcast_rows_no_leading(%r: tensor<1x8xf16>) {
  // expected-error @+1 {{result must be [N..., 8]}}
  %b = trellis.broadcast_rows %r : (tensor<1x8xf16>) -> tensor<8xf16>
  return
}

// -----

func.func @broadcast_rows_dtype(%r: tensor<1x8xf16>) {
  // expected-error @+1 {{result element type 'f32' differs from row element type 'f16'}}
  %b = trellis.broadcast_rows %r : (tensor<1x8xf16>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @broadcast_rows_dynamic_no_like(%r: tensor<1x8xf16>) {
  // expected-error @+1 {{the dynamic result 'tensor<?x8xf16, #trellis.bounds<[64]>>' needs a 'like' operand for its leading dimensions}}
  %b = trellis.broadcast_rows %r : (tensor<1x8xf16>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  return
}

// -----

func.func @broadcast_rows_static_like(%r: tensor<1x8xf16>, %l: tensor<4x8xf16>) {
  // expected-error @+1 {{a static result takes no 'like' operand}}
  %b = trellis.broadcast_rows %r, %l : (tensor<1x8xf16>, tensor<4x8xf16>) -> tensor<4x8xf16>
  return
}

// -----

func.func @broadcast_rows_like_bound(%r: tensor<1x8xf16>, %l: tensor<?x2xf16, #trellis.bounds<[32]>>) {
  // expected-error @+1 {{leading dimension 0 of the result 'tensor<?x8xf16, #trellis.bounds<[64]>>' differs from that of 'like' 'tensor<?x2xf16, #trellis.bounds<[32]>>'}}
  %b = trellis.broadcast_rows %r, %l : (tensor<1x8xf16>, tensor<?x2xf16, #trellis.bounds<[32]>>) -> tensor<?x8xf16, #trellis.bounds<[64]>>
  return
}

// -----

func.func @broadcast_rows_like_rank(%r: tensor<1x8xf16>, %l: tensor<?xf16, #trellis.bounds<[64]>>) {
  // expected-error @+1 {{'like' must have at least the result's 2 leading dimension(s), found 'tensor<?xf16, #trellis.bounds<[64]>>'}}
  %b = trellis.broadcast_rows %r, %l : (tensor<1x8xf16>, tensor<?xf16, #trellis.bounds<[64]>>) -> tensor<?x3x8xf16, #trellis.bounds<[64]>>
  return
}

// -----

func.func @layer_norm_modulate_eps(%x: tensor<2x16x8xf16>, %s: tensor<2x8xf16>) {
  // expected-error @+1 {{eps must be > 0, found 0}}
  %h = trellis.layer_norm_modulate %x, %s, %s {eps = 0.0 : f64} : (tensor<2x16x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>) -> tensor<2x16x8xf16>
  return
}

// -----

func.func @layer_norm_modulate_scale(%x: tensor<2x16x8xf16>, %s: tensor<2x8xf16>, %c: tensor<2x4xf16>) {
  // expected-error @+1 {{scale must have the input's type 'tensor<2x16x8xf16>' or be a per-sample [B, C] = [2, 8], found 'tensor<2x4xf16>'}}
  %h = trellis.layer_norm_modulate %x, %s, %c {eps = 1.0e-06 : f64} : (tensor<2x16x8xf16>, tensor<2x8xf16>, tensor<2x4xf16>) -> tensor<2x16x8xf16>
  return
}

// -----

func.func @residual_norm_h(%x: tensor<2x16x8xf16>, %h: tensor<2x16x4xf16>, %s: tensor<2x8xf16>) {
  // expected-error @+1 {{h must have the input's type 'tensor<2x16x8xf16>', found 'tensor<2x16x4xf16>'}}
  %r, %y = trellis.gated_residual_norm %x, %h, %s modulate %s, %s {eps = 1.0e-06 : f64} : (tensor<2x16x8xf16>, tensor<2x16x4xf16>, tensor<2x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @residual_norm_gate(%x: tensor<2x16x8xf16>, %s: tensor<2x8xf16>, %g: tensor<3x8xf16>) {
  // expected-error @+1 {{gate must have the input's type 'tensor<2x16x8xf16>' or be a per-sample [B, C] = [2, 8], found 'tensor<3x8xf16>'}}
  %r, %y = trellis.gated_residual_norm %x, %x, %g modulate %s, %s {eps = 1.0e-06 : f64} : (tensor<2x16x8xf16>, tensor<2x16x8xf16>, tensor<3x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @residual_norm_eps(%x: tensor<2x16x8xf16>, %s: tensor<2x8xf16>) {
  // expected-error @+1 {{eps must be > 0, found 0}}
  %r, %y = trellis.gated_residual_norm %x, %x, %s modulate %s, %s {eps = 0.0 : f64} : (tensor<2x16x8xf16>, tensor<2x16x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @residual_norm_both(%x: tensor<2x16x8xf16>, %s: tensor<2x8xf16>, %w: tensor<8xf32>) {
  // expected-error @+1 {{takes modulate or affine, not both}}
  %r, %y = trellis.gated_residual_norm %x, %x, %s modulate %s, %s affine %w, %w {eps = 1.0e-06 : f64} : (tensor<2x16x8xf16>, tensor<2x16x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @residual_norm_weight(%x: tensor<2x16x8xf16>, %s: tensor<2x8xf16>, %w: tensor<4xf32>) {
  // expected-error @+1 {{weight must be [8], found 'tensor<4xf32>'}}
  %r, %y = trellis.gated_residual_norm %x, %x, %s affine %w, %w {eps = 1.0e-06 : f64} : (tensor<2x16x8xf16>, tensor<2x16x8xf16>, tensor<2x8xf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @residual_norm_plus(%x: tensor<2x16x8xf16>, %s: tensor<2x8xf16>, %p: tensor<1x8xf16>) {
  // expected-error @+1 {{plus must have the input's type 'tensor<2x16x8xf16>' or be a per-sample [B, C] = [2, 8], found 'tensor<1x8xf16>'}}
  %r, %y = trellis.gated_residual_norm %x, %x, %s plus %p {eps = 1.0e-06 : f64} : (tensor<2x16x8xf16>, tensor<2x16x8xf16>, tensor<2x8xf16>, tensor<1x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @residual_norm_f32_modulate(%x: tensor<2x16x8xf16>, %s: tensor<2x8xf16>) {
  // expected-error @+1 {{f32_result takes the LayerNorm form, not modulate}}
  %r, %y = trellis.gated_residual_norm %x, %x, %s modulate %s, %s {eps = 1.0e-06 : f64, f32_result} : (tensor<2x16x8xf16>, tensor<2x16x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf32>)
  return
}

// -----

func.func @residual_norm_f32_input(%x: tensor<2x16x8xf32>, %s: tensor<2x8xf32>) {
  // expected-error @+1 {{f32_result needs an f16 or bf16 input, found 'tensor<2x16x8xf32>'}}
  %r, %y = trellis.gated_residual_norm %x, %x, %s {eps = 1.0e-06 : f64, f32_result} : (tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

func.func @linear_residual_norm_input_rank(%a: tensor<f16>, %w: tensor<8x4xf16>, %b: tensor<8xf16>, %x: tensor<8xf16>, %g: tensor<1x8xf16>) {
  // expected-error @+1 {{input must have rank >= 1, found 'tensor<f16>'}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x {eps = 1.0e-06 : f64} : (tensor<f16>, tensor<8x4xf16>, tensor<8xf16>, tensor<8xf16>) -> (tensor<8xf16>, tensor<8xf16>)
  return
}

// -----

func.func @linear_residual_norm_weight_rank(%a: tensor<2x16x4xf16>, %w: tensor<8xf16>, %b: tensor<8xf16>, %x: tensor<2x16x8xf16>) {
  // expected-error @+1 {{weight must be [N, K], found 'tensor<8xf16>'}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x {eps = 1.0e-06 : f64} : (tensor<2x16x4xf16>, tensor<8xf16>, tensor<8xf16>, tensor<2x16x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @linear_residual_norm_weight_type(%a: tensor<2x16x4xf16>, %w: tensor<8x4xf32>, %b: tensor<8xf16>, %x: tensor<2x16x8xf16>) {
  // expected-error @+1 {{weight element type 'f32' differs from input element type 'f16'}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x {eps = 1.0e-06 : f64} : (tensor<2x16x4xf16>, tensor<8x4xf32>, tensor<8xf16>, tensor<2x16x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @linear_residual_norm_bias_type(%a: tensor<2x16x4xf16>, %w: tensor<8x4xf16>, %b: tensor<8xf32>, %x: tensor<2x16x8xf16>) {
  // expected-error @+1 {{bias element type 'f32' differs from input element type 'f16'}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x {eps = 1.0e-06 : f64} : (tensor<2x16x4xf16>, tensor<8x4xf16>, tensor<8xf32>, tensor<2x16x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @linear_residual_norm_residual_type(%a: tensor<2x16x4xf16>, %w: tensor<8x4xf16>, %b: tensor<8xf16>, %x: tensor<2x16x8xf32>) {
  // expected-error @+1 {{residual element type 'f32' differs from input element type 'f16'}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x {eps = 1.0e-06 : f64} : (tensor<2x16x4xf16>, tensor<8x4xf16>, tensor<8xf16>, tensor<2x16x8xf32>) -> (tensor<2x16x8xf32>, tensor<2x16x8xf32>)
  return
}

// -----

func.func @linear_residual_norm_features(%a: tensor<2x16x4xf16>, %w: tensor<8x5xf16>, %b: tensor<8xf16>, %x: tensor<2x16x8xf16>) {
  // expected-error @+1 {{input has 4 features but the weight expects 5 (weight 'tensor<8x5xf16>')}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x {eps = 1.0e-06 : f64} : (tensor<2x16x4xf16>, tensor<8x5xf16>, tensor<8xf16>, tensor<2x16x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @linear_residual_norm_bias_shape(%a: tensor<2x16x4xf16>, %w: tensor<8x4xf16>, %b: tensor<4xf16>, %x: tensor<2x16x8xf16>) {
  // expected-error @+1 {{bias must be [8], found 'tensor<4xf16>'}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x {eps = 1.0e-06 : f64} : (tensor<2x16x4xf16>, tensor<8x4xf16>, tensor<4xf16>, tensor<2x16x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @linear_residual_norm_residual_shape(%a: tensor<2x16x4xf16>, %w: tensor<8x4xf16>, %b: tensor<8xf16>, %x: tensor<2x8x8xf16>) {
  // expected-error @+1 {{residual must have the linear's result type 'tensor<2x16x8xf16>' (the input's leading dimensions, then N = 8), found 'tensor<2x8x8xf16>'}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x {eps = 1.0e-06 : f64} : (tensor<2x16x4xf16>, tensor<8x4xf16>, tensor<8xf16>, tensor<2x8x8xf16>) -> (tensor<2x8x8xf16>, tensor<2x8x8xf16>)
  return
}

// -----

func.func @linear_residual_norm_residual_bounds(%a: tensor<?x4xf16, #trellis.bounds<[64]>>, %w: tensor<8x4xf16>, %b: tensor<8xf16>, %x: tensor<?x8xf16, #trellis.bounds<[32]>>) {
  // expected-error @+1 {{residual must have the linear's result type 'tensor<?x8xf16, #trellis.bounds<[64]>>' (the input's leading dimensions, then N = 8), found 'tensor<?x8xf16, #trellis.bounds<[32]>>'}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x {eps = 1.0e-06 : f64} : (tensor<?x4xf16, #trellis.bounds<[64]>>, tensor<8x4xf16>, tensor<8xf16>, tensor<?x8xf16, #trellis.bounds<[32]>>) -> (tensor<?x8xf16, #trellis.bounds<[32]>>, tensor<?x8xf16, #trellis.bounds<[32]>>)
  return
}

// -----

func.func @linear_residual_norm_shift_only(%a: tensor<2x16x4xf16>, %w: tensor<8x4xf16>, %b: tensor<8xf16>, %x: tensor<2x16x8xf16>, %s: tensor<2x8xf16>) {
  // expected-error @+1 {{modulate needs both shift and scale}}
  %r, %y = "trellis.linear_residual_norm"(%a, %w, %b, %x, %s) <{eps = 1.0e-06 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 1, 0, 0, 0>}> : (tensor<2x16x4xf16>, tensor<8x4xf16>, tensor<8xf16>, tensor<2x16x8xf16>, tensor<2x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @linear_residual_norm_weight_only(%a: tensor<2x16x4xf16>, %w: tensor<8x4xf16>, %b: tensor<8xf16>, %x: tensor<2x16x8xf16>, %nw: tensor<8xf32>) {
  // expected-error @+1 {{affine needs both weight and bias}}
  %r, %y = "trellis.linear_residual_norm"(%a, %w, %b, %x, %nw) <{eps = 1.0e-06 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0, 0, 1, 0>}> : (tensor<2x16x4xf16>, tensor<8x4xf16>, tensor<8xf16>, tensor<2x16x8xf16>, tensor<8xf32>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @linear_residual_norm_both(%a: tensor<2x16x4xf16>, %w: tensor<8x4xf16>, %b: tensor<8xf16>, %x: tensor<2x16x8xf16>, %s: tensor<2x8xf16>, %nw: tensor<8xf32>) {
  // expected-error @+1 {{takes modulate or affine, not both}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x modulate %s, %s affine %nw, %nw {eps = 1.0e-06 : f64} : (tensor<2x16x4xf16>, tensor<8x4xf16>, tensor<8xf16>, tensor<2x16x8xf16>, tensor<2x8xf16>, tensor<2x8xf16>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @linear_residual_norm_plus_without_gate(%a: tensor<2x16x4xf16>, %w: tensor<8x4xf16>, %b: tensor<8xf16>, %x: tensor<2x16x8xf16>, %s: tensor<2x8xf16>) {
  // expected-error @+1 {{plus needs a gate}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x plus %s {eps = 1.0e-06 : f64} : (tensor<2x16x4xf16>, tensor<8x4xf16>, tensor<8xf16>, tensor<2x16x8xf16>, tensor<2x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @linear_residual_norm_eps(%a: tensor<2x16x4xf16>, %w: tensor<8x4xf16>, %b: tensor<8xf16>, %x: tensor<2x16x8xf16>) {
  // expected-error @+1 {{eps must be > 0, found 0}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x {eps = 0.0 : f64} : (tensor<2x16x4xf16>, tensor<8x4xf16>, tensor<8xf16>, tensor<2x16x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @linear_residual_norm_gate(%a: tensor<2x16x4xf16>, %w: tensor<8x4xf16>, %b: tensor<8xf16>, %x: tensor<2x16x8xf16>, %g: tensor<3x8xf16>) {
  // expected-error @+1 {{gate must have the residual's type 'tensor<2x16x8xf16>' or be a per-sample [B, C] = [2, 8], found 'tensor<3x8xf16>'}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x gate %g {eps = 1.0e-06 : f64} : (tensor<2x16x4xf16>, tensor<8x4xf16>, tensor<8xf16>, tensor<2x16x8xf16>, tensor<3x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @linear_residual_norm_gate_type(%a: tensor<2x16x4xf16>, %w: tensor<8x4xf16>, %b: tensor<8xf16>, %x: tensor<2x16x8xf16>, %g: tensor<2x8xf32>) {
  // expected-error @+1 {{gate element type 'f32' differs from residual element type 'f16'}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x gate %g {eps = 1.0e-06 : f64} : (tensor<2x16x4xf16>, tensor<8x4xf16>, tensor<8xf16>, tensor<2x16x8xf16>, tensor<2x8xf32>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @linear_residual_norm_plus(%a: tensor<?x4xf16, #trellis.bounds<[64]>>, %w: tensor<8x4xf16>, %b: tensor<8xf16>, %x: tensor<?x8xf16, #trellis.bounds<[64]>>, %g: tensor<1x8xf16>, %p: tensor<2x8xf16>) {
  // expected-error @+1 {{plus must have the residual's type 'tensor<?x8xf16, #trellis.bounds<[64]>>' or be one row [1, 8], found 'tensor<2x8xf16>'}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x gate %g plus %p {eps = 1.0e-06 : f64} : (tensor<?x4xf16, #trellis.bounds<[64]>>, tensor<8x4xf16>, tensor<8xf16>, tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<1x8xf16>, tensor<2x8xf16>) -> (tensor<?x8xf16, #trellis.bounds<[64]>>, tensor<?x8xf16, #trellis.bounds<[64]>>)
  return
}

// -----

func.func @linear_residual_norm_shift(%a: tensor<2x16x4xf16>, %w: tensor<8x4xf16>, %b: tensor<8xf16>, %x: tensor<2x16x8xf16>, %s: tensor<2x8xf16>, %c: tensor<2x4xf16>) {
  // expected-error @+1 {{shift must have the residual's type 'tensor<2x16x8xf16>' or be a per-sample [B, C] = [2, 8], found 'tensor<2x4xf16>'}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x modulate %c, %s {eps = 1.0e-06 : f64} : (tensor<2x16x4xf16>, tensor<8x4xf16>, tensor<8xf16>, tensor<2x16x8xf16>, tensor<2x4xf16>, tensor<2x8xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @linear_residual_norm_scale(%a: tensor<2x16x4xf16>, %w: tensor<8x4xf16>, %b: tensor<8xf16>, %x: tensor<2x16x8xf16>, %s: tensor<2x8xf16>, %c: tensor<2x16x4xf16>) {
  // expected-error @+1 {{scale must have the residual's type 'tensor<2x16x8xf16>' or be a per-sample [B, C] = [2, 8], found 'tensor<2x16x4xf16>'}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x modulate %s, %c {eps = 1.0e-06 : f64} : (tensor<2x16x4xf16>, tensor<8x4xf16>, tensor<8xf16>, tensor<2x16x8xf16>, tensor<2x8xf16>, tensor<2x16x4xf16>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @linear_residual_norm_norm_weight(%a: tensor<2x16x4xf16>, %w: tensor<8x4xf16>, %b: tensor<8xf16>, %x: tensor<2x16x8xf16>, %g: tensor<2x8xf16>, %nw: tensor<8xf32>, %nb: tensor<4xf32>) {
  // expected-error @+1 {{norm bias must be [8], found 'tensor<4xf32>'}}
  %r, %y = trellis.linear_residual_norm %a, %w, %b residual %x gate %g affine %nw, %nb {eps = 1.0e-06 : f64} : (tensor<2x16x4xf16>, tensor<8x4xf16>, tensor<8xf16>, tensor<2x16x8xf16>, tensor<2x8xf16>, tensor<8xf32>, tensor<4xf32>) -> (tensor<2x16x8xf16>, tensor<2x16x8xf16>)
  return
}

// -----

func.func @where_shapes(%c: tensor<2x8xf32>, %a: tensor<2x8xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{shapes [2, 8] and [3] do not broadcast at dimension 1}}
  %y = trellis.where %c, %a, %b : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<3xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @where_types(%c: tensor<2x8xf16>, %a: tensor<2x8xf32>, %b: tensor<2x8xf32>) {
  // expected-error @+1 {{element type}}
  %y = trellis.where %c, %a, %b : (tensor<2x8xf16>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @linear_precision_name(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error @+1 {{precision must be "tf32" or "fp8_e4m3", found "bf16"}}
  %y = trellis.linear %x, %w {precision = "bf16"} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @linear_precision_on_f16(%x: tensor<4x8xf16>, %w: tensor<16x8xf16>) {
  // expected-error @+1 {{precision "tf32" applies to f32 operands, found 'tensor<4x8xf16>'}}
  %y = trellis.linear %x, %w {precision = "tf32"} : (tensor<4x8xf16>, tensor<16x8xf16>) -> tensor<4x16xf16>
  return
}

// -----

func.func @linear_fp8_on_f32(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error @+1 {{precision "fp8_e4m3" applies to f16 operands, found 'tensor<4x8xf32>'}}
  %y = trellis.linear %x, %w {precision = "fp8_e4m3"} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @linear_amax_without_fp8(%x: tensor<4x8xf16>, %w: tensor<16x8xf16>) {
  // expected-error @+1 {{activation_amax (a static FP8 scale) needs precision "fp8_e4m3"}}
  %y = trellis.linear %x, %w {activation_amax = 2.0 : f32} : (tensor<4x8xf16>, tensor<16x8xf16>) -> tensor<4x16xf16>
  return
}

// -----

func.func @linear_amax_zero(%x: tensor<4x8xf16>, %w: tensor<16x8xf16>) {
  // expected-error @+1 {{activation_amax must be positive and finite, found 0}}
  %y = trellis.linear %x, %w {precision = "fp8_e4m3", activation_amax = 0.0 : f32} : (tensor<4x8xf16>, tensor<16x8xf16>) -> tensor<4x16xf16>
  return
}

// -----

func.func @linear_amax_inf(%x: tensor<4x8xf16>, %w: tensor<16x8xf16>) {
  // expected-error @+1 {{activation_amax must be positive and finite, found INF}}
  %y = trellis.linear %x, %w {precision = "fp8_e4m3", activation_amax = 0x7F800000 : f32} : (tensor<4x8xf16>, tensor<16x8xf16>) -> tensor<4x16xf16>
  return
}

// -----

func.func @linear_activation(%x: tensor<4x8xf16>, %w: tensor<16x8xf16>) {
  // expected-error @+1 {{activation must be "gelu_tanh", found "relu"}}
  %y = trellis.linear %x, %w {activation = "relu"} : (tensor<4x8xf16>, tensor<16x8xf16>) -> tensor<4x16xf16>
  return
}

// -----

func.func @attention_gamma_shape(%q: tensor<1x8x2x4xf16>, %g: tensor<4x2xf32>) {
  // expected-error @+1 {{q_gamma must be [H, d] = [2, 4], found 'tensor<4x2xf32>'}}
  %o = trellis.attention %q, %q, %q q_gamma %g {scale = 0.5 : f64} : (tensor<1x8x2x4xf16>, tensor<1x8x2x4xf16>, tensor<1x8x2x4xf16>, tensor<4x2xf32>) -> tensor<1x8x2x4xf16>
  return
}

// -----

func.func @attention_gamma_dtype(%q: tensor<1x8x2x4xf16>, %g: tensor<2x4xf16>) {
  // expected-error @+1 {{operand #3 must be ranked tensor of 32-bit float values, but got 'tensor<2x4xf16>'}}
  %o = trellis.attention %q, %q, %q k_gamma %g {scale = 0.5 : f64} : (tensor<1x8x2x4xf16>, tensor<1x8x2x4xf16>, tensor<1x8x2x4xf16>, tensor<2x4xf16>) -> tensor<1x8x2x4xf16>
  return
}

// -----

func.func @flow_two_region_mode(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{the two-region form needs multi_image mode none}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64, multi_image = #trellis.multi_image<stochastic>}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>):
    trellis.yield %x : tensor<1x8xf32>
  } uncond {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>):
    trellis.yield %x : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_two_region_args(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>) {
  // expected-error @+1 {{uncond region must take 2 arguments (x, tau) in the two-region form, found 3}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>):
    trellis.yield %x : tensor<1x8xf32>
  } uncond {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %cc: tensor<1x4x16xf32>):
    trellis.yield %x : tensor<1x8xf32>
  }
  return
}

// -----

func.func @flow_two_region_batch(%n: tensor<2x8xf32>, %c: tensor<3x4x16xf32>) {
  // expected-error @+1 {{cond must have batch 1 or B = 2 in the two-region form, found 'tensor<3x4x16xf32>'}}
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<2x8xf32>, tensor<3x4x16xf32>, tensor<3x4x16xf32>) -> tensor<2x8xf32> {
  ^bb0(%x: tensor<2x8xf32>, %tau: tensor<2xf32>):
    trellis.yield %x : tensor<2x8xf32>
  } uncond {
  ^bb0(%x: tensor<2x8xf32>, %tau: tensor<2xf32>):
    trellis.yield %x : tensor<2x8xf32>
  }
  return
}

// -----

func.func @flow_two_region_yield(%n: tensor<1x8xf32>, %c: tensor<1x4x16xf32>, %o: tensor<1x4xf32>) {
  %x = trellis.flow_sample %n, %c, %c {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>):
    trellis.yield %x : tensor<1x8xf32>
  } uncond {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>):
    // expected-error @+1 {{yields 'tensor<1x4xf32>' but the velocity must have x's type 'tensor<1x8xf32>'}}
    trellis.yield %o : tensor<1x4xf32>
  }
  return
}

// -----

func.func @shared_region_branch_args(%noise: tensor<1x8xf32>, %cond: tensor<1x4x8xf32>, %neg: tensor<1x4x8xf32>) -> tensor<1x8xf32> {
  // expected-error @+1 {{body must take 3 arguments (x, tau, the shared values) in the two-region form, found 2}}
  %r = trellis.flow_sample %noise, %cond, %neg
         {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64,
          rescale_t = 3.000000e+00 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>):
    trellis.yield %x : tensor<1x8xf32>
  } uncond {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %s: tensor<1x8xf32>):
    trellis.yield %x : tensor<1x8xf32>
  } shared {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>):
    trellis.shared_yield %x : tensor<1x8xf32>
  }
  return %r : tensor<1x8xf32>
}
