"""Secret values (``secret_values``, ``slurm_password``, custom_env values of names matching
``secret_name_patterns``): shown as ``***`` in every printout, or read from the job's
environment at run time with ``secrets_from_environment``.
"""

from __future__ import annotations

import fnmatch
import json
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.shellwords import ShellSyntaxError, tokenize

if TYPE_CHECKING:
    from scriptbuilder.models.request import BuildRequest

SHOWN = "***"


@dataclass(frozen=True)
class Assignment:
    """``NAME=value`` in shell text: ``raw`` is the value as written there."""

    name: str
    value: str
    raw: str
    start: int
    end: int


def secret_assignments(text: str, patterns: tuple[str, ...] | list[str]) -> list[Assignment]:
    """The ``NAME=value`` words of ``text`` with a value and a name matching ``patterns``."""
    try:
        tokens = tokenize(text)
    except ShellSyntaxError as exc:
        raise BuildError(f"custom_env: {exc}; fix its quoting") from None
    found = []
    for token in tokens:
        raw = text[token.start : token.end]
        name, eq, value = token.value.partition("=")
        if not (token.kind == "word" and eq and value and raw.startswith(name + "=")):
            continue
        if name.isidentifier() and any(
            fnmatch.fnmatchcase(name.upper(), p.upper()) for p in patterns
        ):
            found.append(Assignment(name, value, raw[len(name) + 1 :], token.start, token.end))
    return found


def mask(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every form of every secret (as is, quoted for the shell both ways,
    escaped in JSON) shown as ``***``, longest first so none of a longer one is shown."""
    forms: set[str] = set()
    for value in secrets:
        double = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
        double = double.replace("`", "\\`")
        forms |= {value, value.replace("'", "'\\''"), double, json.dumps(value)[1:-1]}
    forms.discard("")
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, SHOWN)
    return text


def mask_data(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` (JSON-like data) with every string masked (``value`` itself when
    there is no secret)."""
    if not secrets:
        return value
    if isinstance(value, str):
        return mask(value, secrets)
    if isinstance(value, dict):
        return {key: mask_data(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [mask_data(item, secrets) for item in value]
    return value


def script_secrets(script_text: str, patterns: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The secret values of a written script's ``CUSTOM_ENV`` (``export CUSTOM_ENV=...``
    or docker's ``--env=CUSTOM_ENV=...``): what a job's logs may show, and the one file
    that holds them (longest first)."""
    found: list[str] = []
    for line in script_text.splitlines():
        if "CUSTOM_ENV=" not in line:
            continue
        try:
            words = shlex.split(line.rstrip().removesuffix("\\"))  # a continued line
        except ValueError:
            continue
        for word in words:
            before, sep, value = word.partition("CUSTOM_ENV=")
            if sep and before in ("", "--env="):
                try:
                    found += [a.value for a in secret_assignments(value, patterns)]
                except BuildError:
                    continue
    return tuple(sorted(set(found), key=len, reverse=True))


def request_secrets(request: BuildRequest) -> tuple[str, ...]:
    """The marked secret values and those of secret-named ``custom_env`` assignments."""
    found = list(request.secret_values)
    if request.slurm_password is not None:
        found.append(request.slurm_password.get_secret_value())
    if request.custom_env:
        for a in secret_assignments(request.custom_env, request.secret_name_patterns):
            found += [a.value, a.raw]
    return tuple(dict.fromkeys(v for v in found if v))


def script_custom_env(request: BuildRequest) -> tuple[str, tuple[str, ...]]:
    """``custom_env`` as the script carries it, and the names read from the environment."""
    text = request.custom_env or ""
    if not (request.secrets_from_environment and text):
        return text, ()
    secret = secret_assignments(text, request.secret_name_patterns)
    for a in reversed(secret):  # from the end, so the earlier spans stay valid
        new = f'{a.name}="${{{a.name}:?{a.name} is not set in the job environment}}"'
        text = text[: a.start] + new + text[a.end :]
    return text, tuple(a.name for a in secret)
