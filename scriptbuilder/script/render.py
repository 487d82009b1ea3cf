"""The one place where script text is produced: tree in, text out.

Quoting rules, applied by construction:

* a word made only of literal parts is left bare when every character is
  safe, otherwise single-quoted (``'`` becomes ``'\\''``);
* a word with run-time parts is double-quoted, literal parts escaped for that
  context (``\\``, ``"``, ``$`` and backtick);
* ``#SBATCH`` values are written in the form sbatch's own directive parser
  reads: bare when safe, otherwise in double quotes with ``\\`` and ``"``
  escaped by a backslash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scriptbuilder.script.tree import (
    Assign,
    Blank,
    ClearEnv,
    Command,
    Comment,
    Directive,
    DockerRun,
    Exit,
    Export,
    If,
    Lit,
    Run,
    SbatchScript,
    ScriptText,
    ShellScript,
    Srun,
    SrunOption,
    Statement,
    Subshell,
    Subst,
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


def quote_literal(text: str) -> str:
    """Quote ``text`` so the shell reads it back unchanged as one word."""
    if text and (_SAFE.issuperset(text) or text in ("[", "]")):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


def _dq_escape(text: str) -> str:
    """Escape ``\\``, ``"``, ``$`` and backtick for a double-quoted context."""
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
    return "${" + var.name + ":-" + _dq_escape(var.default) + "}"


def _script_text(part: ScriptText) -> str:
    return render_inline(part.body)


def _literal_text(parts: tuple[Part, ...]) -> str | None:
    """The text of a word made only of literal parts; None when a part expands."""
    if len(parts) == 1 and isinstance(parts[0], Lit):
        return parts[0].text
    out = []
    for part in parts:
        if isinstance(part, Lit):
            out.append(part.text)
        elif isinstance(part, ScriptText):
            out.append(_script_text(part))
        else:
            return None
    return "".join(out)


def render_word(word: Word, *, command_name: bool = False) -> str:
    """Render one word. ``command_name`` forces quoting of text the shell would
    read as an assignment, reserved word or job spec in command position."""
    if command_name:
        text = _literal_text(word.parts)
        if text is not None and ("=" in text or text in _RESERVED or text.startswith("%")):
            return "'" + text.replace("'", "'\\''") + "'"
    return _word_text(word)


def _word_text(word: Word) -> str:
    parts = word.parts
    if len(parts) == 1:
        only = parts[0]
        if isinstance(only, Var) and only.name == "?" and only.default is None:
            return "$?"
    text = _literal_text(parts)
    if text is not None:
        return quote_literal(text)
    out = []
    for part in parts:
        if isinstance(part, Lit):
            out.append(_dq_escape(part.text))
        elif isinstance(part, ScriptText):
            out.append(_dq_escape(_script_text(part)))
        elif isinstance(part, Var):
            out.append(_render_var(part))
        elif isinstance(part, Subst):
            out.append("$(" + render_command(part.command) + ")")
    return '"' + "".join(out) + '"'


def render_command(command: Command) -> str:
    first, *rest = command.argv
    return " ".join([render_word(first, command_name=True), *[render_word(w) for w in rest]])


def render_option(option: SrunOption) -> str:
    value = option.value
    if value is None:
        return quote_literal(option.name)
    return render_word(Word((Lit(option.name + "="), *value.parts)))


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
    case = f'case "${{name}}" in {keep + ") ;; " if keep else ""}{drop}) unset "${{name}}" ;; esac'
    return [f"for name in $(compgen -e); do {case}; done"]


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


def _run(node: Run) -> list[str]:
    return [render_command(node.command)]


def _if(node: If) -> list[str]:
    body = [_INDENT + line for child in node.body for line in _statement_lines(child)]
    return [f"if {render_command(node.test)}; then", *body, "fi"]


def _launch(node: Srun | DockerRun) -> list[str]:
    head, words = _launch_words(node)
    return _continued(head, words)


def _exit(node: Exit) -> list[str]:
    return [f"exit {render_word(node.status)}"]


_BLOCK: dict[type, Callable[[Any], list[str]]] = {
    Comment: _comment,
    Blank: _blank,
    Export: _export,
    Assign: _assign,
    Run: _run,
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


def _inline_lines(node: Statement) -> list[str]:
    if isinstance(node, If):
        inner = [line for child in node.body for line in _inline_lines(child)]
        return [f"if {render_command(node.test)}; then {'; '.join(inner)}; fi"]
    if isinstance(node, Subshell):
        inner = [line for child in node.body for line in _inline_lines(child)]
        if node.args is not None:
            inner.insert(0, " ".join(["set --", *(render_word(w) for w in node.args)]))
        return ["(" + "; ".join(inner) + ")"]
    return _statement_lines(node)


def render_inline(body: tuple[Statement, ...]) -> str:
    """Render statements as the text of a ``bash -c`` argument: one line,
    statements joined by ``;``, unless one of them spans several lines."""
    lines = [line for node in body for line in _inline_lines(node)]
    if any(isinstance(node, Comment) for node in body):
        return "\n".join(lines)
    return "; ".join(lines)


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
