// RUN: trellis-opt %s -split-input-file -trellis-verify-locations -verify-diagnostics

// Ops with file locations (the parser gives every op one) pass.
func.func @located(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %y = trellis.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// An op whose location is unknown is reported at its nearest located parent.
// expected-error @+1 {{operation 'trellis.linear' has no source location}}
func.func @unlocated(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %y = trellis.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32> loc(unknown)
  return %y : tensor<4x16xf32>
}

// -----

// A fused location of unknowns is unknown too.
// expected-error @+1 {{operation 'trellis.silu' has no source location}}
func.func @fused_unknown(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = trellis.silu %x : tensor<4x8xf32> loc(fused[unknown, unknown])
  return %y : tensor<4x8xf32>
}
