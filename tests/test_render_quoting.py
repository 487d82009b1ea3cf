"""The renderer never writes a byte that sbatch, bash or shellcheck treat specially.

Carriage returns, escape sequences and other control characters, unicode line
separators and the unicode quotes shellcheck warns about are written with
ANSI-C quoting; bash still reads each value back byte for byte.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from scriptbuilder.inputs.command_check import MAX_ARG_BYTES
from scriptbuilder.script.render import quote_literal, render
from scriptbuilder.script.tree import Command, Run, ShellScript, Var, Word
from scriptbuilder.workflows.base import command_args

SPECIAL = [
    "\r",
    "\x1b",
    "\x01",
    "\x07",
    "\x08",
    "\x0b",
    "\x0c",
    "\x1f",
    "\x7f",
    "\x85",
    "\x9b",
    "\u2028",
    "\u2029",
]


def _script(*words: Word) -> str:
    return render(
        ShellScript(
            (
                Run(Command((Word.of("printf"), Word.of("%s\\0"), *words))),
                Run(Command.of("echo", Word.of("end"))),
            )
        )
    )


def _bash_argv(text: str, tmp_path: Path, env: dict[str, str] | None = None) -> list[bytes]:
    path = tmp_path / "s.sh"
    path.write_bytes(text.encode("utf-8"))
    done = subprocess.run(
        ["bash", str(path)],
        capture_output=True,
        check=True,
        env={"PATH": os.environ["PATH"], "LANG": "C", **(env or {})},
    )
    assert done.stdout.endswith(b"end\n")
    return done.stdout[: -len(b"end\n")].split(b"\0")[:-1]


@pytest.mark.parametrize("char", SPECIAL)
def test_every_special_character_is_escaped(char: str, tmp_path: Path) -> None:
    quoted = quote_literal(f"a{char}b")
    assert quoted.startswith("$'") and char not in quoted
    expanding = Word.of(f"a{char}'", Var("SB_X"), '"$`\\')
    text = _script(Word.of(f"a{char}b"), expanding)
    assert char not in text
    assert _bash_argv(text, tmp_path, {"SB_X": "<x>"}) == [
        f"a{char}b".encode(),
        f"a{char}'<x>\"$`\\".encode(),
    ]


def test_command_name_position_is_escaped_too(tmp_path: Path) -> None:
    text = render(ShellScript((Run(Command.of("x=\r", "a")),)))
    assert "\r" not in text and "$'x=\\r'" in text


def test_surrogate_escaped_bytes_are_written_as_the_bytes(tmp_path: Path) -> None:
    raw = b"caf\xe9 \xff"
    value = raw.decode("utf-8", "surrogateescape")
    text = _script(Word.of(value))
    text.encode("utf-8")  # strict: no lone surrogate left in the text
    assert _bash_argv(text, tmp_path) == [raw]


def test_nul_and_other_lone_surrogates_are_refused() -> None:
    with pytest.raises(ValueError, match="NUL"):
        quote_literal("a\0b")
    with pytest.raises(ValueError, match="surrogate"):
        quote_literal("a\ud800b")


def test_plain_values_keep_their_usual_form() -> None:
    assert quote_literal("plain") == "plain"
    assert quote_literal("a b") == "'a b'"
    assert quote_literal("it's") == "'it'\\''s'"
    assert quote_literal("\u201cdouble\u201d in single quotes") == (
        "'\u201cdouble\u201d in single quotes'"
    )


def test_long_commands_travel_in_pieces_joined_again() -> None:
    command = "echo " + "é" * 100_000 + " " + "x" * 300_000
    pieces = command_args(command)
    assert len(pieces) > 1
    assert "".join(pieces) == command
    assert all(len(p.encode("utf-8")) <= MAX_ARG_BYTES for p in pieces)
    assert command_args("short") == ("short",)
