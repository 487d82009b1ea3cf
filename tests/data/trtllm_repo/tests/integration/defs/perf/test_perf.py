"""Synthetic stand-in for TensorRT-LLM's perf/test_perf.py: the case names are
generated from the test lists, so only their labels say how many GPUs they use.

Data for scriptbuilder's tests: read as text, never imported.
"""

import pytest
from defs.perf.utils import generate_perf_cases

PERF_CASES = generate_perf_cases()


@pytest.mark.parametrize("perf_case_name", PERF_CASES)
def test_perf(perf_case_name):
    assert perf_case_name
