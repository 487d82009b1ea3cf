"""Writing generated files: atomically, so a reader never sees half a file."""

from __future__ import annotations

import contextlib
import os


def write_atomic(path: str | os.PathLike[str], text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder,
    renamed into place (``O_EXCL`` keeps two writers off the same name)."""
    target = os.fspath(path)
    folder, name = os.path.split(target)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_script(path: str | os.PathLike[str], text: str) -> None:
    """A generated script: mode 0755."""
    write_atomic(path, text, 0o755)
