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

// Every FP8 linear gets its weight's amax; other linears are left alone.
// CHECK-LABEL: func.func @mlp
// CHECK: trellis.linear %{{.*}} {activation = "gelu_tanh", activation_amax = 3.500000e+00 : f32, precision = "fp8_e4m3"}
// CHECK: trellis.linear %{{.*}} {activation_amax = 2.500000e-01 : f32, precision = "fp8_e4m3"}
// CHECK: trellis.linear %{{.*}} : (tensor<2x10x8xf16>, tensor<8x8xf16>) -> tensor<2x10x8xf16>

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
