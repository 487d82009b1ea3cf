"""GPU counts derived for real test ids against counts derived by hand.

``python benchmarks/gpu_counts.py`` reads the cases of the TensorRT-LLM corpus
(``--cases``: a Python file defining ``CASES``, a list of ``(selector, need,
evidence)``; ``--repo``: the checkout the selectors are read from) and prints,
per case, the derived count, its source and the warnings, then how many counts
are exact, how many are at least the need, and how many selections stop the build
(their cases are not in the source or the test-db lists: the build asks for
``required_devices``, so they never run short).  The exit status is 0 even when
counts differ: the figures are the result.
"""

from __future__ import annotations

import argparse
import runpy
from pathlib import Path

from scriptbuilder.inputs.tests import inspect_tests

# ../shared beside the checkout
CORPUS = Path(__file__).resolve().parents[2] / "shared/fixtures/trtllm-tests"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=CORPUS, help="checkout holding tests/")
    parser.add_argument("--cases", type=Path, help="file defining CASES (default: REPO/cases.py)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case")
    args = parser.parse_args()
    cases = runpy.run_path(str(args.cases or args.repo / "cases.py"))["CASES"]
    exact = enough = warned = stopped = 0
    for selector, need, _why in cases:
        found = inspect_tests(f"pytest -v {selector}", str(args.repo), str(args.repo))
        got = found.requirement.devices if found.requirement else 1
        source = found.requirement.source if found.requirement else "default"
        if found.unresolved:  # the build stops and asks for required_devices: never too few
            stopped += 1
            got, source = 0, "stop: " + "; ".join(found.unresolved)
        exact += got == need
        enough += got >= need
        warned += 0 < got < need and bool(found.warnings)
        if args.verbose or got != need:
            mark = "ok" if got == need else "OVER" if got > need else "STOP" if not got else "LOW"
            print(f"{mark:4} need {need} got {got or '-'}  {selector}\n      <- {source}")
            for warning in found.warnings:
                print(f"      warning: {warning}")
    total = len(cases)
    print(f"exact: {exact}/{total}  at least the need: {enough}/{total}", end="")
    print(f"  stopped (required_devices asked for): {stopped}/{total}", end="")
    print(f"  under the need with a warning: {warned}/{total - enough - stopped}")


if __name__ == "__main__":
    main()
