"""Command tails with shell characters, and the argv bash gives each one.

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
    Case("apostrophe-in-double", '-k "it\'s"', ["-k", "it's"]),
    Case("double-in-single", "'say \"hi\"'", ['say "hi"']),
    Case("escaped-single", "'it'\\''s'", ["it's"]),
    Case("var-unquoted-splits", "$SB_VAR", ["v", "a", "l"]),
    Case("var-double-quoted", '"$SB_VAR"', ["v a l"]),
    Case("var-single-quoted", "'$SB_VAR'", ["$SB_VAR"]),
    Case("var-braces", '"${SB_X}y"', ["xy"]),
    Case("var-escaped", '"\\$SB_VAR"', ["$SB_VAR"]),
    Case("command-subst", "$(echo sub)", ["sub"]),
    Case("command-subst-quoted", "\"$(echo 'a  b')\"", ["a  b"]),
    Case("command-subst-literal", "'$(echo sub)'", ["$(echo sub)"]),
    Case("backticks", "`echo tick`", ["tick"]),
    Case("backticks-literal", "'`echo tick`'", ["`echo tick`"]),
    Case("backslash-space", "a\\ b", ["a b"]),
    Case("backslash-in-single", "'a\\b'", ["a\\b"]),
    Case("backslash-in-double", '"a\\\\b"', ["a\\b"]),
    Case("trailing-backslash-single", "'ends\\'", ["ends\\"]),
    Case("trailing-backslash-double", '"ends\\\\"', ["ends\\"]),
    Case("newline-in-quotes", "'line1\nline2'", ["line1\nline2"]),
    Case("line-continuation", "a \\\nb", ["a", "b"]),
    Case("semicolon-quoted", "';' \"a;b\"", [";", "a;b"]),
    Case("and-and-quoted", "'a && b' \"c&&d\"", ["a && b", "c&&d"]),
    Case("pipe-quoted", '"x | y"', ["x | y"]),
    Case("glob-quoted", "'*.py'", ["*.py"]),
    Case("glob-unmatched", "nomatch*.zzz", ["nomatch*.zzz"]),
    Case("hash", "'#not-a-comment' a#b", ["#not-a-comment", "a#b"]),
    Case("trailing-comment", "x # a comment", ["x"]),
    Case("percent", "100% '%j %x'", ["100%", "%j %x"]),
    Case("bang", "'!bang' \"hello!\"", ["!bang", "hello!"]),
    Case("tilde", "~ '~' ~/x", ["/home/tester", "~", "/home/tester/x"]),
    Case("empty-strings", "'' \"\" end", ["", "", "end"]),
    Case("unicode", "'héllo wörld ✓' 日本語", ["héllo wörld ✓", "日本語"]),
    Case(
        "pytest-id-quoted",
        "'accuracy/test_x.py::TestA::test_b[tp4-attn_backend=TRTLLM]'",
        ["accuracy/test_x.py::TestA::test_b[tp4-attn_backend=TRTLLM]"],
    ),
    Case("pytest-id-bare", "x.py::test_a[tp2pp2-b=1]", ["x.py::test_a[tp2pp2-b=1]"]),
    Case("ansi-c-quotes", "$'tab\\there'", ["tab\there"]),
    Case("parens-quoted", '-k "not (a or b)"', ["-k", "not (a or b)"]),
    Case("option-equals", '--opt="a b" --n=3', ["--opt=a b", "--n=3"]),
    Case("tab-in-quotes", "'a\tb'", ["a\tb"]),
    Case("redirect-quoted", "'>' '<in'", [">", "<in"]),
    Case("dollar-alone", "$ '$'", ["$", "$"]),
    Case("carriage-return", "'dos line\r' bare\r", ["dos line\r", "bare\r"]),
    Case("escape-sequence", "'\x1b[31mred\x1b[0m' \x1b[1m", ["\x1b[31mred\x1b[0m", "\x1b[1m"]),
    Case(
        "control-characters",
        "'\x01\x07\x08\x0b\x0c\x7f' \x1f",
        ["\x01\x07\x08\x0b\x0c\x7f", "\x1f"],
    ),
    Case("c1-and-separators", "'\x85\x9b\u2028\u2029'", ["\x85\x9b\u2028\u2029"]),
    Case(
        "unicode-quotes",
        "'\u2018single\u2019' \"\u201cdouble\u201d \u2033\u2036\"",
        ["\u2018single\u2019", "\u201cdouble\u201d \u2033\u2036"],
    ),
    Case("no-positional-parameters", '"$#" "$@" "${1-unset}"', ["0", "unset"]),
    Case(
        "no-variables-of-the-step",
        '"${name-unset}" "${__sb_name-unset}" "${__sb_command-unset}"',
        ["unset", "unset", "unset"],
    ),
]
