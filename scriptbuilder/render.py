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

import re

from scriptbuilder.script_tree import (
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

_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+\Z")
_SAFE_DIRECTIVE = re.compile(r"[A-Za-z0-9_@%+=:,./()\[\]*-]+\Z")
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
    if text and (_SAFE.match(text) or text in ("[", "]")):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


def _dq_escape(text: str) -> str:
    return re.sub(r'([\\"$`])', r"\\\1", text)


def _render_var(var: Var) -> str:
    if var.default is None:
        return (
            "$" + var.name
            if len(var.name) == 1 and not var.name.isalpha()
            else "${" + var.name + "}"
        )
    return "${" + var.name + ":-" + _dq_escape(var.default) + "}"


def render_word(word: Word, *, command_name: bool = False) -> str:
    if word.parts == (Var("?"),):
        return "$?"
    return _render_word(word, command_name=command_name)


def _render_word(word: Word, *, command_name: bool = False) -> str:
    """Render one word. ``command_name`` forces quoting of text the shell would
    read as an assignment, reserved word or job spec in command position."""
    if all(isinstance(p, (Lit, ScriptText)) for p in word.parts):
        text = "".join(
            p.text if isinstance(p, Lit) else render_inline(p.body)  # type: ignore[union-attr]
            for p in word.parts
        )
        if command_name and ("=" in text or text in _RESERVED or text.startswith("%")):
            return "'" + text.replace("'", "'\\''") + "'"
        return quote_literal(text)
    out = []
    for part in word.parts:
        if isinstance(part, Lit):
            out.append(_dq_escape(part.text))
        elif isinstance(part, ScriptText):
            out.append(_dq_escape(render_inline(part.body)))
        elif isinstance(part, Var):
            out.append(_render_var(part))
        elif isinstance(part, Subst):
            out.append("$(" + render_command(part.command) + ")")
    return '"' + "".join(out) + '"'


def render_command(command: Command) -> str:
    first, *rest = command.argv
    return " ".join([render_word(first, command_name=True), *(render_word(w) for w in rest)])


def render_option(option: SrunOption) -> str:
    if option.value is None:
        return quote_literal(option.name)
    return render_word(Word((Lit(option.name + "="), *option.value.parts)))


def render_directive(directive: Directive) -> str:
    head = f"#SBATCH --{directive.option}"
    if directive.value is None:
        return head
    value = directive.value
    if not (value and _SAFE_DIRECTIVE.match(value)):
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
    for i, line in enumerate(lines):
        out.append(_INDENT + line + ("" if i == len(lines) - 1 else " \\"))
    return out


def _launch_words(node: Srun | DockerRun) -> tuple[str, list[str]]:
    """The program and its rendered arguments, one option per entry."""
    options = [render_option(o) for o in node.options]
    if isinstance(node, Srun):
        return "srun", [*options, render_command(node.payload)]
    return "docker run", [*options, render_word(node.image), render_command(node.payload)]


def _statement_lines(node: Statement) -> list[str]:
    if isinstance(node, Comment):
        return ["# " + line if line else "#" for line in node.text.split("\n")]
    if isinstance(node, Blank):
        return [""]
    if isinstance(node, Export):
        return [f"export {node.name}={render_word(node.value)}"]
    if isinstance(node, Assign):
        return [f"{node.name}={render_word(node.value)}"]
    if isinstance(node, Run):
        return [render_command(node.command)]
    if isinstance(node, ClearEnv):
        return _clear_env_lines(node)
    if isinstance(node, If):
        body = [_INDENT + line for child in node.body for line in _statement_lines(child)]
        return [f"if {render_command(node.test)}; then", *body, "fi"]
    if isinstance(node, (Srun, DockerRun)):
        head, words = _launch_words(node)
        return _continued(head, words)
    if isinstance(node, Exit):
        return [f"exit {render_word(node.status)}"]
    if isinstance(node, Subshell):
        return _inline_lines(node)
    raise TypeError(f"not a statement node: {node!r}")


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


def render_statements(body: tuple[Statement, ...]) -> str:
    return "".join(line + "\n" for node in body for line in _statement_lines(node))


def render(script: SbatchScript | ShellScript) -> str:
    """Render a whole script to text ending in a newline."""
    lines = [f"#!{script.shebang.interpreter}"]
    if isinstance(script, SbatchScript):
        lines += [render_directive(d) for d in script.directives]
        for comment in script.header:
            lines += _statement_lines(comment)
    text = "\n".join(lines) + "\n"
    return text + render_statements(script.body)


def render_one_line(node: Srun | DockerRun) -> str:
    """A launch statement on a single logical line (for ``job_spec.json``)."""
    head, words = _launch_words(node)
    return " ".join([head, *words])
