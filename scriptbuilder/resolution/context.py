"""Everything resolution reads besides the request, injectable for tests."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from scriptbuilder.inputs.remote_home import Runner, run_ssh
from scriptbuilder.inputs.tests.testdb import StageReader, read_stages
from scriptbuilder.resolution.trace import Trace

if TYPE_CHECKING:
    from scriptbuilder.models.request import BuildRequest
    from scriptbuilder.models.slurm_env import SlurmEnv


class EnvInfo(Protocol):
    """The optional internal-env-info source. Each method returns None when unknown."""

    def arch(self, partition: str | None) -> str | None: ...

    def default_models_repo_host(self) -> str | None: ...


@dataclass
class Context:
    request: BuildRequest
    slurm_env: SlurmEnv | None = None
    slurm_env_raw: dict[str, Any] | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    machine: Callable[[], str] = field(default=lambda: os.uname().machine)
    env_info: EnvInfo | None = None
    clock: Callable[[], datetime] = datetime.now
    trace: Trace = field(default_factory=Trace)
    #: The job_spec.json that was in work_dir before the build (raw), if any.
    earlier_job_spec: dict[str, Any] | None = None
    #: Runs ssh for the remote home (``ssh HOST 'echo $HOME'``).
    ssh: Runner = run_ssh
    read_test_stages: StageReader = read_stages
