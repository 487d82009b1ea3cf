"""The syntax tree of a generated shell script, rendered by :mod:`scriptbuilder.script.render`.

:class:`Lit` reaches the shell unchanged; :class:`Var`, :class:`Subst` and
:class:`Difference` are the only parts that expand at run time. Nodes are frozen
dataclasses; the renderer tells word parts apart by exact class, so none is subclassed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPTION_NAME = re.compile(r"[a-z][a-z0-9-]*")
_SPECIAL_PARAMS = frozenset("?#@$!")
_SIGNAL_NAME = re.compile(r"[A-Z][A-Z0-9]*")
#: Redirections a statement may carry: fixed file descriptors to or from a path.
REDIRECT_OPS = ("<", ">", ">>", "2>", "2>>")


def _check(
    value: str, what: str = "a shell variable name", pattern: re.Pattern[str] = _SHELL_NAME
) -> None:
    if pattern.fullmatch(value) is None:
        raise ValueError(f"not {what}: {value!r}")


@dataclass(frozen=True)
class Lit:
    """A literal string; rendering quotes it so the shell sees these exact bytes."""

    text: str


@dataclass(frozen=True)
class Var:
    """A variable expanded at run time: ``${name}``, ``${name:-default}``, or with
    ``joiner`` ``${name:+<joiner>${name}}`` (nothing when unset or empty: a list
    variable such as ``PYTHONPATH`` extended without an empty entry)."""

    name: str
    default: str | None = None
    joiner: str | None = None

    def __post_init__(self) -> None:
        if not (self.name.isdigit() or self.name in _SPECIAL_PARAMS):
            _check(self.name)
        if self.default is not None and self.joiner is not None:
            raise ValueError(f"${self.name}: a default or a joiner, not both")


@dataclass(frozen=True)
class Subst:
    """A command substitution expanded at run time: ``$(command)``."""

    command: Command


@dataclass(frozen=True)
class ScriptText:
    """A literal rendering of ``body`` (``bash -c``'s script; user values go in ``"$1"``...)."""

    body: tuple[Statement, ...]


@dataclass(frozen=True)
class Difference:
    """Integer arithmetic expanded at run time: ``$((first - rest[0] - ...))``."""

    first: Var | Subst | int
    rest: tuple[Var | Subst | int, ...]


Part = Lit | Var | Subst | ScriptText | Difference


@dataclass(frozen=True)
class Word:
    """One shell word made of literal and run-time parts."""

    parts: tuple[Part, ...]

    @staticmethod
    def of(*items: str | Part) -> Word:
        return Word(tuple(Lit(i) if isinstance(i, str) else i for i in items))

    @staticmethod
    def literal(text: str) -> Word:
        return Word((Lit(text),))


WordLike = str | Part | Word


def to_word(value: WordLike) -> Word:
    if isinstance(value, Word):
        return value
    return Word((Lit(value) if isinstance(value, str) else value,))


@dataclass(frozen=True)
class Command:
    """A simple command: an argument vector of words."""

    argv: tuple[Word, ...]

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("a command needs at least one word")

    @staticmethod
    def of(*args: WordLike) -> Command:
        return Command(tuple(map(to_word, args)))


@dataclass(frozen=True)
class Directive:
    """``#SBATCH --option=value`` (``value`` None gives a bare flag)."""

    option: str
    value: str | None = None

    def __post_init__(self) -> None:
        _check(self.option, "an sbatch option name", _OPTION_NAME)
        if self.value is not None and ("\n" in self.value or "\r" in self.value):
            raise ValueError(f"#SBATCH --{self.option} value must be one line: {self.value!r}")


@dataclass(frozen=True)
class Comment:
    text: str


@dataclass(frozen=True)
class Blank:
    pass


@dataclass(frozen=True)
class Assign:
    """``name=value``."""

    name: str
    value: Word

    def __post_init__(self) -> None:
        _check(self.name)


@dataclass(frozen=True)
class Export(Assign):
    """``export name=value``."""


@dataclass(frozen=True)
class Redirect:
    """``<op><target>``, for example ``2>/dev/null``; ``target`` is a literal path."""

    op: str
    target: str

    def __post_init__(self) -> None:
        if self.op not in REDIRECT_OPS:
            raise ValueError(f"not a redirection operator: {self.op!r}")


@dataclass(frozen=True)
class Run:
    """One simple command with its redirections, in the background when asked."""

    command: Command
    redirects: tuple[Redirect, ...] = ()
    background: bool = False


@dataclass(frozen=True)
class Function:
    """``name() { body }``: a shell function."""

    name: str
    body: tuple[Statement, ...]

    def __post_init__(self) -> None:
        _check(self.name, "a function name")


@dataclass(frozen=True)
class Trap:
    """``trap <body> <signals>`` (an empty body ignores them)."""

    body: tuple[Statement, ...]
    signals: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.signals:
            raise ValueError("a trap needs at least one signal")
        for signal in self.signals:
            _check(signal, "a signal name", _SIGNAL_NAME)


@dataclass(frozen=True)
class ClearEnv:
    """Unset exported variables starting with a prefix, but ``keep`` (MPI/PMI/Slurm
    variables would make a single-process workload think it is in an MPI job)."""

    prefixes: tuple[str, ...]
    keep: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for prefix in self.prefixes:
            _check(prefix, "a variable prefix")
        for name in self.keep:
            _check(name)


@dataclass(frozen=True)
class If:
    """``if <test>; then <body>; else <orelse>; fi`` (no ``else`` when ``orelse`` is empty)."""

    test: Command
    body: tuple[Statement, ...]
    orelse: tuple[Statement, ...] = ()


@dataclass(frozen=True)
class Subshell:
    """``( <body> )``, optionally with its own positional parameters (``set -- args``)."""

    body: tuple[Statement, ...]
    args: tuple[Word, ...] | None = None


@dataclass(frozen=True)
class SrunOption:
    """``--name=value`` on an srun or docker line; ``name`` has its dashes, None is a flag."""

    name: str
    value: Word | None = None


@dataclass(frozen=True)
class Srun:
    """One job step: ``srun <options> <payload>``, in the background when asked."""

    options: tuple[SrunOption, ...]
    payload: Command
    background: bool = False


@dataclass(frozen=True)
class DockerRun:
    """``docker run <options> <image> <payload>``."""

    options: tuple[SrunOption, ...]
    image: Word
    payload: Command


@dataclass(frozen=True)
class Exit:
    status: Word


Statement = (
    Comment | Blank | Export | Assign | Run | Function | Trap | ClearEnv | If | Subshell | Srun
    | DockerRun | Exit
)  # fmt: skip


@dataclass(frozen=True)
class SbatchScript:
    """A whole bash batch script: ``#SBATCH`` directives, then the body."""

    directives: tuple[Directive, ...]
    body: tuple[Statement, ...]
    header: tuple[Comment, ...] = ()


@dataclass(frozen=True)
class ShellScript:
    """A plain script with no directives (for example ``docker_cmd.sh``)."""

    body: tuple[Statement, ...]
