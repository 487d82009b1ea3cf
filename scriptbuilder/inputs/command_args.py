"""Read the parallelism and model flags out of ``trtllm-eval`` and ``trtllm-bench`` commands.

Both are click programs (``--flag value`` or ``--flag=value``, the last wins). Nothing is
expanded: a value bash would still expand (``--tp $TP``) cannot be used as a number.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from scriptbuilder.inputs.shellwords import (
    ShellSyntaxError,
    Token,
    simple_commands,
    split_top_level,
    tokenize,
)


class CommandArgError(ValueError):
    """A user command cannot be read, or one of its flags has an unusable value."""


@dataclass(frozen=True)
class FlagValue:
    """The value of one flag and the span of its text in the command; when the flag
    name is quoted with it (``'--model=a b'``) the span is the whole word and a
    replacement must start with ``prefix``."""

    value: str
    start: int
    end: int
    literal: bool
    flag: str = ""
    prefix: str = ""


@dataclass(frozen=True)
class EvalArgs:
    tp_size: int
    pp_size: int
    gpus_per_node: int | None
    model: FlagValue | None


@dataclass(frozen=True)
class BenchArgs:
    """A bench command split at its top-level ``&&`` (spans index the whole command)."""

    prep_cmd: str
    run_cmd: str
    tp: int
    pp: int
    model: FlagValue | None
    model_path: FlagValue | None


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_INTEGER = re.compile(r"\+?[0-9]+")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
# Launchers that run the command that follows them, with the options of
# theirs that take a separate argument.
_WRAPPERS: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "exec": frozenset({"-a"}),
    **dict.fromkeys(("trtllm-llmapi-launch", "nohup", "command", "time"), frozenset()),
}


def flag_value(
    words: Sequence[Token],
    names: tuple[str, ...],
    *,
    command: str | None = None,
    context: str = "command",
) -> FlagValue | None:
    """The value of the last of ``names`` before ``--`` (``-mvalue`` for a short name);
    ``command`` lets a ``--flag=value`` span be narrowed to the value."""
    found: FlagValue | None = None
    i = 0
    while i < len(words):
        word = words[i]
        text = word.value
        if text == "--" and word.literal:
            break
        if text in names:
            if i + 1 >= len(words):
                raise CommandArgError(f"{context}: {text} is missing its value")
            nxt = words[i + 1]
            found = FlagValue(nxt.value, nxt.start, nxt.end, nxt.literal, text)
            i += 2
            continue
        for name in names:
            short = len(name) == 2 and name[1] != "-"
            joined = name if short else name + "="
            if text.startswith(joined) and len(text) > len(name):
                value, n = text[len(joined) :], len(joined)
                if command is not None and command[word.start : word.end].startswith(joined):
                    found = FlagValue(value, word.start + n, word.end, word.literal, name)
                else:
                    found = FlagValue(value, word.start, word.end, word.literal, name, joined)
                break
        i += 1
    return found


def replace_flag_value(command: str, value: FlagValue, new_text: str) -> str:
    """``command`` with the raw ``new_text`` (already shell-quoted) as the flag's value."""
    return command[: value.start] + value.prefix + new_text + command[value.end :]


def _program_index(words: Sequence[Token]) -> int | None:
    """Index of the program word, past assignments and launchers such as ``env``."""
    i = 0
    while i < len(words):
        text = words[i].value
        if _ASSIGNMENT.match(text):
            i += 1
            continue
        name = text.rsplit("/", 1)[-1]
        if name in _WRAPPERS:
            takes_argument = _WRAPPERS[name]
            i += 1
            while i < len(words) and words[i].value.startswith("-"):
                option = words[i].value
                i += 2 if option in takes_argument else 1
                if option == "--":
                    break
            continue
        return i
    return None


def _invocations(tokens: Sequence[Token], program: str) -> list[list[Token]]:
    """The arguments of every simple command that runs ``program``."""
    found: list[list[Token]] = []
    for words in simple_commands(tokens):
        index = _program_index(words)
        if index is not None and words[index].value.rsplit("/", 1)[-1] == program:
            found.append(words[index + 1 :])
    return found


def _int_flag(words: Sequence[Token], names: tuple[str, ...], context: str) -> int | None:
    """The positive integer value of the last of ``names``, or None when absent."""
    found = flag_value(words, names, context=context)
    if found is None:
        return None
    kind = "a positive integer"
    if not found.literal:
        raise CommandArgError(
            f"{context}: {found.flag} must be {kind}, got {found.value!r}; shell expansions "
            f"are not evaluated here, so write the number itself (e.g. {found.flag} 2)"
        )
    text = found.value.strip()
    if not _INTEGER.fullmatch(text) or int(text) < 1:
        raise CommandArgError(
            f"{context}: {found.flag} must be {kind}, got {found.value!r}; "
            f"write it as e.g. {found.flag} 2"
        )
    return int(text)


def _tokens(cmd: str, context: str) -> list[Token]:
    try:
        tokens = tokenize(cmd)
    except ShellSyntaxError as exc:
        raise CommandArgError(f"{context}: {exc}") from exc
    if not any(token.kind == "word" for token in tokens):
        raise CommandArgError(f"{context} is empty; give the full command to run")
    return tokens


def parse_eval_cmd(cmd: str) -> EvalArgs:
    """The parallelism flags and ``--model`` of the last ``trtllm-eval`` (else of any word)."""
    context = "eval_cmd"
    tokens = _tokens(cmd, context)
    invocations = _invocations(tokens, "trtllm-eval")
    words = invocations[-1] if invocations else [t for t in tokens if t.kind == "word"]
    tp = _int_flag(words, ("--tp_size", "--tp"), context)
    pp = _int_flag(words, ("--pp_size", "--pp"), context)
    gpus = _int_flag(words, ("--gpus_per_node",), context)
    model = flag_value(words, ("--model",), command=cmd, context=context)
    return EvalArgs(tp_size=tp or 1, pp_size=pp or 1, gpus_per_node=gpus, model=model)


def split_prepare(cmd: str, context: str, tokens: list[Token] | None = None) -> tuple[str, str]:
    """``cmd`` split at its top-level ``&&`` into prepare and run (``""`` and ``cmd``
    without one)."""
    texts = split_top_level(cmd, "&&", tokens or _tokens(cmd, context))
    if len(texts) > 2:
        raise CommandArgError(
            f"{context}: more than one top-level '&&' ({len(texts) - 1} found); split prepare "
            "and run into at most two commands joined by a single '&&' "
            "(group anything else, e.g. '{ a && b; }', or join with ';')"
        )
    prep, run = ["", *texts][-2:]
    if len(texts) == 2 and not prep:
        raise CommandArgError(f"{context}: nothing before '&&'; give the prepare command")
    if len(texts) == 2 and not run:
        raise CommandArgError(f"{context}: nothing after '&&'; give the benchmark command")
    return prep, run


def parse_bench_cmd(cmd: str) -> BenchArgs:
    """Split ``cmd`` at its top-level ``&&`` into prepare and run; tp/pp from the last
    ``trtllm-bench``, the model flags from the last one that has them (else any word)."""
    context = "bench_cmd"
    tokens = _tokens(cmd, context)
    prep, run = split_prepare(cmd, context, tokens)
    invocations = _invocations(tokens, "trtllm-bench")
    model_names: tuple[str, ...] = ("--model", "-m")
    if not invocations:
        # No trtllm-bench word (python -m ..., a wrapper script): search every
        # word, but not for -m, which would then mostly be python's.
        invocations = [[t for t in tokens if t.kind == "word"]]
        model_names = ("--model",)
    last = invocations[-1]
    tp = _int_flag(last, ("--tp",), context)
    pp = _int_flag(last, ("--pp",), context)

    def last_flag(names: tuple[str, ...]) -> FlagValue | None:
        found = (flag_value(w, names, command=cmd, context=context) for w in invocations[::-1])
        return next((f for f in found if f is not None), None)

    return BenchArgs(
        prep, run, tp or 1, pp or 1, last_flag(model_names), last_flag(("--model_path",))
    )


def model_name_from(model: str) -> str:
    """A job-name-safe name from a model id or path (``qwen2_5_7b``); ``""`` when none is left."""
    last = model.rstrip("/").rsplit("/", 1)[-1]
    return _NON_ALNUM.sub("_", last.lower()).strip("_")


def is_hf_model_id(model: str) -> bool:
    """Whether ``model`` looks like a HuggingFace id (``org/name``) rather than a path."""
    if "/" not in model:
        return False
    return not model.startswith(("/", "./", "../", "~", "$"))
