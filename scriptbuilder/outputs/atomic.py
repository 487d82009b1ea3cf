"""Writing generated files: each to a temporary file in the same folder (``.<name>.<pid>.tmp``),
flushed and renamed over the old one, so a reader sees the earlier file or the new one, never half
of one.

Whatever writes into a work_dir (a build, the lifecycle's run.json) holds an exclusive ``fcntl``
lock on ``<work_dir>/.scriptbuilder.lock`` (an empty file, kept) while it writes there, so under
the lock every temporary file is a killed writer's: a build removes them all.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
from collections.abc import Iterator

from scriptbuilder.errors import BuildError

LOCK_NAME = ".scriptbuilder.lock"
_TEMP = re.compile(r"\..+\.\d+\.tmp\Z")


def _temp(path: str) -> str:
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.{os.getpid()}.tmp")


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def stage(path: str, data: str | bytes, mode: int = 0o644) -> str:
    """Write ``data`` (text as UTF-8) to the temporary file of ``path``, flushed to
    disk; returns its name (removed again when writing fails)."""
    tmp = _temp(path)
    try:
        with open(tmp, "wb") as file:
            os.fchmod(file.fileno(), mode)
            file.write(data.encode("utf-8") if isinstance(data, str) else data)
            file.flush()
            os.fsync(file.fileno())
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def write_atomic(path: str | os.PathLike[str], data: str | bytes, mode: int = 0o644) -> None:
    """Write ``path`` whole through its temporary file; on failure it is unchanged."""
    tmp = stage(os.fspath(path), data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def _take(work_dir: str) -> int:
    """``work_dir``'s lock, held (the file descriptor to close)."""
    fd = os.open(os.path.join(work_dir, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def locked(work_dir: str | os.PathLike[str]) -> Iterator[None]:
    """Hold ``work_dir``'s lock for the block (writers other than a build)."""
    fd = _take(os.fspath(work_dir))
    try:
        yield
    finally:
        os.close(fd)


def lock(work_dir: str) -> int:
    """Take ``work_dir``'s build lock, then remove the temporary files killed writers
    left; returns the lock file to close."""
    fd = _take(work_dir)
    try:
        for entry in os.listdir(work_dir):
            if _TEMP.match(entry):
                _unlink(os.path.join(work_dir, entry))
    except BaseException:
        os.close(fd)
        raise
    return fd


class WriteError(BuildError, OSError):
    """An OS error while writing, as one line naming the file, the folder and the
    fix. Exit status 2 when the chosen folder cannot be used, else 1."""

    exit_code = 1


_UNUSABLE = {errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST}
_UNUSABLE |= {errno.EACCES, errno.EPERM, errno.EROFS}
_FIXES = {errno.ENOSPC: "free space", errno.EDQUOT: "free space", errno.ENOENT: "create {}"}
_FIXES.update(dict.fromkeys((errno.EACCES, errno.EPERM, errno.EROFS), "make {} writable"))


def write_error(exc: OSError, what: str, label: str, folder: str, fix: str = "") -> WriteError:
    """``cannot <what> <label> <folder>: <reason>; <fix> or choose another <label>``."""
    fix = fix or _FIXES.get(exc.errno or 0, "check {}").format(folder)
    reason = exc.strerror or str(exc)
    error = WriteError(f"cannot {what} {label} {folder}: {reason}; {fix} or choose another {label}")
    error.errno, error.exit_code = exc.errno, 2 if exc.errno in _UNUSABLE else 1
    return error


class Publication:
    """The files of one build, each staged to its temporary file; renamed into
    place in that order by :func:`publishing`."""

    def __init__(self) -> None:
        self.staged: list[tuple[str, str]] = []  # (temporary file, path)
        self.name = LOCK_NAME  # what is being written, for an error

    def stage(self, path: str, data: str | bytes, mode: int) -> None:
        self.name = os.path.basename(path)
        self.staged.append((stage(path, data, mode), path))

    def reserve(self, path: str) -> str:
        """The temporary file of ``path``, for another program to write."""
        self.name = os.path.basename(path)
        self.staged.append((_temp(path), path))
        return self.staged[-1][0]


@contextlib.contextmanager
def publishing(work_dir: str) -> Iterator[Publication]:
    """Create ``work_dir`` and hold its lock while the block stages files, then
    rename them into place. When the block fails nothing is renamed; no
    temporary file is left. An OS error becomes a :class:`WriteError`."""
    try:
        os.mkdir(work_dir, 0o755)
    except FileExistsError:
        pass
    except OSError as exc:
        parent = os.path.dirname(work_dir)
        fix = {errno.ENOENT: f"create {parent}", errno.ENOTDIR: f"make {parent} a folder"}
        raise write_error(
            exc, "create", "work_dir", work_dir, fix.get(exc.errno or 0, "")
        ) from None
    files = Publication()
    try:
        fd = lock(work_dir)
        try:
            yield files
            for tmp, path in files.staged:
                files.name = os.path.basename(path)
                os.replace(tmp, path)
            folder = os.open(work_dir, os.O_RDONLY)  # the renames, on disk too
            os.fsync(folder)
            os.close(folder)
        finally:
            os.close(fd)
    except OSError as exc:
        raise write_error(exc, f"write {files.name} into", "work_dir", work_dir) from None
    finally:
        for tmp, _ in files.staged:
            _unlink(tmp)
