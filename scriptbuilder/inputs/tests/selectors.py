"""The test selectors of a pytest command line, read with the shared shell tokenizer.

When some simple commands run pytest, only they are searched (``| tee log.py`` is no
selector); there every word that is not an option, an option's value or an assignment is
a selector (a word after an unknown option is its value unless it names a ``.py`` file).
Elsewhere only words naming a ``.py`` file count.  ``cd DIR`` moves later selectors."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import ClassVar

from scriptbuilder.inputs.shellwords import ShellSyntaxError, simple_commands, tokenize

_PERF_SANITY_MARKERS = ("perf-sanity", "perf_sanity", "test_perf_sanity.py")

# Options (pytest, python, TensorRT-LLM conftest) whose value is the next word.
_VALUE_OPTIONS = frozenset(
    {
        "-k", "-m", "-p", "-o", "-c", "-W", "-n", "-F", "-S", "-O", "-P", "-R",
        "--timeout", "--timeout-method", "--junitxml", "--junit-xml", "--basetemp",
        "--rootdir", "--confcutdir", "--deselect", "--ignore", "--ignore-glob",
        "--log-file", "--log-level", "--durations", "--maxfail", "--tb", "--reruns",
        "--import-mode", "--override-ini", "--capture", "--dist", "--cov",
        "--cov-report", "--splits", "--group", "--test-list", "--waives-file",
        "--output-dir", "--test-prefix", "--regexp", "--perf-log-formats",
        "--workspace", "--ws", "--test-model-suites", "--periodic-interval",
        "--periodic-batch-size", "--html",
    }
)  # fmt: skip
# Options of pytest (and its common plugins) that take no value.
_FLAG_OPTIONS = frozenset(
    {
        "-v", "-vv", "-vvv", "-q", "-qq", "-s", "-x", "-l", "-r", "-ra", "-rA", "-h",
        "--verbose", "--quiet", "--exitfirst", "--lf", "--ff", "--nf", "--sw",
        "--last-failed", "--failed-first", "--new-first", "--stepwise", "--co",
        "--collect-only", "--showlocals", "--disable-warnings", "--strict-markers",
        "--strict", "--runxfail", "--no-header", "--no-summary", "--setup-show",
        "--cache-clear", "--forked", "--help", "--version", "--full-trace", "--pdb",
        "--continue-on-collection-errors", "--capture=no",
    }
)  # fmt: skip
_FLAG_LETTERS = frozenset("vqsxlrh")
_CWD_PREFIX = re.compile(r"^(?:\$\{?\w+\}?|~)/*")


@dataclass(frozen=True)
class TestId:
    """One pytest selector: ``path[::cls][::func][[case]]`` (``cls`` may be nested:
    ``A::B``), or a folder; ``cwd``: the directory of a preceding ``cd``."""

    __test__: ClassVar[bool] = False  # not a pytest test class

    path: str
    cls: str | None = None
    func: str | None = None
    case: str | None = None
    cwd: str | None = None
    folder: bool = False

    def __str__(self) -> str:
        names = "".join(f"::{name}" for name in (self.cls, self.func) if name)
        return self.path + names + (f"[{self.case}]" if self.case is not None else "")


@dataclass(frozen=True)
class PytestCommand:
    """A test command's selectors, ``-m``/``-k`` expressions, and whether it ``cd``s."""

    ids: list[TestId] = field(default_factory=list)
    mark_exprs: list[str] = field(default_factory=list)
    has_cd: bool = False
    keyword_exprs: list[str] = field(default_factory=list)


def is_perf_sanity(test_cmd: str) -> bool:
    return any(marker in test_cmd for marker in _PERF_SANITY_MARKERS)


def _parse_selector(word: str, cwd: str | None, folders: bool) -> TestId | None:
    head, _, rest = word.partition("::")
    if "=" in head or "[" in head or not head:
        return None
    if not head.endswith(".py"):
        folder = folders and not rest  # a folder only as pytest's own argument
        return TestId(posixpath.normpath(head), cwd=cwd, folder=True) if folder else None
    rest, bracket, case_text = rest.partition("[")
    case = case_text.removesuffix("]") if bracket else None
    names = [name for name in rest.split("::") if name]
    cls, func = "::".join(names[:-1]) or None, names[-1] if names else None
    if len(names) == 1 and case is None and names[0][:1].isupper():
        cls, func = names[0], None  # a lone capitalised name is a class
    return TestId(posixpath.normpath(head), cls, func, case, cwd)


def _is_pytest_word(word: str) -> bool:
    return word.rpartition("/")[2] in ("pytest", "py.test")  # the basename


def parse_command(test_cmd: str) -> PytestCommand:
    """The selectors of a test command, in order and without duplicates (see the module doc)."""
    try:
        tokens = tokenize(test_cmd)
    except ShellSyntaxError:
        return PytestCommand()
    groups = [[t.value for t in group] for group in simple_commands(tokens)]
    runs_pytest = [any(_is_pytest_word(w) for w in words) for words in groups]
    found: list[TestId] = []
    mark_exprs: list[str] = []
    keyword_exprs: list[str] = []
    cwd: str | None = None
    has_cd = False
    for words, is_pytest in zip(groups, runs_pytest, strict=True):
        if words[0] == "cd":
            has_cd = True
            new = words[1] if len(words) > 1 else ""
            if not posixpath.isabs(new):
                new = _CWD_PREFIX.sub("", new)  # "$LLM_ROOT/tests/x" -> "tests/x"
            cwd = posixpath.normpath(posixpath.join(cwd or "", new)) if new else cwd
            continue
        if any(runs_pytest) and not is_pytest:
            continue
        after_pytest = False  # past the pytest word: the words are pytest's arguments
        pending: str | None = None  # an option waiting for its value
        for word in words:
            option, pending = pending, None
            if option is not None and (
                option in _VALUE_OPTIONS or not word.partition("::")[0].endswith(".py")
            ):
                if option in ("-m", "-k") and after_pytest:
                    (mark_exprs if option == "-m" else keyword_exprs).append(word)
                after_pytest = after_pytest or _is_pytest_word(word)
                continue
            if _is_pytest_word(word) and not after_pytest:
                after_pytest = True
                continue
            if word.startswith("-") and word != "-":
                if after_pytest and word[:2] in ("-m", "-k") and len(word) > 2:
                    (mark_exprs if word[1] == "m" else keyword_exprs).append(word[2:])
                elif _takes_value(word, after_pytest):
                    pending = word
                continue
            tid = _parse_selector(word, cwd, folders=after_pytest)
            if tid is not None and tid not in found:
                found.append(tid)
    return PytestCommand(found, mark_exprs, has_cd, keyword_exprs)


def _takes_value(option: str, of_pytest: bool) -> bool:
    """Whether the word after ``option`` is its value (unknown pytest options: maybe)."""
    if option in _VALUE_OPTIONS:
        return True
    if option in _FLAG_OPTIONS or "=" in option or not of_pytest:
        return False
    return option.startswith("--") or not set(option[1:]) <= _FLAG_LETTERS


def parse_test_ids(test_cmd: str) -> list[TestId]:
    """The selectors of ``test_cmd`` (see :func:`parse_command`)."""
    return parse_command(test_cmd).ids
