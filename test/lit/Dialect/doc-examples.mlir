// The op reference (mlir-tblgen -gen-op-doc of TrellisOps.td) is checked
// against the round-trip tests of this directory: every op has an ```mlir
// example, every example occurs in a round-trip test (so it parses and
// verifies), and every op has a CHECK line there.
// RUN: %python %S/check_doc_examples.py %trellis_src/dialect/TrellisOps.td %S | FileCheck %s

// CHECK: checked {{[0-9]+}} ops, 0 problem(s)
