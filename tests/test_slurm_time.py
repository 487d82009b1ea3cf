"""Slurm time limits: every format sbatch accepts, its length, and the refusals."""

from __future__ import annotations

import pytest

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.slurm_time import check_time_limit, time_limit_minutes

ACCEPTED = [
    ("30", 30),
    ("90", 90),
    ("30:00", 30),
    ("30:01", 31),
    ("02:00:00", 120),
    ("2:0:0", 120),
    ("00:00:30", 1),
    ("1-12", 36 * 60),
    ("1-12:30", 36 * 60 + 30),
    ("1-00:00:01", 24 * 60 + 1),
    ("0", None),
    ("00:00:00", None),
    ("infinite", None),
    ("INFINITE", None),
    ("Unlimited", None),
]


@pytest.mark.parametrize(("value", "minutes"), ACCEPTED)
def test_accepted_formats_and_their_length(value: str, minutes: int | None) -> None:
    assert time_limit_minutes(value) == minutes
    assert check_time_limit("--time-limit", value) == value


REFUSED = [
    "",
    "2hours",
    "2h",
    "1:2:3:4",
    "1-2:3:4:5",
    "-5",
    "1-",
    "-1-00",
    "02:00:00 ",
    " 02:00:00",
    "02:00:00\n",
    "１２",  # full-width digits are not Slurm's
    "1.5",
    "1-2-3",
    "forever",
]


@pytest.mark.parametrize("value", REFUSED)
def test_refused_values(value: str) -> None:
    with pytest.raises(ValueError):
        time_limit_minutes(value)
    with pytest.raises(BuildError) as info:
        check_time_limit("time_limit", value)
    message = str(info.value)
    assert message.startswith(f"time_limit {value!r} is not a Slurm time limit")
    assert "HH:MM:SS" in message and "\n" not in message


def test_long_values_are_shortened_in_the_message() -> None:
    with pytest.raises(BuildError) as info:
        check_time_limit("--time-limit", "x" * 10_000)
    assert len(str(info.value)) < 200
