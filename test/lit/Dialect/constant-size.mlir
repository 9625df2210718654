// Non-splat constants are small (weights are never in the IR): 65536
// elements pass, 65537 are rejected. The inputs are generated.
// RUN: %python %S/large_constant.py 65536 | trellis-opt | FileCheck %s --check-prefix=OK
// RUN: %python %S/large_constant.py 65537 | not trellis-opt 2>&1 | FileCheck %s --check-prefix=ERR

// OK: trellis.constant dense<"0x{{[0-9A-F]+}}"> : tensor<65536xf16>
// ERR: error: 'trellis.constant' op a non-splat constant holds at most 65536 elements, found 65537 (checkpoint tensors are trellis.weight)
