"""Fixture: a test module whose tests are imported (pytest collects them here too)."""

from .shared_cases import test_shared_two_gpus as test_shared  # noqa: F401


def test_own():
    pass
