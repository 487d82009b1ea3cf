"""The one place where script text is produced: tree in, text out.

Quoting by construction: a literal word is bare when every character is safe, else single-quoted; a
word with run-time parts is double-quoted, its literals escaped; ``#SBATCH`` values bare or
double-quoted as sbatch's parser reads them. A character sbatch, bash, shellcheck or a line-based
reader would treat specially (control characters, DEL, U+2028/9, the unicode quotes shellcheck warns
about) is written in ``$'...'`` as ``\\xHH`` escapes of its UTF-8 bytes (never locale-dependent
``\\u``); a surrogateescape byte (U+DC80..U+DCFF) as that byte.
"""

from __future__ import annotations

import re

from scriptbuilder.script.tree import (
    Assign,
    Blank,
    ClearEnv,
    Command,
    Comment,
    Difference,
    Directive,
    DockerRun,
    Exit,
    Export,
    Function,
    If,
    Lit,
    Part,
    Run,
    SbatchScript,
    ScriptText,
    ShellScript,
    Srun,
    SrunOption,
    Statement,
    Subshell,
    Subst,
    Trap,
    Var,
    Word,
)

_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_SAFE_DIRECTIVE = re.compile(r"[A-Za-z0-9_@%+=:,./()\[\]*-]+")
#: Words the shell reads as syntax in command position.
RESERVED = frozenset(
    ["if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until",
     "do", "done", "in", "function", "time", "{", "}", "!", "[[", "]]"]
)  # fmt: skip
_INDENT = "  "
#: Never written raw in any quoting context (see the module docstring), surrogates included.
_CONTROL = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff"
#: Special in single quotes: the unicode quotes shellcheck warns about there (SC1112).
_SQ_SPECIAL = re.compile(f"[{_CONTROL}\u2018\u2019]")
#: Special in double quotes: the unicode quotes shellcheck warns about there (SC1111).
_DQ_SPECIAL = re.compile(f"[{_CONTROL}\u201c\u201d\u2033\u2036]")
#: What a one-line display of shell text may not hold raw.
_LINE_SPECIAL = re.compile(f"[{_CONTROL}\u2018\u2019\n]")
_NAMED_ESCAPES = {"\a": "\\a", "\b": "\\b", "\x1b": "\\E", "\f": "\\f", "\r": "\\r", "\v": "\\v"}


def _escape_char(char: str) -> str:
    named = _NAMED_ESCAPES.get(char)
    if named is not None:
        return named
    if "\udc80" <= char <= "\udcff":  # a byte kept by surrogateescape
        return f"\\x{ord(char) - 0xDC00:02x}"
    if "\ud800" <= char <= "\udfff":
        raise ValueError(f"a lone surrogate {char!r} cannot be written to a script")
    if char == "\0":
        raise ValueError("a NUL character cannot reach a program through the shell")
    return "".join(f"\\x{byte:02x}" for byte in char.encode("utf-8"))


def _ansi_c(text: str, special: re.Pattern[str]) -> str:
    """``text`` as one ``$'...'`` word, the characters ``special`` matches as escapes."""
    out = ("\\" + c if c in "\\'" else _escape_char(c) if special.match(c) else c for c in text)
    return "$'" + "".join(out) + "'"


def _single_quoted(text: str) -> str:
    """``text`` in single quotes, or ANSI-C quoted when it holds a special character."""
    if _SQ_SPECIAL.search(text):
        return _ansi_c(text, _SQ_SPECIAL)
    return "'" + text.replace("'", "'\\''") + "'"


def quote_literal(text: str) -> str:
    """Quote ``text`` so the shell reads it back unchanged as one word."""
    return text if _SAFE.fullmatch(text) or text in ("[", "]") else _single_quoted(text)


def one_line_command(text: str) -> str:
    """``text`` as one line that runs the same pasted into bash (else ``eval $'...'``)."""
    return text if _LINE_SPECIAL.search(text) is None else "eval " + _ansi_c(text, _LINE_SPECIAL)


def _dq_escape(text: str) -> str:
    """``text`` escaped for double quotes; a special character gets an ANSI-C part."""
    special = _DQ_SPECIAL.search(text)
    if special is not None:
        at = special.start()
        quoted = '"' + _ansi_c(text[at], _DQ_SPECIAL) + '"'
        return _dq_escape(text[:at]) + quoted + _dq_escape(text[at + 1 :])
    for char in '\\"$`':
        text = text.replace(char, "\\" + char)
    return text


def _render_var(var: Var) -> str:
    if var.joiner is not None:
        if _DQ_SPECIAL.search(var.joiner):
            raise ValueError(f"a variable joiner must be plain text: {var.joiner!r}")
        return "${" + var.name + ":+" + _dq_escape(var.joiner) + "${" + var.name + "}}"
    if var.default is None:
        short = len(var.name) == 1 and not var.name.isalpha()
        return "$" + var.name if short else "${" + var.name + "}"
    if _DQ_SPECIAL.search(var.default):
        raise ValueError(f"a variable default must be plain text: {var.default!r}")
    return "${" + var.name + ":-" + _dq_escape(var.default) + "}"


def _literal_text(parts: tuple[Part, ...]) -> str | None:
    """The text of a word made only of literal parts; None when a part expands."""
    out = []
    for part in parts:
        if isinstance(part, Lit):
            out.append(part.text)
        elif isinstance(part, ScriptText):
            out.append(render_inline(part.body))
        else:
            return None
    return "".join(out)


def _expanding_text(parts: tuple[Part, ...]) -> str:
    """The inside of the double quotes of a word with run-time parts."""
    out = []
    for part in parts:
        if isinstance(part, Lit):
            out.append(_dq_escape(part.text))
        elif isinstance(part, ScriptText):
            out.append(_dq_escape(render_inline(part.body)))
        elif isinstance(part, Difference):
            terms = [
                _expansion(t) if not isinstance(t, int) else str(t)
                for t in (part.first, *part.rest)
            ]
            out.append("$((" + " - ".join(terms) + "))")
        else:
            out.append(_expansion(part))
    return "".join(out)


def _expansion(part: Var | Subst) -> str:
    if isinstance(part, Var):
        return _render_var(part)
    return "$(" + render_command(part.command) + ")"


def render_word(word: Word) -> str:
    """One word: bare or single-quoted when literal, else double-quoted."""
    text = _literal_text(word.parts)
    if text is not None:
        return quote_literal(text)
    if word.parts == (Var("?"),):  # a number, never split
        return "$?"
    return '"' + _expanding_text(word.parts) + '"'


def render_command(command: Command) -> str:
    """The words of ``command``, quoting a first word bash would read as syntax."""
    first, *rest = command.argv
    text = _literal_text(first.parts)
    if text is None:
        name = render_word(first)
    elif "=" in text or text in RESERVED or text.startswith("%"):
        name = _single_quoted(text)
    else:
        name = quote_literal(text)
    return " ".join([name, *map(render_word, rest)])


def render_option(option: SrunOption) -> str:
    """``name=value`` as one word (``name`` alone for a flag)."""
    if option.value is None:
        return quote_literal(option.name)
    return render_word(Word((Lit(option.name + "="), *option.value.parts)))


def render_directive(directive: Directive) -> str:
    head = f"#SBATCH --{directive.option}"
    value = directive.value
    if value is None:
        return head
    if not _SAFE_DIRECTIVE.fullmatch(value):
        value = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{head}={value}"


def _launch_words(node: Srun | DockerRun) -> tuple[str, list[str]]:
    """The program and its rendered arguments, one option per entry."""
    options = [render_option(o) for o in node.options]
    if isinstance(node, Srun):
        return "srun", [*options, render_command(node.payload)]
    return "docker run", [*options, render_word(node.image), render_command(node.payload)]


def _launch(node: Srun | DockerRun) -> list[str]:
    """``head \\`` and one indented continuation line per word."""
    head, words = _launch_words(node)
    lines = [head + " \\", *(_INDENT + word + " \\" for word in words)]
    lines[-1] = lines[-1].removesuffix(" \\")
    if isinstance(node, Srun) and node.background:
        lines[-1] += " &"
    return lines


def _indented(body: tuple[Statement, ...]) -> list[str]:
    return [_INDENT + line for child in body for line in _statement_lines(child)]


def _statement_lines(node: Statement) -> list[str]:
    """The lines of a statement at block level."""
    if isinstance(node, Comment):
        return ["# " + line if line else "#" for line in node.text.split("\n")]
    if isinstance(node, Blank):
        return [""]
    if isinstance(node, Assign):
        export = "export " if isinstance(node, Export) else ""
        return [f"{export}{node.name}={render_word(node.value)}"]
    if isinstance(node, Run):
        words = [render_command(node.command)]
        words += [r.op + quote_literal(r.target) for r in node.redirects]
        return [" ".join([*words, "&"] if node.background else words)]
    if isinstance(node, Function):
        return [f"{node.name}() {{", *_indented(node.body), "}"]
    if isinstance(node, Trap):
        return [" ".join(["trap", quote_literal(render_inline(node.body)), *node.signals])]
    if isinstance(node, ClearEnv):
        keep = "|".join(node.keep)
        drop = "|".join(p + "*" for p in node.prefixes)
        case = (
            f'case "${{__sb_name}}" in {keep + ") ;; " if keep else ""}{drop}) '
            'unset "${__sb_name}" ;; esac'
        )
        # The loop variable is the script's own: unset, the command sees no trace of it.
        return [f"for __sb_name in $(compgen -e); do {case}; done; unset -v __sb_name"]
    if isinstance(node, If):
        orelse = ["else", *_indented(node.orelse)] if node.orelse else []
        return [f"if {render_command(node.test)}; then", *_indented(node.body), *orelse, "fi"]
    if isinstance(node, Srun | DockerRun):
        return _launch(node)
    if isinstance(node, Exit):
        return [f"exit {render_word(node.status)}"]
    if isinstance(node, Subshell):
        return _inline_lines(node)
    raise TypeError(f"not a statement node: {node!r}")


def _joined(lines: list[str]) -> str:
    """Lines as one line: ``;`` between them, a space after a background ``&``."""
    out = lines[0] if lines else ""
    for line in lines[1:]:
        out += (" " if out.endswith("&") else "; ") + line
    return out


def _inline(body: tuple[Statement, ...]) -> str:
    return _joined([line for child in body for line in _inline_lines(child)])


def _inline_lines(node: Statement) -> list[str]:
    if isinstance(node, If):
        orelse = f"; else {_inline(node.orelse)}" if node.orelse else ""
        return [f"if {render_command(node.test)}; then {_inline(node.body)}{orelse}; fi"]
    if isinstance(node, Subshell):
        inner = [line for child in node.body for line in _inline_lines(child)]
        if node.args is not None:
            inner.insert(0, " ".join(["set --", *map(render_word, node.args)]))
        return ["(" + _joined(inner) + ")"]
    if isinstance(node, Function):
        return [f"{node.name}() {{ {_inline(node.body)}; }}"]
    return _statement_lines(node)


def render_inline(body: tuple[Statement, ...]) -> str:
    """Statements as the text of a ``bash -c`` argument: one line unless a comment needs more."""
    lines = [line for node in body for line in _inline_lines(node)]
    if any(isinstance(node, Comment) for node in body):
        return "\n".join(lines)
    return _joined(lines)


def render(script: SbatchScript | ShellScript) -> str:
    """Render a whole script to text ending in a newline."""
    lines = ["#!/bin/bash"]
    if isinstance(script, SbatchScript):
        lines += [render_directive(d) for d in script.directives]
        lines += [line for comment in script.header for line in _statement_lines(comment)]
    lines += [line for node in script.body for line in _statement_lines(node)]
    return "\n".join(lines) + "\n"


def render_one_line(node: Srun | DockerRun) -> str:
    """A launch statement on a single logical line (for ``job_spec.json``)."""
    head, words = _launch_words(node)
    return " ".join([head, *words])
