// RUN: trellis-opt %s -split-input-file -verify-diagnostics

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
