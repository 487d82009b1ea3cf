"""The one place where script text is produced: tree in, text out.

Quoting rules, applied by construction:

* a word made only of literal parts is left bare when every character is
  safe, otherwise single-quoted (``'`` becomes ``'\\''``);
* a word with run-time parts is double-quoted, literal parts escaped for that
  context (``\\``, ``"``, ``$`` and backtick);
* ``#SBATCH`` values are written in the form sbatch's own directive parser
  reads: bare when safe, otherwise in double quotes with ``\\`` and ``"``
  escaped by a backslash.
* a character that sbatch, bash, shellcheck or a line-based reader would treat
  specially is never written raw: C0 and C1 control characters other than tab
  and newline (carriage return, escape...), DEL, the unicode line and
  paragraph separators, and the unicode quotes shellcheck warns about in that
  quoting context. A word holding one is written with ANSI-C quoting
  (``$'...'``), such characters as ``\\xHH`` escapes of their UTF-8 bytes (never
  ``\\u``, which depends on the locale at run time), so the program still
  receives the value byte for byte. A lone surrogate from a command line read
  with ``surrogateescape`` (U+DC80..U+DCFF) is written as the byte it stands for.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

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
    Redirect,
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

if TYPE_CHECKING:
    from scriptbuilder.script.tree import Part

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
#: Characters of a word left bare (as ``[A-Za-z0-9_@%+=:,./-]``).
_SAFE = frozenset(_ALNUM + "_@%+=:,./-")
#: Characters of an ``#SBATCH`` value left bare.
_SAFE_DIRECTIVE = _SAFE | frozenset("()[]*")
_RESERVED = frozenset(
    [
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "case",
        "esac",
        "for",
        "select",
        "while",
        "until",
        "do",
        "done",
        "in",
        "function",
        "time",
        "{",
        "}",
        "!",
        "[[",
        "]]",
    ]
)
_INDENT = "  "


#: Never written raw in any quoting context (see the module docstring).
_CONTROL = frozenset(
    [chr(c) for c in range(0x20) if chr(c) not in "\t\n"]
    + [chr(c) for c in range(0x7F, 0xA0)]
    + ["\u2028", "\u2029"]
)
#: Unicode quotes shellcheck warns about inside single quotes (SC1112).
_SQ_SPECIAL = _CONTROL | frozenset("\u2018\u2019")
#: Unicode quotes shellcheck warns about inside double quotes (SC1111).
_DQ_SPECIAL = _CONTROL | frozenset("\u201c\u201d\u2033\u2036")
#: What a one-line display of shell text may not hold raw.
_LINE_SPECIAL = _SQ_SPECIAL | frozenset("\n")
_NAMED_ESCAPES = {"\a": "\\a", "\b": "\\b", "\x1b": "\\E", "\f": "\\f", "\r": "\\r", "\v": "\\v"}


def _finder(special: frozenset[str]) -> re.Pattern[str]:
    """A pattern matching one character of ``special`` or a surrogate."""
    return re.compile("[" + "".join(sorted(map(re.escape, special))) + "\ud800-\udfff]")


#: Every set of special characters this module checks text against, as a pattern.
_FINDERS = {s: _finder(s) for s in (_SQ_SPECIAL, _DQ_SPECIAL, _LINE_SPECIAL)}


def _plain(text: str, special: frozenset[str]) -> bool:
    """True when ``text`` holds no character of ``special`` and no surrogate."""
    if text.isprintable():
        # Printable text has no control character and no surrogate; only the
        # unicode quotes remain to look for.
        return text.isascii() or special.isdisjoint(text)
    return _FINDERS[special].search(text) is None


def _is_special(char: str, special: frozenset[str]) -> bool:
    return char in special or "\ud800" <= char <= "\udfff"


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


def _ansi_c(text: str, special: frozenset[str]) -> str:
    """``text`` as one ANSI-C quoted word: ``$'...'``, with ``\\`` and ``'``
    escaped and the characters of ``special`` (and surrogates) as escapes."""
    out = []
    for char in text:
        if char == "\\" or char == "'":
            out.append("\\" + char)
        elif _is_special(char, special):
            out.append(_escape_char(char))
        else:
            out.append(char)
    return "$'" + "".join(out) + "'"


def _single_quoted(text: str) -> str:
    """``text`` in single quotes, or ANSI-C quoted when it holds a special character."""
    if not _plain(text, _SQ_SPECIAL):
        return _ansi_c(text, _SQ_SPECIAL)
    return "'" + text.replace("'", "'\\''") + "'"


def quote_literal(text: str) -> str:
    """Quote ``text`` so the shell reads it back unchanged as one word."""
    if text and (_SAFE.issuperset(text) or text in ("[", "]")):
        return text
    return _single_quoted(text)


def one_line_command(text: str) -> str:
    """Shell text ``text`` as one line that runs the same when pasted into bash:
    as written when it is one plain line, else ``eval $'...'``."""
    if _plain(text, _LINE_SPECIAL):
        return text
    return "eval " + _ansi_c(text, _LINE_SPECIAL)


def _dq_escape(text: str) -> str:
    """Escape ``\\``, ``"``, ``$`` and backtick for a double-quoted context; a
    special character closes the double quotes for an ANSI-C quoted part."""
    if not _plain(text, _DQ_SPECIAL):
        out = []
        start = 0
        for index, char in enumerate(text):
            if _is_special(char, _DQ_SPECIAL):
                out.append(_dq_escape(text[start:index]))
                out.append('"' + _ansi_c(char, _DQ_SPECIAL) + '"')
                start = index + 1
        out.append(_dq_escape(text[start:]))
        return "".join(out)
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    if '"' in text:
        text = text.replace('"', '\\"')
    if "$" in text:
        text = text.replace("$", "\\$")
    if "`" in text:
        text = text.replace("`", "\\`")
    return text


def _render_var(var: Var) -> str:
    if var.default is None:
        return (
            "$" + var.name
            if len(var.name) == 1 and not var.name.isalpha()
            else "${" + var.name + "}"
        )
    if not _plain(var.default, _DQ_SPECIAL):
        raise ValueError(f"a variable default must be plain text: {var.default!r}")
    return "${" + var.name + ":-" + _dq_escape(var.default) + "}"


def _arith_term(term: Var | Subst | int) -> str:
    if isinstance(term, int):
        return str(term)
    if isinstance(term, Var):
        return _render_var(term)
    return "$(" + render_command(term.command) + ")"


def _script_text(part: ScriptText) -> str:
    return render_inline(part.body)


# Word parts are matched by exact type (``type(part) is Lit``): the part classes of
# :mod:`scriptbuilder.script.tree` have no subclasses, and the test is cheaper than
# ``isinstance`` on the path every word of every script takes.


def _literal_text(parts: tuple[Part, ...]) -> str | None:
    """The text of a word made only of literal parts; None when a part expands."""
    out = []
    for part in parts:
        if type(part) is Lit:
            out.append(part.text)
        elif type(part) is ScriptText:
            out.append(_script_text(part))
        else:
            return None
    return out[0] if len(out) == 1 else "".join(out)


def _command_name(word: Word) -> str:
    """The first word of a command: text the shell would read as an assignment,
    reserved word or job spec in command position is quoted."""
    text = _literal_text(word.parts)
    if text is None:
        return _word_text(word)
    if "=" in text or text in _RESERVED or text.startswith("%"):
        return _single_quoted(text)
    return quote_literal(text)


def render_word(word: Word, *, command_name: bool = False) -> str:
    """Render one word. ``command_name`` forces quoting of text the shell would
    read as an assignment, reserved word or job spec in command position."""
    return _command_name(word) if command_name else _word_text(word)


def _word_text(word: Word) -> str:
    parts = word.parts
    if len(parts) == 1:
        only = parts[0]
        if type(only) is Lit:  # the usual word: one literal, often safe as it is
            return (
                only.text if only.text and _SAFE.issuperset(only.text) else quote_literal(only.text)
            )
        if type(only) is Var:
            return "$?" if only.name == "?" and only.default is None else f'"{_render_var(only)}"'
    text = _literal_text(parts)
    if text is not None:
        return quote_literal(text)
    return '"' + _expanding_text(parts) + '"'


def _expanding_text(parts: tuple[Part, ...]) -> str:
    """The inside of the double quotes of a word with run-time parts."""
    out = []
    for part in parts:
        if type(part) is Lit:
            out.append(_dq_escape(part.text))
        elif type(part) is Var:
            out.append(_render_var(part))
        elif type(part) is Subst:
            out.append("$(" + render_command(part.command) + ")")
        elif type(part) is ScriptText:
            out.append(_dq_escape(_script_text(part)))
        elif type(part) is Difference:
            terms = [_arith_term(t) for t in (part.first, *part.rest)]
            out.append("$((" + " - ".join(terms) + "))")
    return "".join(out)


def render_command(command: Command) -> str:
    argv = command.argv
    words = [_command_name(argv[0])]
    words += map(_word_text, argv[1:])
    return " ".join(words)


def render_option(option: SrunOption) -> str:
    """``name=value`` as one word (``name`` alone for a flag)."""
    name, value = option.name, option.value
    if value is None:
        return quote_literal(name)
    text = _literal_text(value.parts)
    if text is not None:
        return quote_literal(name + "=" + text)
    return '"' + _dq_escape(name + "=") + _expanding_text(value.parts) + '"'


def render_directive(directive: Directive) -> str:
    head = f"#SBATCH --{directive.option}"
    if directive.value is None:
        return head
    value = directive.value
    if not (value and _SAFE_DIRECTIVE.issuperset(value)):
        value = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{head}={value}"


def _clear_env_lines(node: ClearEnv) -> list[str]:
    keep = "|".join(node.keep)
    drop = "|".join(p + "*" for p in node.prefixes)
    case = (
        f'case "${{__sb_name}}" in {keep + ") ;; " if keep else ""}{drop}) '
        'unset "${__sb_name}" ;; esac'
    )
    # The loop variable is the script's own: unset, the command sees no trace of it.
    return [f"for __sb_name in $(compgen -e); do {case}; done; unset -v __sb_name"]


def _continued(head: str, lines: list[str]) -> list[str]:
    """``head \\`` followed by indented continuation lines."""
    out = [head + " \\"]
    out += [_INDENT + line + " \\" for line in lines[:-1]]
    if lines:
        out.append(_INDENT + lines[-1])
    return out


def _launch_words(node: Srun | DockerRun) -> tuple[str, list[str]]:
    """The program and its rendered arguments, one option per entry."""
    options = [render_option(o) for o in node.options]
    if isinstance(node, Srun):
        return "srun", [*options, render_command(node.payload)]
    return "docker run", [*options, render_word(node.image), render_command(node.payload)]


def _comment(node: Comment) -> list[str]:
    return ["# " + line if line else "#" for line in node.text.split("\n")]


def _blank(node: Blank) -> list[str]:
    return [""]


def _export(node: Export) -> list[str]:
    return [f"export {node.name}={render_word(node.value)}"]


def _assign(node: Assign) -> list[str]:
    return [f"{node.name}={render_word(node.value)}"]


def _redirect(node: Redirect) -> str:
    return node.op + quote_literal(node.target)


def _run(node: Run) -> list[str]:
    words = [render_command(node.command)]
    if node.redirects:
        words += map(_redirect, node.redirects)
    if node.background:
        words.append("&")
    return [" ".join(words)]


def _indented(body: tuple[Statement, ...]) -> list[str]:
    return [_INDENT + line for child in body for line in _statement_lines(child)]


def _if(node: If) -> list[str]:
    orelse = ["else", *_indented(node.orelse)] if node.orelse else []
    return [f"if {render_command(node.test)}; then", *_indented(node.body), *orelse, "fi"]


def _function(node: Function) -> list[str]:
    return [f"{node.name}() {{", *_indented(node.body), "}"]


def _trap(node: Trap) -> list[str]:
    return [" ".join(["trap", quote_literal(render_inline(node.body)), *node.signals])]


def _launch(node: Srun | DockerRun) -> list[str]:
    head, words = _launch_words(node)
    lines = _continued(head, words)
    if isinstance(node, Srun) and node.background:
        lines[-1] += " &"
    return lines


def _exit(node: Exit) -> list[str]:
    return [f"exit {render_word(node.status)}"]


_BLOCK: dict[type, Callable[[Any], list[str]]] = {
    Comment: _comment,
    Blank: _blank,
    Export: _export,
    Assign: _assign,
    Run: _run,
    Function: _function,
    Trap: _trap,
    ClearEnv: _clear_env_lines,
    If: _if,
    Srun: _launch,
    DockerRun: _launch,
    Exit: _exit,
}


def _statement_lines(node: Statement) -> list[str]:
    """The lines of a statement at block level."""
    if isinstance(node, Subshell):
        return _inline_lines(node)
    block = _BLOCK.get(type(node))
    if block is None:
        raise TypeError(f"not a statement node: {node!r}")
    return block(node)


def _joined(lines: list[str]) -> str:
    """Lines as one line: ``;`` between them, a space after a background ``&``."""
    out = ""
    for i, line in enumerate(lines):
        if i:
            out += " " if out.endswith("&") else "; "
        out += line
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
            inner.insert(0, " ".join(["set --", *(render_word(w) for w in node.args)]))
        return ["(" + _joined(inner) + ")"]
    if isinstance(node, Function):
        return [f"{node.name}() {{ {_inline(node.body)}; }}"]
    return _statement_lines(node)


def render_inline(body: tuple[Statement, ...]) -> str:
    """Render statements as the text of a ``bash -c`` argument: one line,
    statements joined by ``;``, unless one of them spans several lines."""
    lines = [line for node in body for line in _inline_lines(node)]
    if any(isinstance(node, Comment) for node in body):
        return "\n".join(lines)
    return _joined(lines)


def render(script: SbatchScript | ShellScript) -> str:
    """Render a whole script to text ending in a newline."""
    lines = [f"#!{script.shebang.interpreter}"]
    if isinstance(script, SbatchScript):
        lines += [render_directive(d) for d in script.directives]
        for comment in script.header:
            lines += _statement_lines(comment)
    lines += [line for node in script.body for line in _statement_lines(node)]
    return "\n".join(lines) + "\n"


def render_one_line(node: Srun | DockerRun) -> str:
    """A launch statement on a single logical line (for ``job_spec.json``)."""
    head, words = _launch_words(node)
    return " ".join([head, *words])
