"""Writing generated files: atomically, so a reader never sees half a file.

A build is written into ``work_dir`` as one generation, switched in by one rename.

A build's files (``job_spec.json``, the script, a copied run script) belong
together: an executor reading ``job_spec.json`` must find the script it names,
built from the same request. They are therefore never replaced one by one.
Each build writes its files into the one of two folders,
``<work_dir>/.scriptbuilder/gen-1`` and ``gen-2``, that is not in use (emptied
first); the documented paths
(``<work_dir>/job_spec.json``, ``<work_dir>/<script>``) are symbolic links to
``.scriptbuilder/current/<name>``, and ``.scriptbuilder/current`` is a
symbolic link to the generation in use. Publishing a build is one
``rename(2)`` of a new ``current`` link over the old one, which is atomic: at
every moment the documented paths show one whole generation, the earlier one
or the new one, whatever moment a build is killed.

Builds into one ``work_dir`` take an exclusive ``fcntl`` lock on
``.scriptbuilder/lock`` for the whole write, so they follow one another. Under
the lock, a build first removes what an interrupted build left behind (files
in the folder not in use, temporary links and files), and after its switch it
empties the earlier generation's folder.

A documented path that is a regular file (written before this layout, or
rewritten in place of the link by another tool) is first copied into the
current generation and then replaced by the link, so what a reader sees does
not change until the switch.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator


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


STATE_DIR = ".scriptbuilder"
LOCK_NAME = "lock"
CURRENT = "current"
_GEN = re.compile(r"gen-(\d+)\Z")
#: The two generation folders: a build writes into the one not in use.
SLOTS = ("gen-1", "gen-2")
#: Temporary names this module and :mod:`scriptbuilder.outputs.atomic` create:
#: ``.<name>.<pid>.tmp``.
_TEMP = re.compile(r"\..+\.(\d+)\.tmp\Z")


def _rmtree(path: str, ignore_errors: bool = True) -> None:
    import shutil  # not at import: the drop-in CLI imports this module on every call

    shutil.rmtree(path, ignore_errors=ignore_errors)


def _empty(folder: str) -> None:
    """Remove the files in ``folder`` and keep the folder (removing a folder costs
    far more than removing its files on some file systems)."""
    try:
        entries = os.listdir(folder)
    except FileNotFoundError:
        return
    for entry in entries:
        path = os.path.join(folder, entry)
        try:
            os.unlink(path)
        except IsADirectoryError:
            _rmtree(path)
        except FileNotFoundError:
            pass


def _copy(source: str, target: str) -> None:
    import shutil

    shutil.copy2(source, target)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _replace_with_link(target: str, path: str) -> None:
    """Make ``path`` a symbolic link to ``target`` in one rename."""
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, path)


class Generation:
    """One build's files, written into a fresh hidden folder, then published."""

    def __init__(self, work_dir: str) -> None:
        self.work_dir = os.path.normpath(work_dir)
        self.state = os.path.join(self.work_dir, STATE_DIR)
        self.current = os.path.join(self.state, CURRENT)
        self.names: list[str] = []
        self.folder = ""

    # ------------------------------------------------------------------ setup

    def _current_gen(self) -> str | None:
        try:
            target = os.readlink(self.current)
        except OSError:
            return None
        return target if _GEN.match(target) and os.path.isdir(self._gen(target)) else None

    def _gen(self, name: str) -> str:
        return os.path.join(self.state, name)

    def _remove_stale(self) -> None:
        """Remove what interrupted builds left: files of the slot not in use,
        other folders, temporary files."""
        keep = self._current_gen()
        for entry in os.listdir(self.state):
            path = self._gen(entry)
            if entry in SLOTS and entry != keep:
                _empty(path)
            elif _GEN.match(entry) and entry != keep:
                _rmtree(path, ignore_errors=True)
            elif (match := _TEMP.match(entry)) and not _pid_alive(int(match[1])):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        self._remove_dangling_links()
        for entry in os.listdir(self.work_dir):
            match = _TEMP.match(entry)
            if match and not _pid_alive(int(match[1])):
                path = os.path.join(self.work_dir, entry)
                if os.path.islink(path) or os.path.isfile(path):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)

    def _remove_dangling_links(self) -> None:
        """Remove links into ``current`` that show nothing: made by a build killed
        before its switch, or naming a file the current generation does not have."""
        prefix = os.path.join(STATE_DIR, CURRENT, "")
        for entry in os.listdir(self.work_dir):
            path = os.path.join(self.work_dir, entry)
            try:
                target = os.readlink(path)
            except OSError:
                continue
            if target.startswith(prefix) and not os.path.exists(path):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)

    def _free_slot(self, taken: str | None) -> str:
        """The generation folder that is not ``taken``, empty (created when missing)."""
        name = SLOTS[1] if taken == SLOTS[0] else SLOTS[0]
        path = self._gen(name)
        try:
            os.mkdir(path, 0o755)
        except FileExistsError:
            _empty(path)
        return name

    def open(self) -> None:
        self._remove_stale()
        self.folder = self._free_slot(self._current_gen())

    # ---------------------------------------------------------------- writing

    def owns(self, path: str) -> bool:
        """True when ``path`` is a file directly in ``work_dir`` (so part of the generation)."""
        folder, name = os.path.split(os.path.normpath(path))
        return folder == self.work_dir and name not in ("", STATE_DIR, ".", "..")

    def path_for(self, path: str) -> str:
        """Where the file shown at ``path`` is written in this generation."""
        name = os.path.basename(os.path.normpath(path))
        if name not in self.names:
            self.names.append(name)
        return os.path.join(self._gen(self.folder), name)

    def write(self, path: str, text: str, mode: int) -> None:
        target = self.path_for(path)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.chmod(target, mode)

    # ------------------------------------------------------------- publishing

    def _adopt(self, name: str, current: str | None) -> str | None:
        """Make ``<work_dir>/<name>`` the link into ``current`` without changing what
        it shows; returns the current generation (created for a regular file)."""
        path = os.path.join(self.work_dir, name)
        link = os.path.join(STATE_DIR, CURRENT, name)
        try:
            if os.readlink(path) == link:
                return current
        except FileNotFoundError:
            _replace_with_link(link, path)  # nothing shown yet: shows the new file after the switch
            return current
        except OSError:
            pass  # a regular file (or a folder, left alone below)
        if not os.path.isfile(path):
            return current
        if current is None:
            current = self._free_slot(self.folder)
            _replace_with_link(current, self.current)
        copy = os.path.join(self._gen(current), name)
        tmp = os.path.join(self._gen(current), f".{name}.{os.getpid()}.tmp")
        _copy(path, tmp)
        os.replace(tmp, copy)
        _replace_with_link(link, path)
        return current

    def commit(self) -> None:
        """Publish the generation: every documented path shows its file at once."""
        current = self._current_gen()
        for name in self.names:
            current = self._adopt(name, current)
        _replace_with_link(self.folder, self.current)  # the switch
        self._remove_dangling_links()  # files of earlier builds this one does not have
        if current is not None and current != self.folder:
            _empty(self._gen(current))  # the earlier generation's files

    def abort(self) -> None:
        if self.folder:
            _empty(self._gen(self.folder))


@contextlib.contextmanager
def generation(work_dir: str) -> Iterator[Generation]:
    """Hold ``work_dir``'s build lock and open a fresh generation; the caller
    writes into it and calls :meth:`Generation.commit`. Nothing is published when
    the block raises (the files written are removed)."""
    gen = Generation(work_dir)
    os.makedirs(gen.state, exist_ok=True)  # and work_dir
    fd = os.open(os.path.join(gen.state, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        gen.open()
        try:
            yield gen
        except BaseException:
            gen.abort()
            raise
    finally:
        os.close(fd)
