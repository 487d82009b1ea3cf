"""Fixture: a helper module a helper module imports from."""

from .deepest import skip_from_far  # noqa: F401
from .util import skip_num_gpus_less_than

skip_from_two_modules_away = skip_num_gpus_less_than(4)
