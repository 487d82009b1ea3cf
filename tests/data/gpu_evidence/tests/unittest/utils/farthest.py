"""Fixture: a mark four imports away from the test (beyond the depth followed)."""

import pytest

skip_far_away = pytest.mark.skip_less_device(8)
