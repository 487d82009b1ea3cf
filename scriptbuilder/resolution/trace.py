"""Where each resolved value came from, for ``--explain`` and the dry run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")

#: ``(field, value, rule)``: a plain tuple, which the garbage collector stops
#: tracking once it holds only strings, numbers and None (a named tuple never is).
Entry = tuple[str, Any, str]


class Choice(NamedTuple):
    field: str
    value: Any
    rule: str


class Trace:
    """The choices of a running build in the order they were made, and its warnings."""

    __slots__ = ("entries", "warnings")

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.warnings: list[str] = []

    def chose(self, name: str, value: T, rule: str) -> T:
        """Record ``value`` for ``name`` with the rule that chose it; returns ``value``."""
        self.entries.append((name, value, rule))
        return value

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def record(self) -> TraceRecord:
        """What the finished build keeps. Tuples of plain values, not lists: a
        sweep keeps thousands of builds, and the collector need not walk them."""
        return TraceRecord(tuple(self.entries), tuple(self.warnings))


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """The trace of a finished build (see :meth:`Trace.record`)."""

    entries: tuple[Entry, ...]
    warnings: tuple[str, ...]

    @property
    def choices(self) -> list[Choice]:
        return [Choice._make(entry) for entry in self.entries]

    def lines(self) -> list[str]:
        width = max((len(name) for name, _, _ in self.entries), default=0)
        return [f"{name:<{width}}  {value!s}  <- {rule}" for name, value, rule in self.entries]
