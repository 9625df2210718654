// RUN: trellis-opt --trellis-specialize-guidance %s | FileCheck %s
// RUN: trellis-opt --trellis-specialize-guidance --loop-invariant-code-motion %s | FileCheck %s --check-prefix=LICM
// RUN: trellis-opt --trellis-specialize-guidance --mlir-print-debuginfo %s | FileCheck %s --check-prefix=LOC

// A velocity model whose K/V-like projection depends on the condition only
// (private, as the pipeline's networks are).
func.func private @velocity(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %c: tensor<1x1x8xf32>) -> tensor<1x8xf32> {
  %w = trellis.weight "kv.weight" of "m" : tensor<8x8xf32>
  %kv = trellis.linear %c, %w : (tensor<1x1x8xf32>, tensor<8x8xf32>) -> tensor<1x1x8xf32> loc("kv_proj")
  %r = trellis.reshape %kv : (tensor<1x1x8xf32>) -> tensor<1x8xf32>
  %xt = trellis.add %x, %tau : (tensor<1x8xf32>, tensor<1xf32>) -> tensor<1x8xf32>
  %v = trellis.add %xt, %r : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
  return %v : tensor<1x8xf32>
}

// The call is inlined into both regions, each using its condition from
// above; the velocity model, now uncalled, is dropped.
// CHECK-NOT: func.func private @velocity(
// CHECK-LABEL: func.func @stage
// CHECK-SAME: (%[[NOISE:.*]]: tensor<1x8xf32>, %[[COND:.*]]: tensor<1x1x8xf32>)
// CHECK: %[[NEG:.*]] = trellis.constant dense<0.000000e+00> : tensor<1x1x8xf32>
// CHECK: trellis.flow_sample %[[NOISE]], %[[COND]], %[[NEG]]
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<1x8xf32>, %[[T:.*]]: tensor<1xf32>):
// CHECK-NEXT: %[[W:.*]] = trellis.weight "kv.weight" of "m"
// CHECK-NEXT: %[[KV:.*]] = trellis.linear %[[COND]], %[[W]]
// CHECK-NEXT: %[[R:.*]] = trellis.reshape %[[KV]]
// CHECK-NEXT: %[[XT:.*]] = trellis.add %[[X]], %[[T]]
// CHECK-NEXT: %[[V:.*]] = trellis.add %[[XT]], %[[R]]
// CHECK-NEXT: trellis.yield %[[V]] : tensor<1x8xf32>
// CHECK-NEXT: } uncond {
// CHECK-NEXT: ^bb0(%[[XU:.*]]: tensor<1x8xf32>, %[[TU:.*]]: tensor<1xf32>):
// CHECK-NEXT: %[[WU:.*]] = trellis.weight "kv.weight" of "m"
// CHECK-NEXT: %[[KVU:.*]] = trellis.linear %[[NEG]], %[[WU]]
// CHECK-NEXT: %[[RU:.*]] = trellis.reshape %[[KVU]]
// CHECK-NEXT: %[[XTU:.*]] = trellis.add %[[XU]], %[[TU]]
// CHECK-NEXT: %[[VU:.*]] = trellis.add %[[XTU]], %[[RU]]
// CHECK-NEXT: trellis.yield %[[VU]] : tensor<1x8xf32>
// CHECK-NEXT: }

// The condition-only work leaves the sampler loop; what needs x stays.
// LICM-LABEL: func.func @stage
// LICM: %[[NEG:.*]] = trellis.constant
// LICM: trellis.linear %{{.*}}, %{{.*}} : (tensor<1x1x8xf32>
// LICM: %[[R:.*]] = trellis.reshape
// LICM: trellis.linear %[[NEG]]
// LICM: %[[RU:.*]] = trellis.reshape
// LICM: trellis.flow_sample
// LICM-NEXT: ^bb0(%[[X:.*]]: tensor<1x8xf32>, %[[T:.*]]: tensor<1xf32>):
// LICM-NEXT: %[[XT:.*]] = trellis.add %[[X]], %[[T]]
// LICM-NEXT: trellis.add %[[XT]], %[[R]]
// LICM-NEXT: trellis.yield
// LICM-NEXT: } uncond {
// LICM-NEXT: ^bb0
// LICM-NEXT: trellis.add
// LICM-NEXT: trellis.add %{{.*}}, %[[RU]]

// Inlined ops keep the callee's locations.
// LOC: trellis.linear {{.*}} loc(#[[KVLOC:loc[0-9]+]])
// LOC: #[[KVLOC]] = loc("kv_proj")
func.func @stage(%noise: tensor<1x8xf32>, %cond: tensor<1x1x8xf32>) -> tensor<1x8xf32> {
  %neg = trellis.constant dense<0.0> : tensor<1x1x8xf32>
  %x = trellis.flow_sample %noise, %cond, %neg {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 4 : i64}
         : (tensor<1x8xf32>, tensor<1x1x8xf32>, tensor<1x1x8xf32>) -> tensor<1x8xf32> {
  ^bb0(%xi: tensor<1x8xf32>, %t: tensor<1xf32>, %c: tensor<1x1x8xf32>):
    %v = func.call @velocity(%xi, %t, %c) : (tensor<1x8xf32>, tensor<1xf32>, tensor<1x1x8xf32>) -> tensor<1x8xf32>
    trellis.yield %v : tensor<1x8xf32>
  }
  return %x : tensor<1x8xf32>
}

// Samplers of batch 2. Negative cases (left alone): stochastic multi-image,
// a body that is not one call.

func.func @velocity2(%x: tensor<2x8xf32>, %tau: tensor<2xf32>, %c: tensor<2x1x8xf32>) -> tensor<2x8xf32> {
  return %x : tensor<2x8xf32>
}

// Stochastic multi-image: the condition row changes per step.
// CHECK-LABEL: func.func @stochastic
// CHECK: trellis.flow_sample
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<2x8xf32>, %{{.*}}: tensor<2xf32>, %{{.*}}: tensor<2x1x8xf32>):
// CHECK-NEXT: func.call @velocity2
// CHECK-NOT: uncond
// CHECK: return
func.func @stochastic(%noise: tensor<2x8xf32>, %cond: tensor<3x1x8xf32>, %neg: tensor<1x1x8xf32>) -> tensor<2x8xf32> {
  %x = trellis.flow_sample %noise, %cond, %neg {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 4 : i64, multi_image = #trellis.multi_image<stochastic>}
         : (tensor<2x8xf32>, tensor<3x1x8xf32>, tensor<1x1x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%xi: tensor<2x8xf32>, %t: tensor<2xf32>, %c: tensor<2x1x8xf32>):
    %v = func.call @velocity2(%xi, %t, %c) : (tensor<2x8xf32>, tensor<2xf32>, tensor<2x1x8xf32>) -> tensor<2x8xf32>
    trellis.yield %v : tensor<2x8xf32>
  }
  return %x : tensor<2x8xf32>
}

// A batch-1 condition of a B = 2 sampler is repeated above the op (the
// sampler repeats it per call).
// CHECK-LABEL: func.func @repeated_cond
// CHECK-SAME: (%{{.*}}: tensor<2x8xf32>, %[[COND:.*]]: tensor<1x1x8xf32>, %[[NEG:.*]]: tensor<1x1x8xf32>)
// CHECK: %[[C2:.*]] = trellis.broadcast_rows %[[COND]] : (tensor<1x1x8xf32>) -> tensor<2x1x8xf32>
// CHECK: %[[N2:.*]] = trellis.broadcast_rows %[[NEG]] : (tensor<1x1x8xf32>) -> tensor<2x1x8xf32>
// CHECK: trellis.flow_sample
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<2x8xf32>, %{{.*}}: tensor<2xf32>):
// CHECK-NEXT: trellis.yield
// CHECK-NEXT: } uncond {
func.func @repeated_cond(%noise: tensor<2x8xf32>, %cond: tensor<1x1x8xf32>, %neg: tensor<1x1x8xf32>) -> tensor<2x8xf32> {
  %x = trellis.flow_sample %noise, %cond, %neg {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 4 : i64}
         : (tensor<2x8xf32>, tensor<1x1x8xf32>, tensor<1x1x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%xi: tensor<2x8xf32>, %t: tensor<2xf32>, %c: tensor<2x1x8xf32>):
    %v = func.call @velocity2(%xi, %t, %c) : (tensor<2x8xf32>, tensor<2xf32>, tensor<2x1x8xf32>) -> tensor<2x8xf32>
    trellis.yield %v : tensor<2x8xf32>
  }
  return %x : tensor<2x8xf32>
}

// A body that is not a single call.
// CHECK-LABEL: func.func @not_a_call
// CHECK: trellis.flow_sample
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<2x8xf32>, %{{.*}}: tensor<2xf32>, %{{.*}}: tensor<2x1x8xf32>):
// CHECK-NEXT: trellis.neg
// CHECK-NOT: uncond
// CHECK: return
func.func @not_a_call(%noise: tensor<2x8xf32>, %cond: tensor<2x1x8xf32>) -> tensor<2x8xf32> {
  %x = trellis.flow_sample %noise, %cond, %cond {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 4 : i64}
         : (tensor<2x8xf32>, tensor<2x1x8xf32>, tensor<2x1x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%xi: tensor<2x8xf32>, %t: tensor<2xf32>, %c: tensor<2x1x8xf32>):
    %v = trellis.neg %xi : tensor<2x8xf32>
    trellis.yield %v : tensor<2x8xf32>
  }
  return %x : tensor<2x8xf32>
}

// A public velocity model (an exported network, trellisc --export-networks)
// is inlined as well but stays: it is an entry of the program.
// CHECK-LABEL: func.func @exported_velocity(
// CHECK-LABEL: func.func @uses_exported
// CHECK: trellis.flow_sample
// CHECK-NOT: call @exported_velocity
// CHECK: } uncond {
func.func @exported_velocity(%x: tensor<1x8xf32>, %tau: tensor<1xf32>, %c: tensor<1x1x8xf32>) -> tensor<1x8xf32> {
  %xt = trellis.add %x, %tau : (tensor<1x8xf32>, tensor<1xf32>) -> tensor<1x8xf32>
  return %xt : tensor<1x8xf32>
}
func.func @uses_exported(%noise: tensor<1x8xf32>, %cond: tensor<1x1x8xf32>) -> tensor<1x8xf32> {
  %neg = trellis.constant dense<0.0> : tensor<1x1x8xf32>
  %x = trellis.flow_sample %noise, %cond, %neg {cfg_interval = array<f64: 0.5, 1.0>, cfg_strength = 3.0 : f64, rescale_t = 3.0 : f64, steps = 4 : i64}
         : (tensor<1x8xf32>, tensor<1x1x8xf32>, tensor<1x1x8xf32>) -> tensor<1x8xf32> {
  ^bb0(%xi: tensor<1x8xf32>, %t: tensor<1xf32>, %c: tensor<1x1x8xf32>):
    %v = func.call @exported_velocity(%xi, %t, %c) : (tensor<1x8xf32>, tensor<1xf32>, tensor<1x1x8xf32>) -> tensor<1x8xf32>
    trellis.yield %v : tensor<1x8xf32>
  }
  return %x : tensor<1x8xf32>
}
