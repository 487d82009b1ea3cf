"""Where each resolved value came from, for ``--explain`` and the dry run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Choice:
    field: str
    value: Any
    rule: str


@dataclass
class Trace:
    choices: list[Choice] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def chose(self, name: str, value: T, rule: str) -> T:
        """Record ``value`` for ``name`` with the rule that chose it; returns ``value``."""
        self.choices.append(Choice(name, value, rule))
        return value

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def lines(self) -> list[str]:
        width = max((len(c.field) for c in self.choices), default=0)
        return [f"{c.field:<{width}}  {c.value!s}  <- {c.rule}" for c in self.choices]
