"""Fixture: the second module of the chain."""

from .far3 import skip_far_away, skip_three_away  # noqa: F401
