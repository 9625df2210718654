// RUN: trellis-opt --trellis-share-guidance-prefix %s | FileCheck %s

// What both branches compute from (x, tau) alone moves into the shared
// region; the branches read it as their third argument. The unconditional
// branch's own work (the sub) and the conditional branch's (the add of the
// condition) stay.
// CHECK-LABEL: func.func @shares
func.func @shares(%noise: tensor<1x8xf32>, %cond: tensor<1x4x8xf32>, %neg: tensor<1x4x8xf32>, %c: tensor<1x8xf32>) -> tensor<1x8xf32> {
  // CHECK: trellis.flow_sample
  // CHECK-NEXT: ^bb0(%{{.*}}: tensor<1x8xf32>, %{{.*}}: tensor<1xf32>, %[[S:.*]]: tensor<1x8xf32>):
  // CHECK-NEXT: trellis.add %[[S]], %{{.*}}
  // CHECK: } uncond {
  // CHECK-NEXT: ^bb0(%{{.*}}: tensor<1x8xf32>, %{{.*}}: tensor<1xf32>, %[[SU:.*]]: tensor<1x8xf32>):
  // CHECK-NEXT: trellis.sub %[[SU]], %[[SU]]
  // CHECK: } shared {
  // CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<1x8xf32>, %{{.*}}: tensor<1xf32>):
  // CHECK-NEXT: %[[N:.*]] = trellis.neg %[[X]]
  // CHECK-NEXT: %[[E:.*]] = trellis.exp %[[N]]
  // CHECK-NEXT: trellis.shared_yield %[[E]] : tensor<1x8xf32>
  %r = trellis.flow_sample %noise, %cond, %neg
         {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64,
          rescale_t = 3.000000e+00 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>):
    %n = trellis.neg %x : tensor<1x8xf32>
    %e = trellis.exp %n : tensor<1x8xf32>
    %v = trellis.add %e, %c : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
    trellis.yield %v : tensor<1x8xf32>
  } uncond {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>):
    %n = trellis.neg %x : tensor<1x8xf32>
    %e = trellis.exp %n : tensor<1x8xf32>
    %v = trellis.sub %e, %e : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
    trellis.yield %v : tensor<1x8xf32>
  }
  return %r : tensor<1x8xf32>
}

// Negative: the branches compute different things from x: unchanged.
// CHECK-LABEL: func.func @nothing_to_share
// CHECK-NOT: shared
func.func @nothing_to_share(%noise: tensor<1x8xf32>, %cond: tensor<1x4x8xf32>, %neg: tensor<1x4x8xf32>) -> tensor<1x8xf32> {
  %r = trellis.flow_sample %noise, %cond, %neg
         {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64,
          rescale_t = 3.000000e+00 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>):
    %v = trellis.neg %x : tensor<1x8xf32>
    trellis.yield %v : tensor<1x8xf32>
  } uncond {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>):
    %v = trellis.exp %x : tensor<1x8xf32>
    trellis.yield %v : tensor<1x8xf32>
  }
  return %r : tensor<1x8xf32>
}

// A sparse sampler (state of a bounded dynamic row count, the SLat flow):
// shared alike; the yield keeps the bounds.
// CHECK-LABEL: func.func @sparse_state
func.func @sparse_state(%noise: tensor<?x8xf32, #trellis.bounds<[64]>>, %cond: tensor<1x4x8xf32>, %neg: tensor<1x4x8xf32>) -> tensor<?x8xf32, #trellis.bounds<[64]>> {
  // CHECK: } uncond {
  // CHECK-NEXT: ^bb0(%{{.*}}: tensor<?x8xf32, #trellis.bounds<[64]>>, %{{.*}}: tensor<1xf32>, %[[SU:.*]]: tensor<?x8xf32, #trellis.bounds<[64]>>):
  // CHECK-NEXT: trellis.exp %[[SU]]
  // CHECK: } shared {
  // CHECK: trellis.neg
  // CHECK-NEXT: trellis.shared_yield %{{.*}} : tensor<?x8xf32, #trellis.bounds<[64]>>
  %r = trellis.flow_sample %noise, %cond, %neg
         {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64,
          rescale_t = 3.000000e+00 : f64, steps = 25 : i64}
         : (tensor<?x8xf32, #trellis.bounds<[64]>>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<?x8xf32, #trellis.bounds<[64]>> {
  ^bb0(%x: tensor<?x8xf32, #trellis.bounds<[64]>>, %tau: tensor<1xf32>):
    %n = trellis.neg %x : tensor<?x8xf32, #trellis.bounds<[64]>>
    %v = trellis.silu %n : tensor<?x8xf32, #trellis.bounds<[64]>>
    trellis.yield %v : tensor<?x8xf32, #trellis.bounds<[64]>>
  } uncond {
  ^bb0(%x: tensor<?x8xf32, #trellis.bounds<[64]>>, %tau: tensor<1xf32>):
    %n = trellis.neg %x : tensor<?x8xf32, #trellis.bounds<[64]>>
    %v = trellis.exp %n : tensor<?x8xf32, #trellis.bounds<[64]>>
    trellis.yield %v : tensor<?x8xf32, #trellis.bounds<[64]>>
  }
  return %r : tensor<?x8xf32, #trellis.bounds<[64]>>
}

// Fused ops with optional operand groups (trellis-fuse-linear-norm's, as in
// the first flow block): the same operands and segments are shared; the same
// operand values in other groups (gate + plus against modulate) are not.
// CHECK-LABEL: func.func @operand_segments
func.func @operand_segments(%noise: tensor<1x8xf32>, %cond: tensor<1x4x8xf32>, %neg: tensor<1x4x8xf32>,
                            %w: tensor<8x8xf32>, %b: tensor<8xf32>, %c: tensor<1x8xf32>) -> tensor<1x8xf32> {
  // CHECK: trellis.flow_sample
  // CHECK-NEXT: ^bb0(%{{.*}}: tensor<1x8xf32>, %{{.*}}: tensor<1xf32>, %[[R:.*]]: tensor<1x8xf32>, %[[Y:.*]]: tensor<1x8xf32>):
  // CHECK-NEXT: trellis.linear_residual_norm %[[Y]], %{{.*}}, %{{.*}} residual %[[R]] gate %{{.*}} plus %{{.*}} {eps
  // CHECK: } uncond {
  // CHECK-NEXT: ^bb0(%{{.*}}: tensor<1x8xf32>, %{{.*}}: tensor<1xf32>, %[[RU:.*]]: tensor<1x8xf32>, %[[YU:.*]]: tensor<1x8xf32>):
  // CHECK-NEXT: trellis.linear_residual_norm %[[YU]], %{{.*}}, %{{.*}} residual %[[RU]] modulate %{{.*}}, %{{.*}} {eps
  // CHECK: } shared {
  // CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<1x8xf32>, %{{.*}}: tensor<1xf32>):
  // CHECK-NEXT: %[[SR:.*]], %[[SY:.*]] = trellis.linear_residual_norm %[[X]], %{{.*}}, %{{.*}} residual %[[X]] gate %{{.*}} modulate %{{.*}}, %{{.*}} {eps
  // CHECK-NEXT: trellis.shared_yield %[[SR]], %[[SY]] : tensor<1x8xf32>, tensor<1x8xf32>
  %r = trellis.flow_sample %noise, %cond, %neg
         {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 7.500000e+00 : f64,
          rescale_t = 3.000000e+00 : f64, steps = 25 : i64}
         : (tensor<1x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>):
    %r1, %y1 = trellis.linear_residual_norm %x, %w, %b residual %x gate %c modulate %c, %c {eps = 1.0e-06 : f64} : (tensor<1x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>) -> (tensor<1x8xf32>, tensor<1x8xf32>)
    %r2, %y2 = trellis.linear_residual_norm %y1, %w, %b residual %r1 gate %c plus %c {eps = 1.0e-06 : f64} : (tensor<1x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>) -> (tensor<1x8xf32>, tensor<1x8xf32>)
    %v = trellis.add %y2, %r2 : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
    trellis.yield %v : tensor<1x8xf32>
  } uncond {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>):
    %r1, %y1 = trellis.linear_residual_norm %x, %w, %b residual %x gate %c modulate %c, %c {eps = 1.0e-06 : f64} : (tensor<1x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>) -> (tensor<1x8xf32>, tensor<1x8xf32>)
    %r2, %y2 = trellis.linear_residual_norm %y1, %w, %b residual %r1 modulate %c, %c {eps = 1.0e-06 : f64} : (tensor<1x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>) -> (tensor<1x8xf32>, tensor<1x8xf32>)
    %v = trellis.add %y2, %r2 : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
    trellis.yield %v : tensor<1x8xf32>
  }
  return %r : tensor<1x8xf32>
}
