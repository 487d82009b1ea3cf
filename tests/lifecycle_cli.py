"""``scriptbuilder ARGS`` run in this process (no interpreter start-up per call), with
the environment it would get as a process; the result as a process would give it."""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from typing import Any

from scriptbuilder.cli.build import main


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


def scriptbuilder(*args: str, env: Mapping[str, str], **_: Any) -> Done:
    """``scriptbuilder ARGS`` with ``os.environ`` set to ``env`` for the call."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as exc:
                code = int(exc.code or 0)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return Done(code, out.getvalue(), err.getvalue())
