"""Fixture: a module at the top of the checkout (the product's code, not the test tree)."""

import pytest

skip_from_the_product = pytest.mark.skip_less_device(8)
