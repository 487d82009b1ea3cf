"""Where each resolved value came from, for ``--explain`` and the dry run."""

from __future__ import annotations

from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")


class Choice(NamedTuple):
    field: str
    value: Any
    rule: str


class Trace:
    """The choices in the order they were made, and the warnings for the report.

    Each choice is kept as a plain ``(field, value, rule)`` tuple: a sweep keeps
    thousands of traces alive, and the garbage collector stops tracking a plain
    tuple of strings and numbers (it never does for a named tuple), so it is not
    walked again at every collection. :attr:`choices` gives them as :class:`Choice`.
    """

    __slots__ = ("entries", "warnings")

    def __init__(self) -> None:
        self.entries: list[tuple[str, Any, str]] = []
        self.warnings: list[str] = []

    def chose(self, name: str, value: T, rule: str) -> T:
        """Record ``value`` for ``name`` with the rule that chose it; returns ``value``."""
        self.entries.append((name, value, rule))
        return value

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    @property
    def choices(self) -> list[Choice]:
        return [Choice._make(entry) for entry in self.entries]

    def lines(self) -> list[str]:
        width = max((len(name) for name, _, _ in self.entries), default=0)
        return [f"{name:<{width}}  {value!s}  <- {rule}" for name, value, rule in self.entries]
