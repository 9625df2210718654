// RUN: trellis-opt --trellis-apply-fp8-scales=scales-file=%S/Inputs/fp8-scales.json %s | FileCheck %s
// RUN: not trellis-opt --trellis-apply-fp8-scales %s 2>&1 | FileCheck %s --check-prefix=UNSET
// RUN: not trellis-opt --trellis-apply-fp8-scales=scales-file=%t.absent.json %s 2>&1 | FileCheck %s --check-prefix=ABSENT
// RUN: echo '{"format": "trellis-fp8-activation-scales", "version": 1, "amax": {"flow/blocks.0.mlp.fc1.weight": 3.5}}' > %t.missing.json
// RUN: not trellis-opt --trellis-apply-fp8-scales=scales-file=%t.missing.json %s 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: echo '{"format": "trellis-fp8-activation-scales", "version": 1, "amax": {"flow/blocks.0.mlp.fc1.weight": 3.5, "flow/blocks.0.mlp.fc2.weight": 1, "flow/blocks.9.mlp.fc1.weight": 1}}' > %t.extra.json
// RUN: not trellis-opt --trellis-apply-fp8-scales=scales-file=%t.extra.json %s 2>&1 | FileCheck %s --check-prefix=EXTRA
// RUN: echo '{"format": "trellis-fp8-activation-scales", "version": 1, "amax": {"flow/blocks.0.mlp.fc1.weight": -2}}' > %t.negative.json
// RUN: not trellis-opt --trellis-apply-fp8-scales=scales-file=%t.negative.json %s 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: echo '{"format": "trellis-fp8-activation-scales", "version": 1, "amax": {"flow/blocks.0.mlp.fc1.weight": 1e39}}' > %t.huge.json
// RUN: not trellis-opt --trellis-apply-fp8-scales=scales-file=%t.huge.json %s 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: echo '{"format": "something-else", "version": 1, "amax": {}}' > %t.format.json
// RUN: not trellis-opt --trellis-apply-fp8-scales=scales-file=%t.format.json %s 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: echo '{"format": "trellis-fp8-activation-scales", "version": 2, "amax": {}}' > %t.version.json
// RUN: not trellis-opt --trellis-apply-fp8-scales=scales-file=%t.version.json %s 2>&1 | FileCheck %s --check-prefix=VERSION
// RUN: echo '{"format": "trellis-fp8-activation-scales", "version": 1, "amax": {' > %t.truncated.json
// RUN: not trellis-opt --trellis-apply-fp8-scales=scales-file=%t.truncated.json %s 2>&1 | FileCheck %s --check-prefix=JSON
// RUN: echo '{"format": "trellis-fp8-activation-scales", "version": 1, "amax": {"flow/blocks.0.mlp.fc1.weight": 3.5, "flow/blocks.0.mlp.fc2.weight": 0.25}, "v_amax": {"flow/blocks.0.attn.q_rms_norm.gamma": [2.5, 4]}}' > %t.v.json
// RUN: trellis-opt --trellis-apply-fp8-scales=scales-file=%t.v.json %s | FileCheck %s --check-prefix=STATICV
// RUN: echo '{"format": "trellis-fp8-activation-scales", "version": 1, "amax": {"flow/blocks.0.mlp.fc1.weight": 3.5, "flow/blocks.0.mlp.fc2.weight": 0.25}, "v_amax": {}}' > %t.vmissing.json
// RUN: not trellis-opt --trellis-apply-fp8-scales=scales-file=%t.vmissing.json %s 2>&1 | FileCheck %s --check-prefix=VMISSING
// RUN: echo '{"format": "trellis-fp8-activation-scales", "version": 1, "amax": {"flow/blocks.0.mlp.fc1.weight": 3.5, "flow/blocks.0.mlp.fc2.weight": 0.25}, "v_amax": {"flow/blocks.0.attn.q_rms_norm.gamma": [2.5]}}' > %t.vheads.json
// RUN: not trellis-opt --trellis-apply-fp8-scales=scales-file=%t.vheads.json %s 2>&1 | FileCheck %s --check-prefix=VHEADS
// RUN: echo '{"format": "trellis-fp8-activation-scales", "version": 1, "amax": {"flow/blocks.0.mlp.fc1.weight": 3.5, "flow/blocks.0.mlp.fc2.weight": 0.25}, "v_amax": {"flow/blocks.0.attn.q_rms_norm.gamma": [2.5, 4], "flow/blocks.7.attn.q_rms_norm.gamma": [1, 1]}}' > %t.vextra.json
// RUN: not trellis-opt --trellis-apply-fp8-scales=scales-file=%t.vextra.json %s 2>&1 | FileCheck %s --check-prefix=VEXTRA
// RUN: echo '{"format": "trellis-fp8-activation-scales", "version": 1, "amax": {"flow/blocks.0.mlp.fc1.weight": 3.5, "flow/blocks.0.mlp.fc2.weight": 0.25}, "v_amax": {"flow/blocks.0.attn.q_rms_norm.gamma": [2.5, 0]}}' > %t.vzero.json
// RUN: not trellis-opt --trellis-apply-fp8-scales=scales-file=%t.vzero.json %s 2>&1 | FileCheck %s --check-prefix=VZERO

// Every FP8 linear gets its weight's amax; other linears are left alone.
// CHECK-LABEL: func.func @mlp
// CHECK: trellis.linear %{{.*}} {activation = "gelu_tanh", activation_amax = 3.500000e+00 : f32, precision = "fp8_e4m3"}
// CHECK: trellis.linear %{{.*}} {activation_amax = 2.500000e-01 : f32, precision = "fp8_e4m3"}
// CHECK: trellis.linear %{{.*}} : (tensor<2x10x8xf16>, tensor<8x8xf16>) -> tensor<2x10x8xf16>

// Without "v_amax" in the file the FP8 attention keeps its dynamic v scales;
// with it, each gets its q_gamma's per-head values.
// CHECK-LABEL: func.func @attention
// CHECK: trellis.attention {{.*}} {precision = "fp8_e4m3", scale = 1.250000e-01 : f64}
// STATICV-LABEL: func.func @attention
// STATICV: trellis.attention {{.*}} {precision = "fp8_e4m3", scale = 1.250000e-01 : f64, v_amax = array<f32: 2.500000e+00, 4.000000e+00>}
// VMISSING: error: FP8 scales file '{{.*}}vmissing.json' has no "v_amax" entry for the attention whose q_gamma is 'flow/blocks.0.attn.q_rms_norm.gamma' (calibrated for another program?)
// VHEADS: error: 'trellis.attention' op v_amax must hold one value per head (2), found 1
// VEXTRA: error: FP8 scales file '{{.*}}vextra.json': no FP8 attention ("v_amax") of this program reads 'flow/blocks.7.attn.q_rms_norm.gamma'
// VZERO: error: FP8 scales file '{{.*}}vzero.json': "v_amax"["flow/blocks.0.attn.q_rms_norm.gamma"] must be a non-empty array of positive finite numbers (f32), one per head

// UNSET: error: trellis-apply-fp8-scales needs scales-file
// ABSENT: error: FP8 scales file '{{.*}}absent.json': cannot read it
// MISSING: error: FP8 scales file '{{.*}}missing.json' has no entry for 'flow/blocks.0.mlp.fc2.weight' (calibrated for another program?)
// EXTRA: error: FP8 scales file '{{.*}}extra.json': no FP8 linear of this program reads 'flow/blocks.9.mlp.fc1.weight'
// NEGATIVE: error: FP8 scales file '{{.*}}.json': "amax"["flow/blocks.0.mlp.fc1.weight"] must be a positive finite number (an f32)
// FORMAT: error: FP8 scales file '{{.*}}format.json': "format" must be "trellis-fp8-activation-scales", found "something-else"
// VERSION: error: FP8 scales file '{{.*}}version.json': "version" must be 1, found 2
// JSON: error: FP8 scales file '{{.*}}truncated.json': not valid JSON

func.func @mlp(%x: tensor<2x10x8xf16>) -> tensor<2x10x8xf16> {
  %w1 = trellis.weight "blocks.0.mlp.fc1.weight" of "flow" : tensor<32x8xf16>
  %b1 = trellis.weight "blocks.0.mlp.fc1.bias" of "flow" : tensor<32xf16>
  %w2 = trellis.weight "blocks.0.mlp.fc2.weight" of "flow" : tensor<8x32xf16>
  %w3 = trellis.weight "out.weight" of "flow" : tensor<8x8xf16>
  %h = trellis.linear %x, %w1, %b1 {activation = "gelu_tanh", precision = "fp8_e4m3"} : (tensor<2x10x8xf16>, tensor<32x8xf16>, tensor<32xf16>) -> tensor<2x10x32xf16>
  %y = trellis.linear %h, %w2 {precision = "fp8_e4m3"} : (tensor<2x10x32xf16>, tensor<8x32xf16>) -> tensor<2x10x8xf16>
  %z = trellis.linear %y, %w3 : (tensor<2x10x8xf16>, tensor<8x8xf16>) -> tensor<2x10x8xf16>
  return %z : tensor<2x10x8xf16>
}

func.func @attention(%q: tensor<1x4x2x64xf16>) -> tensor<1x4x2x64xf16> {
  %gq = trellis.weight "blocks.0.attn.q_rms_norm.gamma" of "flow" : tensor<2x64xf32>
  %gk = trellis.weight "blocks.0.attn.k_rms_norm.gamma" of "flow" : tensor<2x64xf32>
  %o = trellis.attention %q, %q, %q q_gamma %gq k_gamma %gk {precision = "fp8_e4m3", scale = 0.125 : f64} : (tensor<1x4x2x64xf16>, tensor<1x4x2x64xf16>, tensor<1x4x2x64xf16>, tensor<2x64xf32>, tensor<2x64xf32>) -> tensor<1x4x2x64xf16>
  return %o : tensor<1x4x2x64xf16>
}
