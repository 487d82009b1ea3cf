"""What the two command lines share: one-line errors and output written as bytes.

:class:`Group`: every failure ends in one line, ``<prog>: error: <message>``: a
usage error or a refused value exits 2 (naming the subcommand's ``--help``), a
:class:`BuildError` with its exit code, an OS error or Ctrl-C with 1.

:func:`write_out` writes generated text (scripts, job_spec.json) to a stream
as UTF-8 bytes, unchanged: ``click.echo`` would strip ANSI escape sequences
inside a user's command when standard output is not a terminal.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence
from typing import IO, Any, NoReturn

import click

from scriptbuilder.errors import BuildError


def write_out(text: str, *, err: bool = False) -> None:
    """``text`` on standard output (or error) as UTF-8 bytes; characters that
    came from undecodable command-line bytes are written back as those bytes.

    The bytes go straight to the file descriptor, so a failed write (a full
    disk) leaves nothing queued behind; the OS error names the stream."""
    stream: IO[str] | None = sys.stderr if err else sys.stdout
    if stream is None:
        return
    stream.flush()
    data = text.encode("utf-8", "surrogateescape")
    try:
        fd = stream.fileno()
    except OSError:  # an in-process capture (io.UnsupportedOperation)
        buffer = getattr(stream, "buffer", None)
        if buffer is None:  # text only: there are no bytes to write
            stream.write(text)
        else:
            buffer.write(data)
        stream.flush()  # (a text stream's flush flushes its buffer too)
        return
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        name = "standard error" if err else "standard output"
        raise OSError(exc.errno, exc.strerror, name) from None


def fail(prog: str, message: str, code: int = 2) -> NoReturn:
    write_out(f"{prog}: error: {message}\n", err=True)
    sys.exit(code)


def os_error_message(exc: OSError) -> str:
    """``<path>: <reason>`` for an OS error (the path first, as the shell says it)."""
    reason = exc.strerror or str(exc)
    return f"{exc.filename}: {reason}" if exc.filename else reason


class Group(click.Group):
    """A click group that ends every failure in one line (see the module text).

    ``usage_hint``: a usage error inside a subcommand names its ``--help``."""

    def __init__(self, *args: Any, usage_hint: bool = False, **attrs: Any) -> None:
        super().__init__(*args, **attrs)
        self.usage_hint = usage_hint

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        obj: object = None,
        **extra: Any,
    ) -> None:
        prog = prog_name or self.name or "scriptbuilder"
        try:
            rc = super().main(args, prog, standalone_mode=False, obj=obj, **extra)
            if isinstance(rc, int) and rc:
                sys.exit(rc)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            fail(prog, "aborted", 1)
        except click.UsageError as exc:
            ctx = exc.ctx
            in_command = self.usage_hint and ctx is not None and ctx.parent is not None
            hint = f" (see '{prog} {ctx.info_name} --help')" if in_command and ctx else ""
            fail(prog, exc.format_message().replace("\n", " ") + hint)
        except click.ClickException as exc:
            fail(prog, exc.format_message().replace("\n", " "), exc.exit_code)
        except BuildError as exc:
            fail(prog, str(exc), exc.exit_code)
        except OSError as exc:
            if exc.errno == errno.EPIPE:  # the reader went away: stop quietly
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                sys.exit(1)
            fail(prog, os_error_message(exc), 1)
