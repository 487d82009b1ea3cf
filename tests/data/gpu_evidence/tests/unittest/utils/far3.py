"""Fixture: the third module of the chain: its own names are read, its imports not."""

import pytest

from .farthest import skip_far_away  # noqa: F401

skip_three_away = pytest.mark.skip_less_device(4)
