"""A JUnit XML report of a job's tests, in the shape pytest's ``--junitxml`` writes
(``testsuites/testsuite/testcase``), which CI servers read.

``failed`` is a ``failure``; ``error`` and ``unfinished`` (the job ended during the
test) an ``error``; ``skipped`` and ``xfailed`` a ``skipped``; ``passed`` and
``xpassed`` (not strict) no child.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from scriptbuilder.lifecycle.outcomes import TestResult

UNFINISHED = "the job ended during this test (killed, cancelled, timed out or its node lost)"


def _names(test_id: str) -> tuple[str, str]:
    """pytest's classname and name: ``a/b/test_x.py::C::test[p]`` gives ``a.b.test_x.C``
    and ``test[p]``."""
    parts = test_id.split("::")
    module = parts[0].removesuffix(".py").replace("/", ".")
    if len(parts) == 1:
        return module, module
    return ".".join([module, *parts[1:-1]]), parts[-1]


def junit_xml(tests: Sequence[TestResult], suite: str = "pytest") -> bytes:
    """The report of ``tests`` as UTF-8 XML bytes."""
    counts = {"failure": 0, "error": 0, "skipped": 0}
    cases = []
    for test in tests:
        classname, name = _names(test.id)
        case = ET.Element(
            "testcase",
            classname=classname,
            name=name,
            time=f"{test.duration_seconds or 0.0:.3f}",
        )
        child, message = None, test.message
        if test.outcome == "failed":
            child = "failure"
        elif test.outcome in ("error", "unfinished"):
            child = "error"
            message = UNFINISHED if test.outcome == "unfinished" else message
        elif test.outcome in ("skipped", "xfailed"):
            child = "skipped"
            message = f"xfail: {message}" if test.outcome == "xfailed" else message
        if child is not None:
            counts[child] += 1
            ET.SubElement(case, child, message=message).text = message
        cases.append(case)
    root = ET.Element("testsuites")
    total = sum(t.duration_seconds or 0.0 for t in tests)
    node = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(cases)),
        failures=str(counts["failure"]),
        errors=str(counts["error"]),
        skipped=str(counts["skipped"]),
        time=f"{total:.3f}",
    )
    node.extend(cases)
    ET.indent(root)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data + b"\n"
