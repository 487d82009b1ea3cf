"""Where each resolved value came from, for ``--explain`` and the dry run."""

from __future__ import annotations

from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")


class Choice(NamedTuple):
    field: str
    value: Any
    rule: str


class Trace:
    """The choices in the order they were made, and the warnings for the report."""

    __slots__ = ("choices", "warnings")

    def __init__(self) -> None:
        self.choices: list[Choice] = []
        self.warnings: list[str] = []

    def chose(self, name: str, value: T, rule: str) -> T:
        """Record ``value`` for ``name`` with the rule that chose it; returns ``value``."""
        self.choices.append(Choice(name, value, rule))
        return value

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def lines(self) -> list[str]:
        width = max((len(c.field) for c in self.choices), default=0)
        return [f"{c.field:<{width}}  {c.value!s}  <- {c.rule}" for c in self.choices]
