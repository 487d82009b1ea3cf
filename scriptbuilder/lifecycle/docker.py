"""local_docker: ``docker_cmd.sh`` run detached, its exit status kept.

The command runs under a wrapper in its own session (it outlives the caller):
``bash docker_cmd.sh > LOG 2>&1``, then the status is written to the exit file
(temporary name, then rename), so the container's status survives where
``... | tee LOG`` would keep tee's. Cancel is ``docker stop NAME`` with the
container's own ``--name`` (job_spec.json's ``job_name``, which for local_docker
is the container's name): no other container of the image is touched.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from scriptbuilder.lifecycle.errors import LifecycleError
from scriptbuilder.lifecycle.transport import Transport

_WRAPPER = 'bash "$1" > "$2" 2>&1; rc=$?; echo "$rc" > "$3.tmp"; mv -f "$3.tmp" "$3"'


def start(script: Path, log: Path, exit_file: Path, env: Mapping[str, str] | None) -> int:
    """Start the wrapper (see the module text); its pid."""
    exit_file.unlink(missing_ok=True)
    proc = subprocess.Popen(
        ["bash", "-c", _WRAPPER, "scriptbuilder-docker", str(script), str(log), str(exit_file)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=script.parent,
        env=env,
        start_new_session=True,
    )
    return proc.pid


def stop(transport: Transport, name: str) -> None:
    done = transport.run(["docker", "stop", name], timeout=120)
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise LifecycleError(f"docker stop {name} failed: {said[-1] if said else done.returncode}")
