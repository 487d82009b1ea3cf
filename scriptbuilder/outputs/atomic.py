"""Writing generated files: each one whole, in place of the one before.

A file is written to a temporary file in the same folder
(``.<name>.<pid>.tmp``), flushed to disk and renamed over the old one, so a
reader sees the earlier file or the new one, never half of one. work_dir holds
plain files only.

Builds into one work_dir follow one another: each holds an exclusive ``fcntl``
lock on ``<work_dir>/.scriptbuilder.lock`` (an empty file, kept) while it
writes. Under the lock a build first removes the temporary files of builds that
were killed, and turns a work_dir of the earlier layout (symbolic links into
``.scriptbuilder/current``) into plain files holding what the links showed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re

from scriptbuilder.errors import BuildError

LOCK_NAME = ".scriptbuilder.lock"
#: Temporary files: ``.<name>.<pid>.tmp``.
_TEMP = re.compile(r"\..+\.(\d+)\.tmp\Z")
#: The earlier layout: links into ``.scriptbuilder/current``, generation folders.
_OLD_STATE = ".scriptbuilder"


def temp_path(path: str) -> str:
    """Where :func:`write_atomic` writes ``path`` before renaming it into place."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.{os.getpid()}.tmp")


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def stage(path: str, data: str | bytes, mode: int = 0o644) -> str:
    """Write ``data`` (text as UTF-8) to the temporary file of ``path`` and flush
    it to disk; returns its name (removed again when writing fails)."""
    tmp = temp_path(path)
    view = memoryview(data.encode("utf-8") if isinstance(data, str) else data)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def write_atomic(path: str | os.PathLike[str], data: str | bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder,
    flushed and renamed into place; on failure ``path`` is unchanged and the
    temporary file is gone."""
    target = os.fspath(path)
    tmp = stage(target, data, mode)
    try:
        os.replace(tmp, target)
    except BaseException:
        _unlink(tmp)
        raise


def sync_folder(folder: str) -> None:
    """Flush ``folder``'s entries (the renames into it) to disk."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():  # under the lock: none of this process's is in use
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _plain_files(work_dir: str, state: str) -> None:
    """The earlier layout turned into plain files: every link into
    ``.scriptbuilder`` replaced by a copy of what it shows (or removed when it
    shows nothing), then its generation folders, links and lock file removed."""
    for entry in os.listdir(work_dir):
        path = os.path.join(work_dir, entry)
        if not os.path.islink(path) or not os.readlink(path).startswith(_OLD_STATE + "/"):
            continue
        try:
            with open(path, "rb") as file:
                data, mode = file.read(), os.fstat(file.fileno()).st_mode & 0o7777
        except FileNotFoundError:
            _unlink(path)
        else:
            write_atomic(path, data, mode)
    import shutil  # only here: the drop-in imports this module on every call

    for entry in os.listdir(state):
        path = os.path.join(state, entry)
        if entry.startswith("gen-") and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif entry in ("current", "lock") or _TEMP.match(entry):
            _unlink(path)
    with contextlib.suppress(OSError):  # kept when another tool put files there
        os.rmdir(state)


def tidy(work_dir: str) -> None:
    """Remove temporary files of killed builds; take over the earlier layout."""
    state = os.path.join(work_dir, _OLD_STATE)
    if os.path.isdir(state):
        _plain_files(work_dir, state)
    for entry in os.listdir(work_dir):
        match = _TEMP.match(entry)
        if match is not None and not _pid_alive(int(match[1])):
            _unlink(os.path.join(work_dir, entry))


def lock(work_dir: str) -> int:
    """Take ``work_dir``'s build lock (``work_dir`` must exist), then :func:`tidy`;
    builds into one work_dir wait here for one another. Returns the lock file,
    to close when done."""
    fd = os.open(os.path.join(work_dir, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        tidy(work_dir)
    except BaseException:
        os.close(fd)
        raise
    return fd


class WriteError(BuildError, OSError):
    """An OS error while writing, as one line naming the file, the folder and the
    fix. Exit status 2 when the folder chosen cannot be used (missing, not
    writable), else 1 (a full disk, an I/O error)."""

    exit_code = 1


#: Errors of a folder the user chose that cannot be used.
_UNUSABLE = frozenset(
    getattr(errno, name)
    for name in ["ENOENT", "ENOTDIR", "EISDIR", "EEXIST", "EACCES", "EPERM", "EROFS"]
)


def write_error(exc: OSError, what: str, label: str, folder: str, fix: str = "") -> WriteError:
    """``cannot <what> <label> <folder>: <reason>; <fix> or choose another <label>``."""
    if not fix:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            fix = "free space"
        elif exc.errno in (errno.ENOENT, errno.ENOTDIR):
            fix = f"create {folder}"
        elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            fix = f"make {folder} writable"
        else:
            fix = f"check {folder}"
    reason = exc.strerror or str(exc)
    error = WriteError(f"cannot {what} {label} {folder}: {reason}; {fix} or choose another {label}")
    error.errno = exc.errno
    if exc.errno in _UNUSABLE:
        error.exit_code = 2
    return error
