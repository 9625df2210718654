"""Prints a .mlir text that nests brackets N levels deep.

Usage: nested_input.py KIND N, KIND one of
  parens   an op whose operand list is N nested parentheses (line 2)
  regions  N nested regions
  types    a function argument of N nested tuple<> types
  strings  N levels of brackets inside a comment and a string attribute only
Used by nesting-depth.test (too large to keep as literal test inputs).
"""
import sys

kind, n = sys.argv[1], int(sys.argv[2])
if kind == "parens":
    print("func.func @f() {")
    print('  "x.op"' + "(" * n + ")" * n + " : () -> ()")
    print("  return")
    print("}")
elif kind == "regions":
    print('"x.op"() (' + '{"x.op"() (' * n + "{}" + ") : () -> ()}" * n + ") : () -> ()")
elif kind == "types":
    print("func.func @f(%a: " + "tuple<" * n + "f32" + ">" * n + ") {")
    print("  return")
    print("}")
elif kind == "strings":
    print("// " + "(" * n)
    print('func.func @f() attributes {s = "' + '{[(<\\"' * n + '"} {')
    print("  return")
    print("}")
else:
    sys.exit(f"unknown kind {kind!r}")
