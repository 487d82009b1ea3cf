"""Where each resolved value came from, for ``--explain`` and the dry run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")


class Choice(NamedTuple):
    field: str
    value: Any
    rule: str


@dataclass
class Trace:
    """The choices of a running build in the order they were made, and its warnings."""

    choices: list[Choice] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def chose(self, name: str, value: T, rule: str) -> T:
        self.choices.append(Choice(name, value, rule))
        return value

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def record(self) -> TraceRecord:
        return TraceRecord(tuple(self.choices), tuple(self.warnings))


@dataclass(frozen=True)
class TraceRecord:
    choices: tuple[Choice, ...]
    warnings: tuple[str, ...]
