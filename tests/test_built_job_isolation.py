"""Nothing one build hands out is shared with the next: changing every mutable part
of a returned ``BuiltJob`` (nested values of ``job_spec_data`` included) changes
nothing in a later build of the same process."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel

import scriptbuilder
from scriptbuilder.api import BuiltJob
from tests.build_env import FIXED_CLOCK, REAL_FILES, BuildEnv

OPTIONS: dict[str, Any] = {
    "environ": {"HOME": "/home/alice"},
    "machine": lambda: "x86_64",
    "clock": lambda: FIXED_CLOCK,
}


def _mutate(value: Any, seen: set[int]) -> None:
    """Change, in place, every mutable object reachable from ``value``: dicts and
    lists get new items and lose their values, sets grow; the fields of models and
    dataclasses that can be assigned are assigned."""
    if id(value) in seen or isinstance(value, (str, bytes, int, float, type(None))):
        return
    seen.add(id(value))
    if isinstance(value, dict):
        for key in list(value):
            _mutate(value[key], seen)
            value[key] = "mutated"
        value["mutated"] = ["mutated"]
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _mutate(item, seen)
            value[i] = "mutated"
        value.append("mutated")
    elif isinstance(value, set):
        value.add("mutated")
    elif isinstance(value, tuple):
        for item in value:
            _mutate(item, seen)
    elif isinstance(value, BaseModel):
        for name in [*type(value).model_fields, *(value.model_extra or {})]:
            _mutate(getattr(value, name), seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _mutate(getattr(value, field.name), seen)


def _outputs(job: BuiltJob) -> str:
    """What a build produced, as text (so later changes to its objects do not reach it)."""
    submit = job.submit
    return repr(
        (
            job.script_text,
            job.job_spec_json,
            job.report,
            job.warnings,
            job.explanation,
            job.files,
            job.job_spec_data,
            job.request.model_dump(),
            (submit.argv, submit.inputs, str(submit.cwd)) if submit else None,
        )
    )


def _requests(build_env: BuildEnv) -> list[dict[str, Any]]:
    return [
        build_env.request("pytest"),
        build_env.request("custom", execution_scenario="remote_slurm"),
        build_env.request("eval", execution_scenario="local_docker"),
        build_env.request(
            "benchmark",
            perf_config_yaml=str(REAL_FILES / "gpt_oss_120b_fp4_blackwell.yaml"),
            perf_test_name="gpt_oss_fp4_tp2_mtp0_1k1k",
            model_name="demo",
        ),
    ]


@pytest.mark.parametrize("how", ["build", "build_many"])
def test_changing_a_built_job_changes_no_later_build(build_env: BuildEnv, how: str) -> None:
    requests = _requests(build_env)

    def jobs() -> list[BuiltJob]:
        if how == "build":
            return [build_env.build(request) for request in requests]
        results = scriptbuilder.build_many(requests, **OPTIONS)
        return [result.job for result in results if result.job is not None]

    expected = [_outputs(job) for job in jobs()]
    assert len(expected) == len(requests)
    changed, seen = jobs(), set[int]()
    for job in changed:
        _mutate(job, seen)
    assert changed[0].job_spec_data["slurm_env"] == "mutated"  # the change did happen
    assert [_outputs(job) for job in jobs()] == expected


def test_jobs_of_one_build_many_share_no_slurm_env(build_env: BuildEnv) -> None:
    """build_many reads a slurm_env.json its requests share once; each job still
    gets its own copy of it."""
    requests = _requests(build_env)[:2]
    first, second = (r.job for r in scriptbuilder.build_many(requests, **OPTIONS))
    assert first is not None and second is not None
    assert first.job_spec_data["slurm_env"] == second.job_spec_data["slurm_env"]
    before = repr(second.job_spec_data["slurm_env"])
    _mutate(first.job_spec_data["slurm_env"], set())
    assert repr(second.job_spec_data["slurm_env"]) == before
