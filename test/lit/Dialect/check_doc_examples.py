"""Checks the op reference against the round-trip tests.

Usage: check_doc_examples.py TrellisOps.td TEST_DIR

Generates the op documentation with `mlir-tblgen -gen-op-doc` and checks, for
every op of the trellis dialect, that
  * its description has at least one ```mlir example,
  * every example occurs verbatim (up to whitespace and SSA names) in a round-trip test of
    TEST_DIR (a .mlir file whose RUN line does not use -verify-diagnostics),
    so that the examples are known to parse and verify,
  * some round-trip test has a CHECK line on the printed op.
Prints one line per problem and exits 1 if there is any.
"""
import os
import re
import shutil
import subprocess
import sys


def op_docs(td_path):
    tblgen = shutil.which("mlir-tblgen")
    if tblgen is None:
        sys.exit("mlir-tblgen not found on PATH")
    include = os.path.join(os.path.dirname(os.path.realpath(tblgen)), "..", "include")
    doc = subprocess.run(
        [tblgen, "-gen-op-doc", "-I", os.path.dirname(td_path), "-I", include, td_path],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    # One section per op: "### `trellis.name` (trellis::NameOp)".
    sections = re.split(r"^### `(trellis\.[\w.]+)`.*$", doc, flags=re.M)
    return {sections[i]: sections[i + 1] for i in range(1, len(sections), 2)}


def normalize(text):
    # Whitespace and SSA value names do not matter.
    return " ".join(re.sub(r"%[\w.$-]+", "%_", text).split())


def main():
    td_path, test_dir = sys.argv[1], sys.argv[2]
    tests, checks = [], []
    for name in sorted(os.listdir(test_dir)):
        if not name.endswith(".mlir"):
            continue
        with open(os.path.join(test_dir, name), encoding="utf-8") as f:
            text = f.read()
        run_lines = [l for l in text.splitlines() if "RUN:" in l]
        if any("verify-diagnostics" in l for l in run_lines) or not run_lines:
            continue
        if not any("FileCheck" in l for l in run_lines):
            continue
        tests.append(normalize(text))
        checks += [l for l in text.splitlines() if re.match(r"\s*// CHECK", l)]
    corpus = "\n".join(tests)

    problems = []
    docs = op_docs(td_path)
    for op, section in sorted(docs.items()):
        examples = re.findall(r"^```mlir\n(.*?)^```", section, flags=re.M | re.S)
        if not examples:
            problems.append(f"{op}: no ```mlir example in its description")
        for example in examples:
            if normalize(example) not in corpus:
                problems.append(f"{op}: example not found in a round-trip test:\n{example}")
        pattern = re.compile(re.escape(op) + r"(?![\w.])")
        if not any(pattern.search(l) for l in checks):
            problems.append(f"{op}: no CHECK line on the printed op in a round-trip test")
    for p in problems:
        print(p)
    print(f"checked {len(docs)} ops, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
