"""Prints a function holding a non-splat trellis.constant of N f16 elements.

Usage: large_constant.py N. Used by constant-size.mlir (too large to keep as
a literal test input).
"""
import sys

n = int(sys.argv[1])
# Distinct 16-bit patterns keep the value from being stored as a splat.
data = "".join(f"{i & 0xFFFF:04X}" for i in range(n))
print("func.func @f() {")
print(f'  %c = trellis.constant dense<"0x{data}"> : tensor<{n}xf16>')
print("  return")
print("}")
