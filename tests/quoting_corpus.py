"""Command tails with shell characters, and the argv bash gives each one.

What bash does at run time (splitting, substitutions, tildes, globs, comments,
line continuations) and raw control characters in a command line; values
quoted in every style are drawn by the property test
(``tests/test_quoting_property.py``).

A test prefixes a tail with a program name, hands the whole command line to
scriptbuilder, runs the generated script and compares what the program
received with ``argv`` here: the arguments bash itself produces when the same
line is typed at a prompt, in the environment of :data:`CORPUS_ENV`, from a
working directory with no files matching the globs used.
"""

from __future__ import annotations

from typing import NamedTuple

CORPUS_ENV = {"SB_VAR": "v a l", "SB_X": "x", "HOME": "/home/tester"}


class Case(NamedTuple):
    id: str
    tail: str
    argv: list[str]


CORPUS: list[Case] = [
    Case("single-quotes", "-k 'a and not b'", ["-k", "a and not b"]),
    Case("double-quotes", '-k "a and not b"', ["-k", "a and not b"]),
    Case("escaped-single", "'it'\\''s'", ["it's"]),
    Case("var-unquoted-splits", "$SB_VAR", ["v", "a", "l"]),
    Case("var-double-quoted", '"$SB_VAR"', ["v a l"]),
    Case("var-single-quoted", "'$SB_VAR'", ["$SB_VAR"]),
    Case("var-braces", '"${SB_X}y"', ["xy"]),
    Case("command-subst", "$(echo sub)", ["sub"]),
    Case("command-subst-quoted", "\"$(echo 'a  b')\"", ["a  b"]),
    Case("backticks", "`echo tick`", ["tick"]),
    Case("backslash-space", "a\\ b", ["a b"]),
    Case("line-continuation", "a \\\nb", ["a", "b"]),
    Case("and-and-quoted", "'a && b' \"c&&d\"", ["a && b", "c&&d"]),
    Case("glob-unmatched", "nomatch*.zzz", ["nomatch*.zzz"]),
    Case("hash", "'#not-a-comment' a#b", ["#not-a-comment", "a#b"]),
    Case("trailing-comment", "x # a comment", ["x"]),
    Case("percent", "100% '%j %x'", ["100%", "%j %x"]),
    Case("tilde", "~ '~' ~/x", ["/home/tester", "~", "/home/tester/x"]),
    Case("empty-strings", "'' \"\" end", ["", "", "end"]),
    Case("unicode", "'héllo wörld ✓' 日本語", ["héllo wörld ✓", "日本語"]),
    Case("pytest-id-bare", "x.py::test_a[tp2pp2-b=1]", ["x.py::test_a[tp2pp2-b=1]"]),
    Case("ansi-c-quotes", "$'tab\\there'", ["tab\there"]),
    Case("dollar-alone", "$ '$'", ["$", "$"]),
    Case("carriage-return", "'dos line\r' bare\r", ["dos line\r", "bare\r"]),
    Case("escape-sequence", "'\x1b[31mred\x1b[0m' \x1b[1m", ["\x1b[31mred\x1b[0m", "\x1b[1m"]),
    Case(
        "control-characters",
        "'\x01\x07\x08\x0b\x0c\x7f' \x1f",
        ["\x01\x07\x08\x0b\x0c\x7f", "\x1f"],
    ),
    Case("no-positional-parameters", '"$#" "$@" "${1-unset}"', ["0", "unset"]),
    Case(
        "no-variables-of-the-step",
        '"${name-unset}" "${__sb_name-unset}" "${__sb_command-unset}"',
        ["unset", "unset", "unset"],
    ),
]
