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
