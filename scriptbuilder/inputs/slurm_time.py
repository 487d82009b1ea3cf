"""Slurm time limits: the formats ``sbatch --time`` accepts, and their length.

Slurm reads ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM`` and
``D-HH:MM:SS`` (every part plain decimal digits), and ``infinite`` or
``unlimited`` in any letter case; ``0`` also means no limit. Seconds round up
to the next minute, as Slurm rounds them.
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
    """The length of a Slurm time limit in minutes, None for no limit; ValueError
    when ``value`` is in none of Slurm's formats."""
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
    """:func:`time_limit_minutes`, or a :class:`BuildError` naming ``field`` (a
    request field or a command-line flag) and the formats."""
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
