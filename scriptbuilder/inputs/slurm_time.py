"""Slurm time limits in the formats ``sbatch --time`` accepts (``0``, ``infinite`` and
``unlimited`` mean none), and their length in minutes, seconds rounded up as Slurm does.
"""

from __future__ import annotations

import re

from scriptbuilder.errors import BuildError

#: The accepted spellings, in the words of the error message.
FORMATS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or infinite"
_NO_LIMIT = frozenset({"infinite", "unlimited"})
_TIME = re.compile(
    r"(?:(?P<days>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?"
    r"|(?P<h>\d+):(?P<hm>\d+):(?P<hs>\d+)"
    r"|(?P<m>\d+)(?::(?P<ms>\d+))?)",
    re.ASCII,
)


def time_limit_minutes(value: str) -> int | None:
    """The length of a Slurm time limit in minutes (None: no limit), or ValueError."""
    if value.lower() in _NO_LIMIT:
        return None
    match = _TIME.fullmatch(value)
    if match is None:
        raise ValueError(f"not a Slurm time limit: {value!r}")
    part = {name: int(text) if text else 0 for name, text in match.groupdict().items()}
    if match["days"] is not None:
        seconds = ((part["days"] * 24 + part["dh"]) * 60 + part["dm"]) * 60 + part["ds"]
    elif match["h"] is not None:
        seconds = (part["h"] * 60 + part["hm"]) * 60 + part["hs"]
    else:
        seconds = part["m"] * 60 + part["ms"]
    minutes = -(-seconds // 60)
    return None if minutes == 0 else minutes


def checked_minutes(field: str, value: str) -> int | None:
    """:func:`time_limit_minutes`, or a :class:`BuildError` naming ``field`` and the formats."""
    try:
        return time_limit_minutes(value)
    except ValueError:
        shown = value if len(value) <= 40 else value[:37] + "..."
        raise BuildError(
            f"{field} {shown!r} is not a Slurm time limit; write it as {FORMATS} "
            "(for example 02:00:00 or 1-12:00:00)"
        ) from None


def check_time_limit(field: str, value: str) -> str:
    """``value`` when it is a Slurm time limit, else the error of :func:`checked_minutes`."""
    checked_minutes(field, value)
    return value
