"""Fail unless the protocol conformance tests ran, none skipped (CI's guard).

The conformance tests skip when Kafka's message specs are not found (a clone on its
own has none); in CI that would quietly stop checking our schemas, so `.ci/run` reads
pytest's JUnit XML report with this script and fails on any skipped or missing one.
Usage: python3 .ci/conformance_ran.py REPORT.xml
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

MODULE = "test_conformance"


def main(argv: list[str]) -> int:
    """Check the report named in argv; print one line; return the exit status."""
    if len(argv) != 2:
        print(f"usage: {argv[0]} REPORT.xml", file=sys.stderr)
        return 2
    try:
        root = ET.parse(argv[1]).getroot()
    except (OSError, ET.ParseError) as exc:
        print(f"conformance check: no pytest report ({exc})", file=sys.stderr)
        return 1
    ran, skipped = 0, []
    for case in root.iter("testcase"):
        # A module-level skip is reported with the module as the test's name.
        full = f"{case.get('classname', '')}.{case.get('name', '')}"
        if MODULE not in full:
            continue
        ran += 1
        skip = case.find("skipped")
        if skip is not None:
            skipped.append(f"{full}: {skip.get('message', '')}")
    if skipped:
        print(f"conformance check: FAILED, {len(skipped)} skipped, e.g.", file=sys.stderr)
        print(f"  {skipped[0]}", file=sys.stderr)
        return 1
    if ran == 0:
        print("conformance check: FAILED, no conformance test in the report", file=sys.stderr)
        return 1
    print(f"conformance check: ok, {ran} conformance tests ran, none skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
