"""The tokenizer against bash itself, plus splitting and splicing."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from scriptbuilder.inputs.shellwords import (
    ShellSyntaxError,
    Token,
    simple_commands,
    split_top_level,
    tokenize,
)

BASH = shutil.which("bash")
SENTINEL = "SENTINEL"


def bash_words(command: str, cwd: Path) -> list[str]:
    """The argv bash builds from ``command`` (globbing off, run in an empty directory)."""
    assert BASH is not None
    script = f"set -f; printf '%s\\0' {SENTINEL} {command}"
    out = subprocess.run(
        [BASH, "--norc", "--noprofile", "-c", script],
        cwd=cwd,
        capture_output=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
    ).stdout
    words = out.decode("utf-8", "surrogateescape").split("\0")
    assert words[0] == SENTINEL and words[-1] == ""
    return words[1:-1]


def words(command: str) -> list[str]:
    return [t.value for t in tokenize(command) if t.kind == "word"]


# Inputs without expansions and without operators: bash's argv is the truth.
BASH_CASES = [
    pytest.param("a b  c", id="plain"),
    pytest.param("'a b' c", id="single-quotes"),
    pytest.param('"a b" c', id="double-quotes"),
    pytest.param("--model='a b'", id="flag-eq-single"),
    pytest.param('--model="a b"', id="flag-eq-double"),
    pytest.param("a'b'\"c\"d", id="adjacent-quotes"),
    pytest.param(r"'it'\''s'", id="escaped-single-quote"),
    pytest.param(r'"say \"hi\""', id="escaped-double-quote"),
    pytest.param(r'"a\b \$x \` \\ \n"', id="dq-backslash-rules"),
    pytest.param(r"a\ b \'c \"d", id="backslash-outside-quotes"),
    pytest.param("a\\", id="backslash-at-end"),
    pytest.param("a \\\n b\\\nc", id="line-continuation"),
    pytest.param('"a\\\nb"', id="dq-line-continuation"),
    pytest.param("'a\\\nb'", id="sq-keeps-backslash-newline"),
    pytest.param("'line1\nline2' \"x\ny\"", id="newline-inside-quotes"),
    pytest.param(r"$'a\nb\tc\\d\'e\"f'", id="ansi-c-basic"),
    pytest.param(r"$'\x41\101\u00e9\e\a\cA\q'", id="ansi-c-more"),
    pytest.param("\"$'a'\"", id="ansi-c-not-in-dq"),
    pytest.param('$"locale"', id="locale-string"),
    pytest.param("'a && b' \"c && d\" e\\&\\&f", id="and-inside-quotes"),
    pytest.param("'a;b|c' \"(x)\" '<y>'", id="ops-inside-quotes"),
    pytest.param("a#b c #comment", id="comment-vs-hash-in-word"),
    pytest.param("a '#b' \"#c\" \\#d", id="quoted-hash"),
    pytest.param("'' \"\" x", id="empty-strings"),
    pytest.param("''", id="only-empty-string"),
    pytest.param("héllo 'wörld ✓' \"日本\"", id="unicode"),
    pytest.param(
        "'tests/test_llm.py::TestLlama::test_tp[tp4-attn_backend=TRTLLM-a b]'",
        id="pytest-id-quoted",
    ),
    pytest.param(
        '"accuracy/test_x.py::T::t[tp2pp2-torch_compile=False]"',
        id="pytest-id-dq",
    ),
    pytest.param("-k 'a and not b' --x=\"1 2\"", id="pytest-k"),
    pytest.param("$ a$ '$b' \"$\"", id="lone-dollars"),
    pytest.param("a\tb", id="tab"),
    pytest.param("a=b 'c=d' --e=f=g", id="equals"),
    pytest.param("{} a{b} ,", id="non-expanding-braces"),
    pytest.param("'\\'", id="backslash-in-single"),
]


@pytest.mark.skipif(BASH is None, reason="bash not installed")
@pytest.mark.parametrize("command", BASH_CASES)
def test_words_match_bash(command: str, tmp_path: Path) -> None:
    assert words(command) == bash_words(command, tmp_path)


@pytest.mark.parametrize("command", BASH_CASES)
def test_literal_words_have_literal_flag(command: str) -> None:
    assert all(t.literal for t in tokenize(command))


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("--model='a b'", ["--model=a b"]),
        ("'it'\\''s'", ["it's"]),
        ("$'a\\nb'", ["a\nb"]),
        ("a\\", ["a\\"]),
        ("''", [""]),
        ("a#b #c", ["a#b"]),
        ("x $(echo 'a && b') y", ["x", "$(echo 'a && b')", "y"]),
        ('x "$(echo ")")" y', ["x", '$(echo ")")', "y"]),
        ("x `echo a b` y", ["x", "`echo a b`", "y"]),
        ("x ${a:-'}'} y", ["x", "${a:-'}'}", "y"]),
        ("x ${a:-{b}} y", ["x", "${a:-{b}}", "y"]),
        ("x $((1 + (2 * 3))) y", ["x", "$((1 + (2 * 3)))", "y"]),
        ("x $(a $(b c) `d`) y", ["x", "$(a $(b c) `d`)", "y"]),
        ("x $(a # ) comment\n) y", ["x", "$(a # ) comment\n)", "y"]),
        ("diff <(a) >(b)", ["diff", "<(a)", ">(b)"]),
        ("pre$HOME/x", ["pre$HOME/x"]),
    ],
)
def test_values(command: str, expected: list[str]) -> None:
    assert words(command) == expected


@pytest.mark.parametrize(
    ("command", "literal"),
    [
        ("plain", True),
        ("'$HOME'", True),
        ("$HOME", False),
        ('"$HOME"', False),
        ('"${x}"', False),
        ("$1", False),
        ("$(date)", False),
        ('"`date`"', False),
        ("$((1+1))", False),
        ("~/x", False),
        ("'~'/x", True),
        ("a~b", True),
        ("A=~/x", False),
        ("A=/a:~/b", False),
        ("--a=~/x", True),
        ("*.py", False),
        ("'*.py'", True),
        ("a?", False),
        ("test[tp4]", False),
        ("'test[tp4]'", True),
        ("a[", True),
        ("{a,b}", False),
        ("{1..3}", False),
        ("'{a,b}'", True),
        ("{}", True),
        ("$'\\n'", True),
        ("$", True),
        ("<(true)", False),
    ],
)
def test_literal_flag(command: str, literal: bool) -> None:
    (token,) = tokenize(command)
    assert token.literal is literal


def test_spans_index_original_text() -> None:
    command = "run --model='a b'  \"x y\" z"
    tokens = tokenize(command)
    assert [command[t.start : t.end] for t in tokens] == [
        "run",
        "--model='a b'",
        '"x y"',
        "z",
    ]


def test_operators() -> None:
    tokens = tokenize("a && b || c; d | e & f ;; (g) < i > j >> k 2>&1 &> l\nm")
    ops = [t.value for t in tokens if t.kind == "op"]
    assert ops == ["&&", "||", ";", "|", "&", ";;", "(", ")", "<", ">", ">>", "2>&", "&>", "\n"]
    assert [t.value for t in tokens if t.kind == "word"] == [
        "a", "b", "c", "d", "e", "f", "g", "i", "j", "k", "1", "l", "m",
    ]  # fmt: skip


def test_operators_need_no_spaces() -> None:
    assert [(t.value, t.kind) for t in tokenize("a&&b;c")] == [
        ("a", "word"),
        ("&&", "op"),
        ("b", "word"),
        (";", "op"),
        ("c", "word"),
    ]


def test_comment_after_operator() -> None:
    assert words("a;#b c\nd") == ["a", "d"]


def test_heredoc_body_is_skipped() -> None:
    command = "cat <<'EOF' && x\nbody && 'unbalanced\nEOF\ny"
    tokens = tokenize(command)
    assert [t.value for t in tokens if t.kind == "word"] == ["cat", "EOF", "x", "y"]
    newline = next(t for t in tokens if t.value == "\n")
    assert command[newline.start : newline.end] == "\nbody && 'unbalanced\nEOF\n"


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("echo 'abc", "unterminated single quote starting at column 6"),
        ('echo "abc', "unterminated double quote starting at column 6"),
        ("a\necho 'x", "unterminated single quote starting at line 2, column 6"),
        ("echo $(a b", "unterminated command substitution '$(' starting at column 6"),
        ("echo $(a ')'", "unterminated command substitution"),
        ("echo `a", "unterminated backquote substitution starting at column 6"),
        ("echo ${a", "unterminated parameter expansion '${' starting at column 6"),
        ("echo $'a", "unterminated $'...' quote starting at column 6"),
        ('echo "$(a"', "unterminated"),
        ("echo <(a", "unterminated process substitution"),
        ('echo "a\\', "unterminated double quote"),
    ],
)
def test_unterminated(command: str, message: str) -> None:
    with pytest.raises(ShellSyntaxError, match=None) as info:
        tokenize(command)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("command", "parts"),
    [
        ("a", ["a"]),
        ("", [""]),
        ("  a b  ", ["a b"]),
        ("a && b", ["a", "b"]),
        ("a&&b", ["a", "b"]),
        ("  a  &&  b c  ", ["a", "b c"]),
        ("a && b && c", ["a", "b", "c"]),
        ("echo 'x && y' && z", ["echo 'x && y'", "z"]),
        ('echo "x && y" && z', ['echo "x && y"', "z"]),
        ("echo x\\&\\&y && z", ["echo x\\&\\&y", "z"]),
        ("echo $(a && b) && z", ["echo $(a && b)", "z"]),
        ("echo `a && b` && z", ["echo `a && b`", "z"]),
        ("echo ${x:-a && b} && z", ["echo ${x:-a && b}", "z"]),
        ("(a && b) && c", ["(a && b)", "c"]),
        ("{ a && b; } && c", ["{ a && b; }", "c"]),
        ("if a && b; then c && d; fi && e", ["if a && b; then c && d; fi", "e"]),
        ("for i in 1; do a && b; done && c", ["for i in 1; do a && b; done", "c"]),
        ("[[ -n x && -n y ]] && c", ["[[ -n x && -n y ]]", "c"]),
        ("a || b && c", ["a || b", "c"]),
        ("a; b && c", ["a; b", "c"]),
        ("a \\\n  && b \\\n  --x 1", ["a", "b \\\n  --x 1"]),
        ("a &&\n  b # trailing comment", ["a", "b"]),
        ("a &&", ["a", ""]),
        ("pytest 'x[a && b]' -k \"c && d\"", ["pytest 'x[a && b]' -k \"c && d\""]),
        ("echo '{' && echo '}'", ["echo '{'", "echo '}'"]),
        ("echo { && echo }", ["echo {", "echo }"]),
    ],
)
def test_split_top_level(command: str, parts: list[str]) -> None:
    assert split_top_level(command) == parts


def test_split_other_operator() -> None:
    assert split_top_level("a; 'b;c' ; d", ";") == ["a", "'b;c'", "d"]


def test_split_rejects_unterminated() -> None:
    with pytest.raises(ShellSyntaxError):
        split_top_level("a && 'b")


def test_token_spans_index_the_command() -> None:
    command = "A='1 2' run  \"$x\"\t--m=a  # c"
    token = tokenize(command)[2]
    assert token == Token('"$x"'[1:-1], 13, 17, "word", False)
    assert command[token.start : token.end] == '"$x"'


def test_simple_commands() -> None:
    tokens = tokenize("A=1 env x --a 2>/dev/null | if y; then time z > out; fi && (w) & { v; }")
    groups = [[t.value for t in group] for group in simple_commands(tokens)]
    assert groups == [["A=1", "env", "x", "--a"], ["y"], ["z"], ["w"], ["v"]]


def test_simple_commands_time_p() -> None:
    groups = simple_commands(tokenize("time -p trtllm-bench -m x; echo -p"))
    assert [[t.value for t in group] for group in groups] == [
        ["trtllm-bench", "-m", "x"],
        ["echo", "-p"],
    ]


def test_simple_commands_keeps_quoted_keywords() -> None:
    groups = simple_commands(tokenize("'if' x"))
    assert [[t.value for t in group] for group in groups] == [["if", "x"]]


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_random_words_match_bash(tmp_path: Path) -> None:
    """Seeded fuzz: random mixes of quoting characters, compared with bash's argv."""

    pieces = ["a", "b", " ", "'", '"', "\\", "\n", "#", "$'", "\\n", "x\\'", "é", "\t", "=", "-"]
    rng = random.Random(20240601)
    compared = 0
    for _ in range(400):
        command = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 10)))
        try:
            tokens = tokenize(command)
        except ShellSyntaxError:
            continue
        if any(t.kind == "op" for t in tokens):
            continue
        assert [t.value for t in tokens] == bash_words(command, tmp_path), repr(command)
        compared += 1
    assert compared > 50
