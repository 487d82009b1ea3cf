"""The syntax tree of a generated shell script.

Every generated file (Slurm batch script, docker command) is built as a tree of
these nodes and turned into text by :mod:`scriptbuilder.script.render` alone. Values
are kept as data until rendering, which quotes each one by construction:

* :class:`Lit` is a literal string, always reaching the shell unchanged.
* :class:`Var` and :class:`Subst` are the only parts that expand at run time.
* :class:`Word` joins parts into one shell word.

Nodes are immutable values (equal and hashable by their fields, like frozen
dataclasses). They are plain slotted classes rather than dataclasses because
the drop-in CLI imports this module on every call and sweeps build thousands
of trees: defining dataclasses costs milliseconds at import (and pulls in
:mod:`inspect`), and their frozen ``__init__`` is slower. Fields are
``Final``: nothing assigns them after ``__init__`` (mypy checks it). The one
slot that changes, ``_memo``, belongs to :mod:`scriptbuilder.script.render`, which
keeps a node's rendered text there so shared nodes are rendered once.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, Final

_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_CHARS = _NAME_START | frozenset("0123456789")
_OPTION_START = frozenset("abcdefghijklmnopqrstuvwxyz")
_OPTION_CHARS = _OPTION_START | frozenset("0123456789-")
_SPECIAL_PARAMS = frozenset(
    {"?", "#", "@", "$", "!", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}
)


def is_shell_name(name: str) -> bool:
    """True when ``name`` can be a shell variable name."""
    return name[:1] in _NAME_START and _NAME_CHARS.issuperset(name)


class Node:
    """Value semantics for the tree nodes: equality, hash and repr from ``_fields``."""

    __slots__ = ("_memo",)
    _fields: ClassVar[tuple[str, ...]] = ()
    #: Owned by :mod:`scriptbuilder.script.render`: this node's rendered text, once computed.
    _memo: Any

    def _values(self) -> tuple[object, ...]:
        return tuple([getattr(self, name) for name in self._fields])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self is other or self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{self.__class__.__name__}({fields})"


class Lit(Node):
    """A literal string; rendering quotes it so the shell sees these exact bytes."""

    __slots__ = ("text",)
    _fields = ("text",)

    def __init__(self, text: str) -> None:
        self.text: Final = text
        self._memo = None


class Var(Node):
    """A variable expanded at run time: ``${name}``, or ``${name:-default}``."""

    __slots__ = ("default", "name")
    _fields = ("name", "default")

    def __init__(self, name: str, default: str | None = None) -> None:
        if not (is_shell_name(name) or name.isdigit() or name in _SPECIAL_PARAMS):
            raise ValueError(f"not a shell variable name: {name!r}")
        self.name: Final = name
        self.default: Final = default
        self._memo = None


class Subst(Node):
    """A command substitution expanded at run time: ``$(command)``."""

    __slots__ = ("command",)
    _fields = ("command",)

    def __init__(self, command: Command) -> None:
        self.command: Final = command
        self._memo = None


class ScriptText(Node):
    """A literal whose text is the rendering of ``body`` (the ``-c`` of ``bash -c``).

    User values never enter the body: they are passed as separate arguments
    and the body refers to them as ``"$1"``, ``"$2"``...
    """

    __slots__ = ("body",)
    _fields = ("body",)

    def __init__(self, body: tuple[Statement, ...]) -> None:
        self.body: Final = body
        self._memo = None


Part = Lit | Var | Subst | ScriptText


class Word(Node):
    """One shell word made of literal and run-time parts."""

    __slots__ = ("parts",)
    _fields = ("parts",)

    def __init__(self, parts: tuple[Part, ...]) -> None:
        self.parts: Final = parts
        self._memo = None

    @staticmethod
    def of(*items: str | Part) -> Word:
        """Build a word; plain strings become :class:`Lit` parts."""
        return Word(tuple([Lit(i) if isinstance(i, str) else i for i in items]))


WordLike = str | Part | Word


def to_word(value: WordLike) -> Word:
    """Coerce a string or part into a :class:`Word`."""
    if isinstance(value, Word):
        return value
    return Word((Lit(value) if isinstance(value, str) else value,))


class Command(Node):
    """A simple command: an argument vector of words."""

    __slots__ = ("argv",)
    _fields = ("argv",)

    def __init__(self, argv: tuple[Word, ...]) -> None:
        if not argv:
            raise ValueError("a command needs at least one word")
        self.argv: Final = argv
        self._memo = None

    @staticmethod
    def of(*args: WordLike) -> Command:
        return Command(tuple([to_word(a) for a in args]))


# ---------------------------------------------------------------- statements


class Shebang(Node):
    __slots__ = ("interpreter",)
    _fields = ("interpreter",)

    def __init__(self, interpreter: str = "/bin/bash") -> None:
        self.interpreter: Final = interpreter
        self._memo = None


class Directive(Node):
    """``#SBATCH --option=value`` (``value`` None gives a bare flag)."""

    __slots__ = ("option", "value")
    _fields = ("option", "value")

    def __init__(self, option: str, value: str | None = None) -> None:
        if not (option[:1] in _OPTION_START and _OPTION_CHARS.issuperset(option)):
            raise ValueError(f"not an sbatch option name: {option!r}")
        if value is not None and ("\n" in value or "\r" in value):
            raise ValueError(f"#SBATCH --{option} value must be one line: {value!r}")
        self.option: Final = option
        self.value: Final = value
        self._memo = None


class Comment(Node):
    __slots__ = ("text",)
    _fields = ("text",)

    def __init__(self, text: str) -> None:
        self.text: Final = text
        self._memo = None


class Blank(Node):
    __slots__ = ()

    def __init__(self) -> None:
        self._memo = None


class Export(Node):
    __slots__ = ("name", "value")
    _fields = ("name", "value")

    def __init__(self, name: str, value: Word) -> None:
        if not is_shell_name(name):
            raise ValueError(f"not a shell variable name: {name!r}")
        self.name: Final = name
        self.value: Final = value
        self._memo = None


class Assign(Node):
    __slots__ = ("name", "value")
    _fields = ("name", "value")

    def __init__(self, name: str, value: Word) -> None:
        if not is_shell_name(name):
            raise ValueError(f"not a shell variable name: {name!r}")
        self.name: Final = name
        self.value: Final = value
        self._memo = None


class Run(Node):
    """Run one simple command."""

    __slots__ = ("command",)
    _fields = ("command",)

    def __init__(self, command: Command) -> None:
        self.command: Final = command
        self._memo = None


class ClearEnv(Node):
    """Unset every exported variable whose name starts with one of ``prefixes``.

    Names in ``keep`` survive. Used to strip MPI/PMI/Slurm variables so a
    single-process workload does not believe it is part of an MPI job.
    """

    __slots__ = ("keep", "prefixes")
    _fields = ("prefixes", "keep")

    def __init__(self, prefixes: tuple[str, ...], keep: tuple[str, ...] = ()) -> None:
        for p in prefixes:
            if not is_shell_name(p):
                raise ValueError(f"not a variable prefix: {p!r}")
        for k in keep:
            if not is_shell_name(k):
                raise ValueError(f"not a shell variable name: {k!r}")
        self.prefixes: Final = prefixes
        self.keep: Final = keep
        self._memo = None


class If(Node):
    """``if <test>; then <body>; fi``."""

    __slots__ = ("body", "test")
    _fields = ("test", "body")

    def __init__(self, test: Command, body: tuple[Statement, ...]) -> None:
        self.test: Final = test
        self.body: Final = body
        self._memo = None


class Subshell(Node):
    """``( <body> )``, optionally with its own positional parameters (``set -- args``)."""

    __slots__ = ("args", "body")
    _fields = ("body", "args")

    def __init__(self, body: tuple[Statement, ...], args: tuple[Word, ...] | None = None) -> None:
        self.body: Final = body
        self.args: Final = args
        self._memo = None


class SrunOption(Node):
    """``--name=value`` on an srun or docker line (``value`` None gives a bare flag).

    ``name`` carries its dashes (``-l``, ``--mpi``).
    """

    __slots__ = ("name", "value")
    _fields = ("name", "value")

    def __init__(self, name: str, value: Word | None = None) -> None:
        self.name: Final = name
        self.value: Final = value
        self._memo = None


class Srun(Node):
    """One job step: ``srun <options> <payload>``."""

    __slots__ = ("options", "payload")
    _fields = ("options", "payload")

    def __init__(self, options: tuple[SrunOption, ...], payload: Command) -> None:
        self.options: Final = options
        self.payload: Final = payload
        self._memo = None


class DockerRun(Node):
    """``docker run <options> <image> <payload>``."""

    __slots__ = ("image", "options", "payload")
    _fields = ("options", "image", "payload")

    def __init__(self, options: tuple[SrunOption, ...], image: Word, payload: Command) -> None:
        self.options: Final = options
        self.image: Final = image
        self.payload: Final = payload
        self._memo = None


class Exit(Node):
    __slots__ = ("status",)
    _fields = ("status",)

    def __init__(self, status: Word) -> None:
        self.status: Final = status
        self._memo = None


Statement = (
    Comment | Blank | Export | Assign | Run | ClearEnv | If | Subshell | Srun | DockerRun | Exit
)

_SHEBANG = Shebang()


class SbatchScript(Node):
    """A whole batch script: shebang, ``#SBATCH`` directives, then the body."""

    __slots__ = ("body", "directives", "header", "shebang")
    _fields = ("directives", "body", "shebang", "header")

    def __init__(
        self,
        directives: tuple[Directive, ...],
        body: tuple[Statement, ...],
        shebang: Shebang = _SHEBANG,
        header: tuple[Comment, ...] = (),
    ) -> None:
        self.directives: Final = directives
        self.body: Final = body
        self.shebang: Final = shebang
        self.header: Final = header
        self._memo = None


class ShellScript(Node):
    """A plain script with no directives (for example ``docker_cmd.sh``)."""

    __slots__ = ("body", "shebang")
    _fields = ("body", "shebang")

    def __init__(self, body: tuple[Statement, ...], shebang: Shebang = _SHEBANG) -> None:
        self.body: Final = body
        self.shebang: Final = shebang
        self._memo = None
