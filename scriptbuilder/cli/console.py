"""Console output and outcomes shared by the two command line tools, without
importing click on the common path.

:func:`echo` is ``click.echo(text, nl=False)`` written straight to a standard
text stream with a real encoding; click (which strips ANSI codes when not on
a terminal and repairs ASCII-configured streams) writes everything else.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

    import click


def echo(text: str, *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    if "\x1b" in text or not _plain_stream(stream):
        import click

        click.echo(text, nl=False, err=err)
        return
    stream.write(text)
    stream.flush()


def _plain_stream(stream: object) -> bool:
    import codecs
    import io

    if type(stream) is not io.TextIOWrapper:
        return False
    try:
        return codecs.lookup(stream.encoding).name != "ascii"
    except LookupError:
        return False


def fail(prog: str, message: str, code: int = 2) -> NoReturn:
    """``<prog>: error: <message>`` on standard error, then exit with ``code``."""
    echo(f"{prog}: error: {message}\n", err=True)
    sys.exit(code)


class _QuietFlush:
    """Like click: after a broken pipe, flushing at exit must not raise again."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped

    def flush(self) -> None:
        import errno

        try:
            self.wrapped.flush()
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


def run_outside_click(prog: str, action: Callable[[], None]) -> None:
    """Run ``action`` with the outcomes click gives a command: a BuildError is a
    one-line error with its exit code, another OSError exit 1, a broken pipe a
    quiet exit 1, Ctrl-C or end of input "aborted"."""
    import errno

    from scriptbuilder.errors import BuildError

    try:
        action()
    except (EOFError, KeyboardInterrupt):
        echo("\n", err=True)
        fail(prog, "aborted", 1)
    except BuildError as exc:
        fail(prog, str(exc), exc.exit_code)
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            sys.stdout = _QuietFlush(sys.stdout)
            sys.stderr = _QuietFlush(sys.stderr)
            sys.exit(1)
        fail(prog, f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 1)


def run_click(
    prog: str, group: click.Group, args: list[str], obj: object = None, *, usage_hint: bool = False
) -> None:
    """Run ``args`` through click, every failure a one-line error (with
    ``usage_hint``, a usage error names the subcommand's ``--help``)."""
    import click

    from scriptbuilder.errors import BuildError

    try:
        rc = group.main(args=args, obj=obj, prog_name=prog, standalone_mode=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        fail(prog, "aborted", 1)
    except click.UsageError as exc:
        ctx = exc.ctx
        in_command = usage_hint and ctx is not None and ctx.parent is not None
        hint = f" (see '{prog} {ctx.info_name} --help')" if in_command and ctx else ""
        fail(prog, exc.format_message().replace("\n", " ") + hint)
    except click.ClickException as exc:
        fail(prog, exc.format_message().replace("\n", " "))
    except BuildError as exc:
        fail(prog, str(exc), exc.exit_code)
    except OSError as exc:
        fail(prog, f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 1)
