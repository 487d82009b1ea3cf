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
from collections.abc import Iterator

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


def _stale(entry: str) -> bool:
    """True for a temporary file of a process that is gone (or of this one: under
    the lock, none of its own is in use)."""
    match = _TEMP.match(entry)
    if match is None or int(match[1]) == os.getpid():
        return match is not None
    try:
        os.kill(int(match[1]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's
        pass
    return False


def _plain_files(work_dir: str, state: str) -> None:
    """The earlier layout turned into plain files: every link into
    ``.scriptbuilder`` replaced by a copy of what it shows (removed when it shows
    nothing), then what that layout kept in ``.scriptbuilder`` removed, its
    ``current`` link last (so a build killed meanwhile is followed by one that
    does it again)."""
    import shutil  # only here: the drop-in imports this module on every call

    for entry in os.listdir(work_dir):
        path = os.path.join(work_dir, entry)
        if os.path.islink(path) and os.readlink(path).startswith(_OLD_STATE + "/"):
            try:
                with open(path, "rb") as file:
                    data, mode = file.read(), os.fstat(file.fileno()).st_mode & 0o7777
            except FileNotFoundError:
                _unlink(path)
            else:
                write_atomic(path, data, mode)
    for entry in os.listdir(state):
        if entry.startswith("gen-"):
            shutil.rmtree(os.path.join(state, entry), ignore_errors=True)
        elif entry == "lock" or _TEMP.match(entry):
            _unlink(os.path.join(state, entry))
    os.unlink(os.path.join(state, "current"))
    with contextlib.suppress(OSError):  # kept when another tool put files there
        os.rmdir(state)


def tidy(work_dir: str) -> None:
    """Remove temporary files of killed builds; take over the earlier layout."""
    state = os.path.join(work_dir, _OLD_STATE)
    if os.path.lexists(os.path.join(state, "current")):
        _plain_files(work_dir, state)
    for entry in os.listdir(work_dir):
        if _stale(entry):
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
_FIXES = {errno.ENOSPC: "free space", errno.EDQUOT: "free space", errno.ENOENT: "create {}"}
_FIXES.update(dict.fromkeys((errno.EACCES, errno.EPERM, errno.EROFS), "make {} writable"))


def write_error(exc: OSError, what: str, label: str, folder: str, fix: str = "") -> WriteError:
    """``cannot <what> <label> <folder>: <reason>; <fix> or choose another <label>``."""
    fix = fix or _FIXES.get(exc.errno or 0, "check {}").format(folder)
    reason = exc.strerror or str(exc)
    error = WriteError(f"cannot {what} {label} {folder}: {reason}; {fix} or choose another {label}")
    error.errno = exc.errno
    if exc.errno in _UNUSABLE:
        error.exit_code = 2
    return error


@contextlib.contextmanager
def publishing(work_dir: str) -> Iterator[Publication]:
    """Create ``work_dir`` (its parent must exist) and hold its lock while the
    block stages files (see :class:`Publication`); then rename them into place
    in the order staged. When the block fails nothing is renamed; either way no
    temporary file is left. An OS error becomes a :class:`WriteError` naming the
    file being written."""
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


class Publication:
    """The files of one build: each staged (written to its temporary file and
    flushed to disk) by :meth:`stage`, renamed into place by :func:`publishing`."""

    def __init__(self) -> None:
        self.staged: list[tuple[str, str]] = []  # (temporary file, path)
        #: What is being written (named by an error).
        self.name = LOCK_NAME

    def stage(self, path: str, data: str | bytes, mode: int) -> None:
        self.name = os.path.basename(path)
        self.staged.append((stage(path, data, mode), path))

    def reserve(self, path: str) -> str:
        """The temporary file of ``path``, for another program to write; renamed
        into place like a staged one."""
        self.name = os.path.basename(path)
        self.staged.append((temp_path(path), path))
        return self.staged[-1][0]
