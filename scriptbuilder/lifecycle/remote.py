"""remote_slurm: the build's files on the cluster, and where the job's logs will be.

:func:`upload` copies the script (``script_path``, to
``<remote_work_dir>/<script_name>``) and every ``extra_files`` entry (to
``<remote_work_dir>/<its name>``) through a transport, after ``mkdir -p`` of
``remote_work_dir``; every local file is read before anything is sent, so a
missing one stops the upload with nothing written. It returns the remote
script's path, for ``sbatch`` there (the script's ``--output`` and ``--error``
already point into ``remote_work_dir``).
"""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path

from scriptbuilder.lifecycle.errors import TransportError
from scriptbuilder.lifecycle.transport import Transport
from scriptbuilder.models.job_spec import JobSpec


def _field(job_spec: JobSpec, name: str) -> str:
    value = getattr(job_spec, name)
    if not isinstance(value, str) or not value:
        raise TransportError(
            f"job_spec.json has no {name}, which a remote_slurm submit needs; "
            "rebuild the job with remote_work_dir set (scriptbuilder build)"
        )
    return value


def _local(path: str, work_dir: Path) -> Path:
    """A path of job_spec.json on this machine (relative ones are in work_dir)."""
    given = Path(path)
    return given if given.is_absolute() else work_dir / given


def _read(path: Path, name: str) -> tuple[bytes, int]:
    try:
        return path.read_bytes(), stat.S_IMODE(os.stat(path).st_mode)
    except OSError as exc:
        raise TransportError(
            f"{name} {path}: {exc.strerror or exc}; rebuild the job (scriptbuilder build)"
        ) from None


def remote_script_path(job_spec: JobSpec) -> str:
    """``<remote_work_dir>/<script_name>``: where :func:`upload` puts the script."""
    remote_dir = _field(job_spec, "remote_work_dir")
    name = job_spec.script_name or posixpath.basename(_field(job_spec, "script_path"))
    return posixpath.join(remote_dir, name)


def upload(transport: Transport, job_spec: JobSpec, work_dir: Path) -> str:
    """Copy the script and ``extra_files`` into ``remote_work_dir``; the remote script path."""
    remote_dir = _field(job_spec, "remote_work_dir")
    target = remote_script_path(job_spec)
    files = [(target, *_read(_local(_field(job_spec, "script_path"), work_dir), "script_path"))]
    for extra in job_spec.extra_files:
        local = _local(extra, work_dir)
        files.append((posixpath.join(remote_dir, local.name), *_read(local, "extra_files entry")))
    made = transport.run(["mkdir", "-p", "--", remote_dir])
    if made.returncode != 0:
        said = made.stderr.decode(errors="replace").strip().splitlines()
        raise TransportError(
            f"{transport.describe()}: cannot create remote_work_dir {remote_dir} "
            f"({said[-1] if said else 'mkdir failed'}); set a writable remote_work_dir"
        )
    for path, data, mode in files:
        transport.write_file(path, data, mode)
    return target
