"""Durations as the orchestrator writes them: ``1h``, ``30m``, ``3600s``, ``90`` (seconds),
``HH:MM:SS`` or ``MM:SS``; also ``1.5h`` and ``0.5s`` (poll intervals in tests)."""

from __future__ import annotations

import re

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)", re.IGNORECASE)
_CLOCK = re.compile(r"(?:(\d+):)?(\d{1,2}):(\d{1,2})")


def parse_duration(value: str | float | int, name: str = "duration") -> float:
    """Seconds in ``value``; ValueError naming ``name`` and the value when it is not one."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    text = str(value).strip()
    if match := _NUMBER.fullmatch(text):
        seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
    elif match := _CLOCK.fullmatch(text):
        hours, minutes, secs = (int(g or 0) for g in match.groups())
        seconds = float(hours * 3600 + minutes * 60 + secs) if minutes < 60 and secs < 60 else 0
    else:
        seconds = 0.0
    if seconds <= 0:
        raise ValueError(
            f"{name} {str(value)[:40]!r} is not a duration: use e.g. 1h, 30m, 3600s or HH:MM:SS"
        )
    return seconds
