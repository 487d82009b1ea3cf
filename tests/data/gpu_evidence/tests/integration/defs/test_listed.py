"""Fixture: tests the test-db lists place in stages."""

import pytest


def test_unmarked():
    pass


@pytest.mark.skip_less_device(8)
def test_more_than_its_stage():
    pass


@pytest.mark.skip_less_device(2)
def test_marked_and_listed():
    pass


def test_fixture_cases(model_config):
    """Its cases come from a parametrized fixture of a conftest.py."""
