#!/usr/bin/env python3
"""Sums the JUnit XML files of all suites into one line: "N passed, N failed".

Exit status 0 only if nothing failed and at least one test ran. A suite that
crashed without writing its XML counts as one failure.
"""
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def count(path: Path):
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return 0, 1, 0
    passed = failed = skipped = 0
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def main() -> int:
    results = Path(sys.argv[1])
    total_passed = total_failed = total_skipped = 0
    for xml in sorted(results.glob("*.xml")):
        p, f, s = count(xml)
        print(f"  {xml.stem:40s} {p:5d} passed {f:4d} failed {s:4d} skipped")
        total_passed += p
        total_failed += f
        total_skipped += s
    if total_skipped:
        print(f"({total_skipped} skipped)")
    print(f"{total_passed} passed, {total_failed} failed")
    return 0 if total_failed == 0 and total_passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
