"""Fixture: the first of a chain of helper modules (marks one to four imports away)."""

from .far2 import skip_far_away, skip_three_away

skip_from_far = skip_far_away
skip_from_three = skip_three_away
