// RUN: trellis-opt --trellis-hoist-time="max-steps=0" %s | FileCheck %s
// RUN: trellis-opt --trellis-hoist-time="max-steps=0" --mlir-print-debuginfo %s | FileCheck %s --check-prefix=LOC
// RUN: trellis-opt --trellis-hoist-time %s | FileCheck %s --check-prefix=CAP

// By default the tables have 64 rows (a run-time override up to 64 steps
// finds its rows); the grid keeps the compiled steps.
// CAP-LABEL: func.func @two_regions
// CAP: trellis.time_grid {rescale_t = 3.000000e+00 : f64, steps = 4 : i64} : () -> tensor<64xf32>
// CAP: trellis.timestep_embedding %{{.*}} : (tensor<64xf32>) -> tensor<64x256xf32>
// CAP: trellis.time_row %{{.*}} : (tensor<64x8xf32>, tensor<64xf32>, tensor<1xf32>) -> tensor<1x8xf32>

// The t-embedder and one block's adaLN modulation in both regions of a
// specialized sampler (batch 1, 4 steps): computed once above the op on
// the [4] time grid; each region selects its row of the tables (one per
// element type) and splits it into the values it used. The modulation
// chunks nothing uses (#3..#5) do not enter the table; the unconditional
// region's add of x and the embedding stays.
// CHECK-LABEL: func.func @two_regions
// CHECK-SAME: (%{{[^:]*}}: tensor<1x4x8xf32>, %{{[^:]*}}: tensor<1x3x8xf32>, %{{[^:]*}}: tensor<1x3x8xf32>, %[[W0:[^:]*]]: tensor<8x256xf32>, %[[B0:[^:]*]]: tensor<8xf32>, %[[W1:[^:]*]]: tensor<8x8xf32>, %[[B1:[^:]*]]: tensor<8xf32>, %[[WM:[^:]*]]: tensor<48x8xf16>, %[[BM:[^:]*]]: tensor<48xf16>)
// CHECK: %[[G:.*]] = trellis.time_grid {rescale_t = 3.000000e+00 : f64, steps = 4 : i64} : () -> tensor<4xf32>
// CHECK: %[[E:.*]] = trellis.timestep_embedding %[[G]] : (tensor<4xf32>) -> tensor<4x256xf32>
// CHECK: %[[H:.*]] = trellis.linear %[[E]], %[[W0]], %[[B0]] : (tensor<4x256xf32>, tensor<8x256xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: %[[S:.*]] = trellis.silu %[[H]] : tensor<4x8xf32>
// CHECK: %[[EMB:.*]] = trellis.linear %[[S]], %[[W1]], %[[B1]] : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: %[[E16:.*]] = trellis.cast %[[EMB]] : (tensor<4x8xf32>) -> tensor<4x8xf16>
// CHECK: %[[SE:.*]] = trellis.silu %[[E16]] : tensor<4x8xf16>
// CHECK: %[[M:.*]] = trellis.linear %[[SE]], %[[WM]], %[[BM]] : (tensor<4x8xf16>, tensor<48x8xf16>, tensor<48xf16>) -> tensor<4x48xf16>
// CHECK: %[[P:.*]]:6 = trellis.split %[[M]] {axis = 1 : i64, sizes = array<i64: 8, 8, 8, 8, 8, 8>}
// CHECK: %[[T16:.*]] = trellis.concat %[[P]]#0, %[[P]]#1, %[[P]]#2 {axis = 1 : i64} : (tensor<4x8xf16>, tensor<4x8xf16>, tensor<4x8xf16>) -> tensor<4x24xf16>
// CHECK: %[[E2:.*]] = trellis.timestep_embedding %[[G]] : (tensor<4xf32>) -> tensor<4x256xf32>
// CHECK: %[[H2:.*]] = trellis.linear %[[E2]], %[[W0]], %[[B0]] : (tensor<4x256xf32>, tensor<8x256xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: trellis.flow_sample
// CHECK-NEXT: ^bb0(%[[X:[^:]*]]: tensor<1x4x8xf32>, %[[TAU:[^:]*]]: tensor<1xf32>):
// CHECK-NEXT: %[[R32:.*]] = trellis.time_row %[[EMB]], %[[G]], %[[TAU]] : (tensor<4x8xf32>, tensor<4xf32>, tensor<1xf32>) -> tensor<1x8xf32>
// CHECK-NEXT: %[[R16:.*]] = trellis.time_row %[[T16]], %[[G]], %[[TAU]] : (tensor<4x24xf16>, tensor<4xf32>, tensor<1xf32>) -> tensor<1x24xf16>
// CHECK-NEXT: %[[C:.*]]:3 = trellis.split %[[R16]] {axis = 1 : i64, sizes = array<i64: 8, 8, 8>} : (tensor<1x24xf16>) -> (tensor<1x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>)
// CHECK-NEXT: %[[X16:.*]] = trellis.cast %[[X]]
// CHECK-NEXT: %[[Y:.*]] = trellis.modulate %[[X16]], %[[C]]#0, %[[C]]#1
// CHECK-NEXT: %[[Z:.*]] = trellis.gated_residual %[[X16]], %[[Y]], %[[C]]#2
// CHECK-NEXT: %[[O:.*]] = trellis.cast %[[Z]]
// CHECK-NEXT: %[[V:.*]] = trellis.add %[[O]], %[[R32]] : (tensor<1x4x8xf32>, tensor<1x8xf32>) -> tensor<1x4x8xf32>
// CHECK-NEXT: trellis.yield %[[V]]
// CHECK-NEXT: } uncond {
// CHECK-NEXT: ^bb0(%[[XU:[^:]*]]: tensor<1x4x8xf32>, %[[TAUU:[^:]*]]: tensor<1xf32>):
// CHECK-NEXT: %[[RU:.*]] = trellis.time_row %[[H2]], %[[G]], %[[TAUU]] : (tensor<4x8xf32>, tensor<4xf32>, tensor<1xf32>) -> tensor<1x8xf32>
// CHECK-NEXT: %[[VU:.*]] = trellis.add %[[XU]], %[[RU]]
// CHECK-NEXT: trellis.yield %[[VU]]
// The cloned ops keep their locations; the grid and the row selections
// take the sampler's.
// LOC-LABEL: func.func @two_regions
// LOC: trellis.time_grid {{.*}} loc(#[[SAMPLER:loc[0-9]*]])
// LOC-NEXT: trellis.timestep_embedding {{.*}} loc(#[[TEMB:loc[0-9]*]])
// LOC: trellis.linear {{.*}} -> tensor<4x48xf16> loc(#[[ADALN:loc[0-9]*]])
// LOC: trellis.time_row {{.*}} loc(#[[SAMPLER]])
// LOC-DAG: #[[TEMB]] = loc("t_embedder")
// LOC-DAG: #[[ADALN]] = loc("adaLN")
func.func @two_regions(%noise: tensor<1x4x8xf32>, %cond: tensor<1x3x8xf32>, %neg: tensor<1x3x8xf32>,
                       %w0: tensor<8x256xf32>, %b0: tensor<8xf32>, %w1: tensor<8x8xf32>, %b1: tensor<8xf32>,
                       %wm: tensor<48x8xf16>, %bm: tensor<48xf16>) -> tensor<1x4x8xf32> {
  %x0 = trellis.flow_sample %noise, %cond, %neg
          {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 3.000000e+00 : f64,
           rescale_t = 3.000000e+00 : f64, steps = 4 : i64}
          : (tensor<1x4x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%x: tensor<1x4x8xf32>, %tau: tensor<1xf32>):
    %e = trellis.timestep_embedding %tau : (tensor<1xf32>) -> tensor<1x256xf32> loc("t_embedder")
    %h = trellis.linear %e, %w0, %b0 : (tensor<1x256xf32>, tensor<8x256xf32>, tensor<8xf32>) -> tensor<1x8xf32>
    %s = trellis.silu %h : tensor<1x8xf32>
    %emb = trellis.linear %s, %w1, %b1 : (tensor<1x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<1x8xf32>
    %e16 = trellis.cast %emb : (tensor<1x8xf32>) -> tensor<1x8xf16>
    %se = trellis.silu %e16 : tensor<1x8xf16>
    %m = trellis.linear %se, %wm, %bm : (tensor<1x8xf16>, tensor<48x8xf16>, tensor<48xf16>) -> tensor<1x48xf16> loc("adaLN")
    %p:6 = trellis.split %m {axis = 1 : i64, sizes = array<i64: 8, 8, 8, 8, 8, 8>} : (tensor<1x48xf16>) -> (tensor<1x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>)
    %x16 = trellis.cast %x : (tensor<1x4x8xf32>) -> tensor<1x4x8xf16>
    %y = trellis.modulate %x16, %p#0, %p#1 : (tensor<1x4x8xf16>, tensor<1x8xf16>, tensor<1x8xf16>) -> tensor<1x4x8xf16>
    %z = trellis.gated_residual %x16, %y, %p#2 : (tensor<1x4x8xf16>, tensor<1x4x8xf16>, tensor<1x8xf16>) -> tensor<1x4x8xf16>
    %o = trellis.cast %z : (tensor<1x4x8xf16>) -> tensor<1x4x8xf32>
    %v = trellis.add %o, %emb : (tensor<1x4x8xf32>, tensor<1x8xf32>) -> tensor<1x4x8xf32>
    trellis.yield %v : tensor<1x4x8xf32>
  } uncond {
  ^bb0(%x: tensor<1x4x8xf32>, %tau: tensor<1xf32>):
    %e = trellis.timestep_embedding %tau : (tensor<1xf32>) -> tensor<1x256xf32> loc("t_embedder")
    %h = trellis.linear %e, %w0, %b0 : (tensor<1x256xf32>, tensor<8x256xf32>, tensor<8xf32>) -> tensor<1x8xf32>
    %v = trellis.add %x, %h : (tensor<1x4x8xf32>, tensor<1x8xf32>) -> tensor<1x4x8xf32>
    trellis.yield %v : tensor<1x4x8xf32>
  }
  return %x0 : tensor<1x4x8xf32>
}

// Batch 2: τ [2] selects a row per sample ([2, W]); a rank-3 value becomes
// a [steps, W] column of the table and is reshaped back in the body. Where
// τ meets x nothing is hoisted, and a view of τ alone (the uncond region's
// reshape) stays in the body: the region is unchanged.
// CHECK-LABEL: func.func @batch2
// CHECK: %[[G:.*]] = trellis.time_grid {rescale_t = 3.000000e+00 : f64, steps = 3 : i64} : () -> tensor<3xf32>
// CHECK: %[[E:.*]] = trellis.timestep_embedding %[[G]] {dim = 16 : i64} : (tensor<3xf32>) -> tensor<3x16xf32>
// CHECK: %[[H:.*]] = trellis.linear %[[E]]
// CHECK: %[[A:.*]] = trellis.mul %[[H]], %{{.*}} : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
// CHECK: %[[R3:.*]] = trellis.reshape %[[A]] : (tensor<3x8xf32>) -> tensor<3x2x4xf32>
// CHECK: %[[T:.*]] = trellis.reshape %[[R3]] : (tensor<3x2x4xf32>) -> tensor<3x8xf32>
// CHECK: trellis.flow_sample
// CHECK-NEXT: ^bb0(%[[X:[^:]*]]: tensor<2x2x4xf32>, %[[TAU:[^:]*]]: tensor<2xf32>):
// CHECK-NEXT: %[[ROW:.*]] = trellis.time_row %[[T]], %[[G]], %[[TAU]] : (tensor<3x8xf32>, tensor<3xf32>, tensor<2xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[RB:.*]] = trellis.reshape %[[ROW]] : (tensor<2x8xf32>) -> tensor<2x2x4xf32>
// CHECK-NEXT: %[[V:.*]] = trellis.add %[[X]], %[[RB]]
// CHECK-NEXT: trellis.yield %[[V]]
// CHECK-NEXT: } uncond {
// CHECK-NEXT: ^bb0(%[[XU:[^:]*]]: tensor<2x2x4xf32>, %[[TAUU:[^:]*]]: tensor<2xf32>):
// CHECK-NEXT: %[[T2:.*]] = trellis.reshape %[[TAUU]] : (tensor<2xf32>) -> tensor<2x1x1xf32>
// CHECK-NEXT: %[[VU:.*]] = trellis.mul %[[XU]], %[[T2]]
// CHECK-NEXT: trellis.yield %[[VU]]
func.func @batch2(%noise: tensor<2x2x4xf32>, %cond: tensor<1x3x8xf32>, %w0: tensor<8x16xf32>, %b0: tensor<8xf32>,
                  %c: tensor<8xf32>) -> tensor<2x2x4xf32> {
  %x0 = trellis.flow_sample %noise, %cond, %cond
          {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 3.000000e+00 : f64,
           rescale_t = 3.000000e+00 : f64, steps = 3 : i64}
          : (tensor<2x2x4xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> tensor<2x2x4xf32> {
  ^bb0(%x: tensor<2x2x4xf32>, %tau: tensor<2xf32>):
    %e = trellis.timestep_embedding %tau {dim = 16 : i64} : (tensor<2xf32>) -> tensor<2x16xf32>
    %h = trellis.linear %e, %w0, %b0 : (tensor<2x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %a = trellis.mul %h, %c : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %r = trellis.reshape %a : (tensor<2x8xf32>) -> tensor<2x2x4xf32>
    %v = trellis.add %x, %r : (tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
    trellis.yield %v : tensor<2x2x4xf32>
  } uncond {
  ^bb0(%x: tensor<2x2x4xf32>, %tau: tensor<2xf32>):
    %t2 = trellis.reshape %tau : (tensor<2xf32>) -> tensor<2x1x1xf32>
    %v = trellis.mul %x, %t2 : (tensor<2x2x4xf32>, tensor<2x1x1xf32>) -> tensor<2x2x4xf32>
    trellis.yield %v : tensor<2x2x4xf32>
  }
  return %x0 : tensor<2x2x4xf32>
}

// A one-region body that calls the velocity model (before
// trellis-specialize-guidance): nothing τ-only in the region itself.
// CHECK-LABEL: func.func @call_body
// CHECK-NOT: trellis.time_grid
// CHECK: trellis.flow_sample
// CHECK-NEXT: ^bb0
// CHECK-NEXT: func.call @velocity
func.func private @velocity(tensor<1x8xf32>, tensor<1xf32>, tensor<1x3x8xf32>) -> tensor<1x8xf32>
func.func @call_body(%noise: tensor<1x8xf32>, %cond: tensor<1x3x8xf32>) -> tensor<1x8xf32> {
  %x0 = trellis.flow_sample %noise, %cond, %cond
          {cfg_interval = array<f64: 5.000000e-01, 1.000000e+00>, cfg_strength = 3.000000e+00 : f64,
           rescale_t = 3.000000e+00 : f64, steps = 3 : i64}
          : (tensor<1x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> tensor<1x8xf32> {
  ^bb0(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %c: tensor<1x3x8xf32>):
    %v = func.call @velocity(%x, %tau, %c) : (tensor<1x8xf32>, tensor<1xf32>, tensor<1x3x8xf32>) -> tensor<1x8xf32>
    trellis.yield %v : tensor<1x8xf32>
  }
  return %x0 : tensor<1x8xf32>
}
