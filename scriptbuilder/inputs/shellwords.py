"""A bash-aware tokenizer: words and operators as bash's parser reads them, nothing expanded.

A word's ``value`` is its text after quote removal; ``literal`` is false when bash would
still expand it at run time. Spans index the original string. Not understood: aliases,
``case`` inside ``$(...)``, extglob, ``{fd}>``; here-document bodies are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal


class ShellSyntaxError(ValueError):
    """The command is not complete shell syntax (an unterminated quote, for example)."""


@dataclass(frozen=True)
class Token:
    """One word (``value`` after quote removal, expansions kept raw) or operator."""

    value: str
    start: int
    end: int
    kind: Literal["word", "op"]
    literal: bool = True


# Longest first, so that the first alternative that matches is the one bash takes.
_OPERATORS = (
    ";;&", "<<<", "<<-", "&>>",
    "&&", "||", ";;", ";&", "|&", ">>", "<<", "<&", ">&", "<>", ">|", "&>",
    "&", "|", ";", "(", ")", "<", ">",
)  # fmt: skip
_OPERATOR = re.compile("|".join(map(re.escape, _OPERATORS)))
_METACHARS = frozenset(" \t\n;&|()<>")
_BLANKS = frozenset(" \t")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FD_REDIRECT = re.compile(r"[0-9]+(?=[<>])")
_SPECIAL_PARAMS = frozenset("@*#?$!-0123456789")
# The characters that end a word or start a quote or an expansion in it.
_WORD_SPECIAL = re.compile(r"[ \t\n;&|()<>\\'\"$`]")
# Placeholder for a quoted (or expanded) character in a word's shape.
_Q = "\x00"
_GLOB_BRACKET = re.compile(r"\[.+?\]", re.DOTALL)
_BRACE_EXPANSION = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")
_ASSIGNMENT_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")

_OCTAL_TAIL = re.compile(r"[0-7]{1,2}")
_HEX_DIGITS = {k: re.compile(f"[0-9A-Fa-f]{{1,{n}}}") for k, n in (("x", 2), ("u", 4), ("U", 8))}
_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n",
    "r": "\r", "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}  # fmt: skip

# Operators that end a simple command (everything else is a redirection).
_CONTROL_OPS = frozenset({"&&", "||", ";", ";;", ";&", ";;&", "|", "|&", "&", "(", ")", "\n"})
# Reserved words that may precede a command in the same simple command.
_LEADING_KEYWORDS = frozenset(
    {"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until",
     "time", "esac"}
)  # fmt: skip
# Reserved words after which the next word is again in command position.
_COMMAND_PREFIX_KEYWORDS = frozenset(
    {"!", "{", "if", "then", "else", "elif", "do", "while", "until", "time"}
)
# Openers of compound commands and the closer that ends each one.
_OPENERS = {"{": "}", "if": "fi", "do": "done", "case": "esac", "[[": "]]"}


class _Lexer:
    def __init__(self, text: str) -> None:
        self.s = text
        self.n = len(text)

    def error(self, what: str, pos: int) -> ShellSyntaxError:
        line = self.s.count("\n", 0, pos) + 1
        column = pos - self.s.rfind("\n", 0, pos)
        where = f"line {line}, column {column}" if line > 1 else f"column {column}"
        return ShellSyntaxError(f"unterminated {what} starting at {where}")

    # Each skip_* gets ``i`` just past the opening and returns the index past the close.
    def skip_single(self, i: int) -> int:
        j = self.s.find("'", i)
        if j < 0:
            raise self.error("single quote", i - 1)
        return j + 1

    def skip(
        self,
        i: int,
        close: str,
        what: str,
        origin: int,
        nest: str = "",
        *,
        quotes: bool = False,
        subst: bool = False,
        code: bool = False,
    ) -> int:
        """Past the ``close`` of the construct opened at ``origin`` (``nest`` nests);
        ``quotes``/``subst``/``code`` also skip quotes, substitutions, $'' and comments."""
        s, n = self.s, self.n
        depth, j, word_start = 0, i, True
        while j < n:
            c = s[j]
            starts_word, word_start = word_start, c in " \t\n;&|(<>"
            if c == "\\":
                j += 2
                word_start = False
            elif c == close:
                if depth == 0:
                    return j + 1
                depth -= 1
                j += 1
                word_start = True
            elif c == nest:
                depth += 1
                j += 1
            elif quotes and c == "'":
                j = self.skip_single(j + 1)
            elif quotes and c == '"':
                j = self.skip(j + 1, '"', "double quote", j, subst=True)
            elif subst and c == "`":
                j = self.skip_backtick(j + 1)
            elif code and c == "$" and s.startswith("'", j + 1):
                j = self.skip_ansi_c(j + 2)
            elif subst and c == "$" and j + 1 < n and s[j + 1] in "({[":
                j = self.skip_dollar(j)
            elif code and c == "#" and starts_word:
                newline = s.find("\n", j)
                j = n if newline < 0 else newline
            else:
                j += 1
        raise self.error(what, origin)

    def skip_ansi_c(self, i: int) -> int:
        return self.skip(i, "'", "$'...' quote", i - 2)

    def skip_backtick(self, i: int) -> int:
        return self.skip(i, "`", "backquote substitution", i - 1)

    def skip_code(self, i: int, origin: int) -> int:
        """The inside of ``$(...)``, ``$((...))``, ``<(...)`` or ``>(...)``."""
        kind = "command" if self.s[origin] == "$" else "process"
        what = f"{kind} substitution '{self.s[origin : origin + 2]}'"
        return self.skip(i, ")", what, origin, "(", quotes=True, subst=True, code=True)

    def skip_dollar(self, i: int) -> int:
        """``s[i]`` is ``$`` followed by ``(``, ``{`` or ``[``; return the index past the end."""
        opener = self.s[i + 1]
        if opener == "(":
            return self.skip_code(i + 2, i)
        if opener == "{":
            return self.skip(
                i + 2, "}", "parameter expansion '${'", i, "{", quotes=True, subst=True
            )
        return self.skip(i + 2, "]", "arithmetic expansion '$['", i, "[")

    def dollar_end(self, i: int) -> int | None:
        """End of the expansion starting with ``$`` at ``i``, or None for a literal ``$``."""
        s, n = self.s, self.n
        if i + 1 >= n:
            return None
        nxt = s[i + 1]
        if nxt in "({[":
            return self.skip_dollar(i)
        m = _NAME.match(s, i + 1)
        if m is not None:
            return m.end()
        if nxt in _SPECIAL_PARAMS:
            return i + 2
        return None

    def expansion(self, i: int, value: list[str]) -> tuple[int, bool]:
        """Read the ``$...`` or backquote at ``i`` raw into ``value``; return (end, literal)."""
        end = self.skip_backtick(i + 1) if self.s[i] == "`" else self.dollar_end(i)
        if end is None:
            value.append("$")
            return i + 1, True
        value.append(self.s[i:end])
        return end, False

    def decode_ansi_c(self, i: int, value: list[str], shape: list[str]) -> int:
        """Decode ``$'...'`` (``i`` just past ``$'``); return the index past the closing quote."""
        s = self.s
        end = self.skip_ansi_c(i)
        j = i
        stop = end - 1
        while j < stop:
            c = s[j]
            if c != "\\" or j + 1 >= stop:
                value.append(c)
                j += 1
                continue
            e = s[j + 1]
            j += 2
            if e in _SIMPLE_ESCAPES:
                value.append(_SIMPLE_ESCAPES[e])
            elif e in "01234567":
                m = _OCTAL_TAIL.match(s, j, stop)
                digits = e + (m.group() if m else "")
                j += len(digits) - 1
                value.append(chr(int(digits, 8) & 0xFF))
            elif e in "xuU":
                m = _HEX_DIGITS[e].match(s, j, stop)
                if m is None:
                    value.append("\\" + e)
                else:
                    j = m.end()
                    code = int(m.group(), 16)
                    value.append(chr(code) if code <= 0x10FFFF else "\ufffd")
            elif e == "c" and j < stop:
                value.append(chr(ord(s[j]) & 0x1F))
                j += 1
            else:
                value.append("\\" + e)
        shape.append(_Q)
        return end

    def read_double(self, i: int, value: list[str], shape: list[str]) -> tuple[int, bool]:
        """Read ``"..."`` (``i`` just past the quote); return (end, literal)."""
        s, n = self.s, self.n
        literal = True
        j = i
        while j < n:
            c = s[j]
            if c == '"':
                shape.append(_Q)
                return j + 1, literal
            if c == "\\":
                if j + 1 >= n:
                    break
                e = s[j + 1]
                if e == "\n":
                    pass
                elif e in '$`"\\':
                    value.append(e)
                else:
                    value.append("\\" + e)
                j += 2
            elif c in "`$":
                j, lit = self.expansion(j, value)
                literal = literal and lit
            else:
                value.append(c)
                j += 1
        raise self.error("double quote", i - 1)

    def read_word(self, i: int) -> tuple[Token, int]:
        s, n = self.s, self.n
        start = i
        value: list[str] = []
        # Unquoted characters as they are, quoted/expanded runs as _Q: what
        # tilde, brace and pathname expansion get to see.
        shape: list[str] = []
        literal = True
        while i < n:
            c = s[i]
            if c in "<>" and i + 1 < n and s[i + 1] == "(":
                end = self.skip_code(i + 2, i)
                value.append(s[i:end])
                shape.append(_Q)
                literal = False
                i = end
            elif c in _METACHARS:
                break
            elif c == "\\":
                if i + 1 >= n:  # bash keeps a backslash at the very end
                    value.append("\\")
                    shape.append(_Q)
                    i += 1
                elif s[i + 1] == "\n":  # line continuation
                    i += 2
                else:
                    value.append(s[i + 1])
                    shape.append(_Q)
                    i += 2
            elif c == "'":
                end = self.skip_single(i + 1)
                value.append(s[i + 1 : end - 1])
                shape.append(_Q)
                i = end
            elif c == '"':
                i, lit = self.read_double(i + 1, value, shape)
                literal = literal and lit
            elif c == "$" and i + 1 < n and s[i + 1] == "'":
                i = self.decode_ansi_c(i + 2, value, shape)
            elif c == "$" and i + 1 < n and s[i + 1] == '"':  # $"..." (locale string)
                i, lit = self.read_double(i + 2, value, shape)
                literal = literal and lit
            elif c in "$`":
                i, lit = self.expansion(i, value)
                shape.append(_Q)
                literal = literal and lit
            else:  # ordinary characters, up to the next one handled above
                special = _WORD_SPECIAL.search(s, i + 1)
                end = special.start() if special else n
                value.append(s[i:end])
                shape.append(s[i:end])
                i = end
        if literal:
            literal = not _expands("".join(shape))
        return Token("".join(value), start, i, "word", literal), i

    def skip_heredocs(self, i: int, pending: list[tuple[str, bool]]) -> int:
        """Skip the bodies of ``pending`` here-documents; ``i`` is the start of the body."""
        s, n = self.s, self.n
        for delimiter, strip_tabs in pending:
            while i < n:
                newline = s.find("\n", i)
                line_end = n if newline < 0 else newline
                line = s[i:line_end]
                i = line_end + 1 if newline >= 0 else n
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
        pending.clear()
        return i

    def tokens(self) -> list[Token]:
        s, n = self.s, self.n
        out: list[Token] = []
        pending: list[tuple[str, bool]] = []
        heredoc_op: str | None = None
        i = 0
        while i < n:
            c = s[i]
            if c in _BLANKS:
                i += 1
                continue
            if s.startswith("\\\n", i):
                i += 2
                continue
            if c == "\n":
                start = i
                i = self.skip_heredocs(i + 1, pending) if pending else i + 1
                out.append(Token("\n", start, i, "op"))
                continue
            if c == "#":
                newline = s.find("\n", i)
                i = n if newline < 0 else newline
                continue
            op_start = i
            fd = _FD_REDIRECT.match(s, i)
            j = fd.end() if fd else i
            found = _OPERATOR.match(s, j)
            op = found.group() if found else None
            is_procsub = op in ("<", ">") and s.startswith("(", j + 1)
            if op is not None and not is_procsub and (fd is None or op[0] in "<>"):
                i = j + len(op)
                out.append(Token(s[op_start:i], op_start, i, "op"))
                if op in ("<<", "<<-"):
                    heredoc_op = op
                continue
            token, i = self.read_word(i)
            out.append(token)
            if heredoc_op is not None:
                pending.append((token.value, heredoc_op == "<<-"))
                heredoc_op = None
        return out


def _expands(shape: str) -> bool:
    """Whether tilde, brace or pathname expansion applies to a word of this shape."""
    if "*" in shape or "?" in shape or shape.startswith("~"):
        return True
    if _GLOB_BRACKET.search(shape) or _BRACE_EXPANSION.search(shape):
        return True
    m = _ASSIGNMENT_PREFIX.match(shape)
    if m is not None:
        rest = shape[m.end() :]
        return rest.startswith("~") or ":~" in rest
    return False


def tokenize(command: str) -> list[Token]:
    """Split ``command`` into words and operators; ShellSyntaxError when unterminated."""
    return _Lexer(command).tokens()


def simple_commands(tokens: Sequence[Token]) -> list[list[Token]]:
    """The words grouped into simple commands, without redirections and leading
    reserved words (so each group starts with the program); empty groups omitted."""
    groups: list[list[Token]] = []
    current: list[Token] = []
    skip_target = False
    after_time = False  # `time -p cmd`: -p belongs to the reserved word
    for token in tokens:
        if token.kind == "op":
            if token.value in _CONTROL_OPS:
                if current:
                    groups.append(current)
                current = []
                skip_target = after_time = False
            else:
                skip_target = True
            continue
        if skip_target:
            skip_target = False
            continue
        # A reserved word is one written without quoting (its text is its value).
        if not current and token.literal and token.end - token.start == len(token.value):
            if token.value in _LEADING_KEYWORDS:
                after_time = token.value == "time"
                continue
            if after_time and token.value in ("-p", "--"):
                continue
        after_time = False
        current.append(token)
    if current:
        groups.append(current)
    return groups


def split_top_level(
    command: str, op: str = "&&", tokens: Sequence[Token] | None = None
) -> list[str]:
    """The original text of each part of ``command`` between ``op`` operators that are
    not quoted, substituted or inside a subshell or compound command (``""`` if empty);
    ``tokens`` are those of ``command`` when they have been read already."""
    parts: list[list[Token]] = [[]]
    stack: list[str] = []
    command_position = True
    for token in tokenize(command) if tokens is None else tokens:
        at_command = command_position
        if token.kind == "op":
            command_position = token.value in _CONTROL_OPS
            if token.value == "(":
                stack.append("(")
            elif token.value == ")" and stack and stack[-1] == "(":
                stack.pop()
            elif token.value == op and not stack:
                parts.append([])
                continue
        else:
            raw = command[token.start : token.end]
            command_position = at_command and raw in _COMMAND_PREFIX_KEYWORDS
            if stack and stack[-1] == "[[":
                if raw == "]]":
                    stack.pop()
            elif at_command and raw in _OPENERS:
                stack.append(raw)
            elif at_command and stack and raw == _OPENERS.get(stack[-1]):
                stack.pop()
        parts[-1].append(token)
    return [command[p[0].start : p[-1].end].strip(" \t\n") if p else "" for p in parts]
