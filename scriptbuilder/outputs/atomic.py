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

A build knows whether the one before it was interrupted: the lock file holds
one byte, ``1`` from before a build changes anything until its last step
(after the earlier generation's folder is emptied), then ``0``. A build that
does not find ``0`` (``1`` is left by a build that was killed or failed; a new
lock file, or one of an earlier version, is empty), or finds no current
generation, searches ``work_dir`` and ``.scriptbuilder`` for leftovers before
it writes. Otherwise the folder not in use is empty and every link shows a
file, as the build before left them; the only links the switch can leave
showing nothing are then those named by the earlier generation's files, which
the build checks one by one instead of reading all of ``work_dir``.

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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator


def _write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to the open file ``fd`` (``os.write`` may write less)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_atomic(path: str | os.PathLike[str], text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder,
    renamed into place (``O_EXCL`` keeps two writers off the same name)."""
    target = os.fspath(path)
    folder, name = os.path.split(target)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    data = text.encode("utf-8")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


STATE_DIR = ".scriptbuilder"
LOCK_NAME = "lock"
CURRENT = "current"
#: What the lock file holds while a build writes, and once it is done.
BUSY, DONE = b"1", b"0"
_GEN = re.compile(r"gen-(\d+)\Z")
#: The two generation folders: a build writes into the one not in use.
SLOTS = ("gen-1", "gen-2")
#: What the links in ``work_dir`` point to, before the file name.
_LINK_PREFIX = f"{STATE_DIR}/{CURRENT}/"
#: Temporary names this module and :mod:`scriptbuilder.outputs.atomic` create:
#: ``.<name>.<pid>.tmp``.
_TEMP = re.compile(r"\..+\.(\d+)\.tmp\Z")


def _rmtree(path: str, ignore_errors: bool = True) -> None:
    import shutil  # not at import: the drop-in CLI imports this module on every call

    shutil.rmtree(path, ignore_errors=ignore_errors)


def _remove(folder: str, entries: list[str]) -> None:
    """Remove ``entries`` (files, or folders a foreign tool put there) from ``folder``."""
    for entry in entries:
        path = f"{folder}/{entry}"
        try:
            os.unlink(path)
        except IsADirectoryError:
            _rmtree(path)
        except FileNotFoundError:
            pass


def _empty(folder: str) -> None:
    """Remove the files in ``folder`` and keep the folder (removing a folder costs
    far more than removing its files on some file systems)."""
    try:
        entries = os.listdir(folder)
    except FileNotFoundError:
        return
    _remove(folder, entries)


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


def _is_link_to_nothing(path: str) -> bool:
    """True when ``path`` is a link into ``current`` that shows no file."""
    try:
        target = os.readlink(path)
    except OSError:
        return False
    return target.startswith(_LINK_PREFIX) and not os.path.exists(path)


def _is_stale_temp(entry: str, path: str) -> bool:
    """True when ``entry`` (at ``path``) is a temporary file or link of a process
    that is gone."""
    match = _TEMP.match(entry)
    if match is None or _pid_alive(int(match[1])):
        return False
    return os.path.islink(path) or os.path.isfile(path)


class Generation:
    """One build's files, written into the free generation folder, then published."""

    def __init__(self, work_dir: str) -> None:
        self.work_dir = os.path.normpath(work_dir)
        #: ``work_dir`` and a slash: the start of every path in it.
        self.prefix = os.path.join(self.work_dir, "")
        self.state = self.prefix + STATE_DIR
        self.current = f"{self.state}/{CURRENT}"
        self.pid = os.getpid()
        self.names: list[str] = []
        #: The free slot this build writes into, and the generation in use before it.
        self.folder = ""
        self.previous: str | None = None
        #: True when the build before was interrupted (or there was none): every
        #: step searches for leftovers instead of trusting what the last build left.
        self.thorough = False
        #: The open lock file (see :func:`generation`).
        self.lock = -1
        #: Set by the switch: from then on the files written are what readers see.
        self.published = False

    # ------------------------------------------------------------------ setup

    def _current_gen(self) -> str | None:
        try:
            target = os.readlink(self.current)
        except OSError:
            return None
        return target if _GEN.match(target) and os.path.isdir(self._gen(target)) else None

    def _gen(self, name: str) -> str:
        return f"{self.state}/{name}"

    def _link(self, target: str, path: str) -> None:
        """Make ``path`` a symbolic link to ``target`` in one rename."""
        folder, name = os.path.split(path)
        tmp = f"{folder}/.{name}.{self.pid}.tmp"
        try:
            os.symlink(target, tmp)
        except FileExistsError:  # left by a killed process that had this pid
            os.unlink(tmp)
            os.symlink(target, tmp)
        os.replace(tmp, path)

    def _remove_stale(self) -> None:
        """Remove what interrupted builds left: files of the slot not in use,
        other folders, temporary files, links that show nothing."""
        keep = self.previous
        for entry in os.listdir(self.state):
            path = self._gen(entry)
            if entry in SLOTS and entry != keep:
                _empty(path)
            elif _GEN.match(entry) and entry != keep:
                _rmtree(path, ignore_errors=True)
            elif (match := _TEMP.match(entry)) and not _pid_alive(int(match[1])):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        for entry in os.listdir(self.work_dir):
            path = self.prefix + entry
            if _is_link_to_nothing(path) or _is_stale_temp(entry, path):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)

    def _make_slot(self, name: str) -> None:
        with contextlib.suppress(FileExistsError):
            os.mkdir(self._gen(name), 0o755)

    def _free_slot(self, taken: str | None) -> str:
        """The generation folder that is not ``taken``, empty (created when missing)."""
        name = SLOTS[1] if taken == SLOTS[0] else SLOTS[0]
        try:
            os.mkdir(self._gen(name), 0o755)
        except FileExistsError:
            _empty(self._gen(name))
        return name

    def open(self, lock: int) -> None:
        """Choose the free slot, after removing leftovers when the build before
        did not finish; ``lock`` is the lock file, held."""
        self.lock = lock
        if os.pread(lock, 1, 0) != DONE:  # the build before did not finish
            self.thorough = True
        os.pwrite(lock, BUSY, 0)
        self.previous = self._current_gen()
        if self.previous not in SLOTS:  # no build yet, or an unknown layout
            self.thorough = True
        if self.thorough:
            self._remove_stale()
            for slot in SLOTS:  # so that later builds find both
                self._make_slot(slot)
        # the free slot is empty: emptied above, or by the build before
        self.folder = SLOTS[1] if self.previous == SLOTS[0] else SLOTS[0]

    # ---------------------------------------------------------------- writing

    def name_of(self, path: str) -> str | None:
        """The file name when ``path`` is directly in ``work_dir`` (so part of the
        generation), else None."""
        folder, name = os.path.split(os.path.normpath(path))
        if folder == self.work_dir and name not in ("", STATE_DIR, ".", ".."):
            return name
        return None

    def owns(self, path: str) -> bool:
        """True when ``path`` is a file directly in ``work_dir`` (so part of the generation)."""
        return self.name_of(path) is not None

    def path_for(self, path: str) -> str:
        """Where another program writes the file shown at ``path`` in this
        generation (the folder is there)."""
        name = os.path.basename(os.path.normpath(path))
        if name not in self.names:
            self.names.append(name)
        self._make_slot(self.folder)
        return self._gen(self.folder) + "/" + name

    def write(self, name: str, text: str, mode: int) -> None:
        """Write the file shown at ``<work_dir>/<name>`` (see :meth:`name_of`).

        The free slot is empty, so the file is a new one: never one truncated and
        written again, which ext4 flushes to disk when it is closed (auto_da_alloc),
        costing twenty times the write."""
        if name not in self.names:
            self.names.append(name)
        target = f"{self.state}/{self.folder}/{name}"
        data = text.encode("utf-8")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        try:
            fd = os.open(target, flags, 0o600)
        except FileNotFoundError:  # the free slot is missing (removed by another tool)
            self._make_slot(self.folder)
            fd = os.open(target, flags, 0o600)
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)

    # ------------------------------------------------------------- publishing

    def _adopt(self, name: str, current: str | None) -> str | None:
        """Make ``<work_dir>/<name>`` the link into ``current`` without changing what
        it shows; returns the current generation (created for a regular file)."""
        path = self.prefix + name
        link = _LINK_PREFIX + name
        try:
            if os.readlink(path) == link:
                return current
        except FileNotFoundError:
            # nothing shown yet: shows the new file after the switch
            try:
                os.symlink(link, path)
            except FileExistsError:  # made meanwhile by another tool
                return self._adopt(name, current)
            return current
        except OSError:
            pass  # a regular file (or a folder, left alone below)
        if not os.path.isfile(path):
            return current
        if current is None:
            current = self._free_slot(self.folder)
            self._link(current, self.current)
        folder = self._gen(current)
        tmp = f"{folder}/.{name}.{self.pid}.tmp"
        _copy(path, tmp)
        os.replace(tmp, f"{folder}/{name}")
        self._link(link, path)
        return current

    def _retire(self, earlier: str) -> None:
        """After the switch: remove the links only ``earlier`` had files for (they
        show nothing now), then its files."""
        folder = self._gen(earlier)
        try:
            entries = os.listdir(folder)
        except FileNotFoundError:
            entries = []
        for entry in entries:
            if entry not in self.names:
                path = self.prefix + entry
                if _is_link_to_nothing(path):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
        if earlier in SLOTS:
            _remove(folder, entries)
        else:  # a folder of an earlier layout
            _rmtree(folder)

    def commit(self) -> None:
        """Publish the generation: every documented path shows its file at once."""
        current = self.previous
        for name in self.names:
            current = self._adopt(name, current)
        self._link(self.folder, self.current)  # the switch
        self.published = True
        if current is not None and current != self.folder:
            self._retire(current)
        os.pwrite(self.lock, DONE, 0)  # the next build can trust what this one left

    def abort(self) -> None:
        """Remove the files written unless they are published; the lock file keeps
        saying busy, so the next build searches for what else this one left."""
        if self.folder and not self.published:
            _empty(self._gen(self.folder))


@contextlib.contextmanager
def generation(work_dir: str) -> Iterator[Generation]:
    """Hold ``work_dir``'s build lock and open a fresh generation; the caller
    writes into it and calls :meth:`Generation.commit`. Nothing is published when
    the block raises (the files written are removed)."""
    gen = Generation(work_dir)
    lock = os.path.join(gen.state, LOCK_NAME)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:  # the first build: make .scriptbuilder (and work_dir)
        os.makedirs(gen.state, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        gen.open(fd)
        try:
            yield gen
        except BaseException:
            gen.abort()
            raise
    finally:
        os.close(fd)
