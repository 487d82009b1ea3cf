"""The Python API: ``build(request) -> BuiltJob``, pure until ``BuiltJob.write()``.

A build follows the procedure: the request and its context (slurm_env, an earlier
job_spec.json), the image (Step 1), the mounts (Step 2), the Slurm parameters, the
route (:mod:`.job.route`), then the job on it (:mod:`.job.assemble`).
"""

from __future__ import annotations

import contextlib
import copy
import os
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cache, partial
from typing import Any

from scriptbuilder.campaign.build import BuiltCampaign
from scriptbuilder.campaign.build import build_campaign as _build_campaign
from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.earlier_job_spec import JOB_SPEC, read_earlier_job_spec
from scriptbuilder.inputs.remote_home import Runner
from scriptbuilder.inputs.slurm_env import load_slurm_env
from scriptbuilder.inputs.tests.testdb import StageReader, read_stages
from scriptbuilder.job.assemble import assemble
from scriptbuilder.job.route import choose_route
from scriptbuilder.lifecycle.ssh import SshTransport
from scriptbuilder.lifecycle.transport import TransportError
from scriptbuilder.models.messages import validated
from scriptbuilder.models.request import BuildRequest
from scriptbuilder.models.slurm_env import SlurmEnv
from scriptbuilder.outputs.built_job import BuiltJob, OutputFile, SubmitRun
from scriptbuilder.resolution.context import Context, EnvInfo
from scriptbuilder.resolution.mounts import resolve_mounts
from scriptbuilder.scenarios.base import SlurmEnvReader
from scriptbuilder.scenarios.registry import request_scenario
from scriptbuilder.workflows.registry import check_commands

__all__ = ["BuiltJob", "OutputFile", "SubmitRun", "SweepResult", "build", "build_many"]
__all__ += ["BuiltCampaign", "build_campaign", "load_request", "sweep_readers"]


def load_request(data: Mapping[str, Any] | BuildRequest) -> BuildRequest:
    """``data`` checked by the request model (one-line :class:`BuildError` messages)."""
    if isinstance(data, BuildRequest):
        return data
    if not isinstance(data, Mapping):
        raise BuildError(
            f"a request must be a mapping of field names to values, got {type(data).__name__}"
        )
    return validated(BuildRequest, dict(data), "request field", "fix its value")


@contextlib.contextmanager
def _stops_the_build() -> Iterator[None]:
    try:
        yield
    except TransportError as exc:
        raise BuildError(str(exc)) from None


class _LoginNode(SshTransport):
    """The login node as a remote perf-sanity build reaches it (submit.py runs there):
    ssh's failures stop the build with their one line."""

    def run(
        self, argv: Sequence[str], *, stdin: bytes | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[bytes]:
        with _stops_the_build():
            return super().run(argv, stdin=stdin, timeout=timeout)

    def read_head(self, path: str, max_bytes: int) -> bytes | None:
        with _stops_the_build():
            return super().read_head(path, max_bytes)

    def write_file(self, path: str, data: bytes, mode: int) -> None:
        with _stops_the_build():
            super().write_file(path, data, mode)


def build(
    request: Mapping[str, Any] | BuildRequest,
    *,
    environ: Mapping[str, str] | None = None,
    machine: Callable[[], str] | None = None,
    env_info: EnvInfo | None = None,
    clock: Callable[[], datetime] | None = None,
    ssh: Runner | None = None,
    ssh_options: Sequence[str] = (),
    control_path: str | None = None,
    read_slurm_env: SlurmEnvReader = load_slurm_env,
    read_test_stages: StageReader = read_stages,
) -> BuiltJob:
    """Resolve ``request`` into a script, a job spec and a report; reads input files but
    writes nothing. ``ssh`` asks the remote home (:mod:`.inputs.remote_home`); the readers
    read slurm_env.json and a checkout's test-db lists (build_many reads each once).
    ``ssh_options`` (``KEY=VALUE``) and ``control_path`` are how ``write()`` reaches the
    login node of a remote perf-sanity build, whose submit.py runs there."""
    req = load_request(request)
    if req.is_campaign:
        raise BuildError(
            "test_list/test_db: this request is a campaign of jobs; build it with "
            "build_campaign (scriptbuilder build does)"
        )
    environ = os.environ if environ is None else environ
    ctx = Context(req, env_info=env_info, environ=environ, read_test_stages=read_test_stages)
    ctx.machine, ctx.clock, ctx.ssh = machine or ctx.machine, clock or ctx.clock, ssh or ctx.ssh
    if not req.work_dir.startswith("/"):
        raise BuildError(
            f"work_dir must be an absolute path, got {req.work_dir!r}; pass an absolute path"
        )
    scenario = request_scenario(req)
    # Paths from an earlier <work_dir>/job_spec.json when the request has none.
    if (found := read_earlier_job_spec(req.work_dir)) is not None:
        earlier, ctx.earlier_job_spec = found
        update: dict[str, str] = {}
        for name in scenario.from_earlier:
            given, stored = getattr(req, name), getattr(earlier, name)
            if given and stored:
                ctx.trace.chose(name, given, f"{name} input (wins over {JOB_SPEC} {stored})")
            elif stored:
                update[name] = ctx.trace.chose(name, stored, f"<work_dir>/{JOB_SPEC}")
        if update:
            ctx.request = req = req.model_copy(update=update)
    scenario.check_request(ctx)
    check_commands(req)
    scenario.load_inputs(ctx, read_slurm_env)
    image = scenario.image(ctx)
    mounts = resolve_mounts(ctx, scenario.home, scenario.project)
    job = assemble(ctx, choose_route(ctx, scenario, image, mounts))
    if job.submit is None or (login := job.submit.login) is None:
        return job
    with _stops_the_build():
        node = _LoginNode(login.host, login.user, control_path, ssh_options)
    return replace(job, submit=replace(job.submit, node=node))


def build_campaign(
    request: Mapping[str, Any] | BuildRequest,
    *,
    environ: Mapping[str, str] | None = None,
    machine: Callable[[], str] | None = None,
    env_info: EnvInfo | None = None,
    clock: Callable[[], datetime] | None = None,
) -> BuiltCampaign:
    """The campaign of a ``test_list`` or ``test_db`` request (:mod:`.campaign`): one job
    per planned group of tests, each built by :func:`build`; writes nothing until
    ``BuiltCampaign.write()``. Each slurm_env.json and test-db list is read once."""
    req = load_request(request)
    if not req.is_campaign:
        raise BuildError("build_campaign needs test_list or test_db; pass one (or call build)")
    readers = sweep_readers()
    one = partial(build, environ=environ, machine=machine, env_info=env_info, clock=clock)
    return _build_campaign(req, partial(one, **readers), **readers)


@dataclass(frozen=True)
class SweepResult:
    """One request of :func:`build_many`: its job, or the error that refused it."""

    index: int  # the request's position in the input, from 0
    job: BuiltJob | None = None
    error: BuildError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def sweep_readers() -> dict[str, Any]:
    """:func:`build`'s readers for one sweep: each slurm_env.json and each checkout's
    test-db lists are read once; every job gets its own copy (the stages are frozen)."""
    read = cache(load_slurm_env)

    def slurm_env(path: str) -> tuple[SlurmEnv, dict[str, Any]]:
        env, raw = read(path)
        return env, copy.deepcopy(raw)

    return {"read_slurm_env": slurm_env, "read_test_stages": cache(read_stages)}


def build_many(
    requests: Iterable[Mapping[str, Any] | BuildRequest],
    *,
    environ: Mapping[str, str] | None = None,
    machine: Callable[[], str] | None = None,
    env_info: EnvInfo | None = None,
    clock: Callable[[], datetime] | None = None,
) -> list[SweepResult]:
    """:func:`build` for every request, in order, with this call's :func:`sweep_readers`;
    a refused request's result carries its :class:`BuildError` and the next is still
    built. Writes nothing."""
    readers = sweep_readers()  # this call's only
    one = partial(build, environ=environ, machine=machine, env_info=env_info, clock=clock)
    results = []
    for index, request in enumerate(requests):
        try:
            results.append(SweepResult(index, job=one(request, **readers)))
        except BuildError as exc:
            results.append(SweepResult(index, error=exc))
    return results
