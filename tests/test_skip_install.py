"""``skip_install: true`` leaves out the install step of every workflow and scenario
(the default still installs first), ``--explain`` names the reason, and the request's
``job_name`` names the Slurm job; both checked on the real Slurm.

Snapshots: tests/snapshots/test_skip_install/ (``--snapshot-update`` rewrites them).
"""

from __future__ import annotations

import json
import platform
import shutil
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from scriptbuilder.scenarios.registry import SCENARIOS as SCENARIO_REGISTRY
from scriptbuilder.workflows import registry
from tests.build_env import BuildEnv, make_build_env
from tests.orchestrator_env import SCENARIOS as ORCHESTRATOR_SCENARIOS
from tests.orchestrator_env import fake_ssh, orchestrator_request
from tests.script_runner import check_syntax
from tests.slurm_cluster.cluster import SlurmCluster
from tests.test_build_perf import AGGR, SERVER
from tests.test_build_stops import run_cli
from tests.test_slurm_jobs import cluster_slurm_env, explain, split_records

WORKFLOWS = list(registry.WORKFLOWS)
SCENARIOS = list(SCENARIO_REGISTRY)
INSTALL = "pip install -e ."


@pytest.mark.parametrize("scenario", ["local_slurm", "local_docker"])
@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_skip_install_snapshot(
    build_env: BuildEnv, script_snapshot: SnapshotAssertion, workflow: str, scenario: str
) -> None:
    request = build_env.request(workflow, execution_scenario=scenario, skip_install=True)
    job = build_env.build(request)
    job.write()
    check_syntax(build_env.work_dir / job.script_name)
    assert INSTALL not in job.script_text
    assert build_env.scrub(job.script_text) == script_snapshot


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("workflow", WORKFLOWS)
@pytest.mark.parametrize("skip", [None, False, True], ids=["absent", "false", "true"])
def test_skip_install_removes_only_the_install_step(
    build_env: BuildEnv, workflow: str, scenario: str, skip: bool | None
) -> None:
    fields = {} if skip is None else {"skip_install": skip}
    default = build_env.build(build_env.request(workflow, execution_scenario=scenario))
    job = build_env.build(build_env.request(workflow, execution_scenario=scenario, **fields))
    choice = next(c for c in job.trace.choices if c.field == "install step")
    if not skip:
        assert job.script_text == default.script_text
        assert INSTALL in job.script_text
        assert choice.rule == "default (skip_install not true)"
        return
    assert INSTALL not in job.script_text
    assert "requirements-dev.txt" not in job.script_text
    assert "install the project" not in job.script_text
    assert (choice.value, choice.rule) == ("left out", "skip_install: true")
    assert job.job_spec_data["skip_install"] is True
    # the workload steps are those of the default script
    step_lines = [line for line in default.script_text.splitlines() if line.startswith("# ")]
    kept = [line for line in step_lines if line != "# install the project"]
    assert [line for line in job.script_text.splitlines() if line.startswith("# ")] == kept


@pytest.mark.parametrize("scenario", ORCHESTRATOR_SCENARIOS)
def test_skip_install_from_the_orchestrator(build_env: BuildEnv, scenario: str) -> None:
    request = {**orchestrator_request(build_env, scenario, "pytest"), "skip_install": True}
    job = build_env.build(request, ssh=fake_ssh([]))
    assert INSTALL not in job.script_text
    assert job.job_spec_data["skip_install"] is True


def test_explain_names_the_reason(build_env: BuildEnv, tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(build_env.request("eval", skip_install=True)))
    code, out, err = run_cli(["build", "--dry-run", "--explain", str(path)])
    assert code == 0, err
    (line,) = [line for line in out.splitlines() if line.lstrip().startswith("install step")]
    assert line.split() == ["install", "step", "left", "out", "<-", "skip_install:", "true"]


def test_perf_path_says_submit_py_still_installs(build_env: BuildEnv) -> None:
    """submit.py (the perf-sanity path) always runs its own install script."""
    local = build_env.root / AGGR.name
    shutil.copy(AGGR, local)
    request = build_env.request(
        "benchmark", perf_config_yaml=str(local), perf_test_name=SERVER, model_name="demo"
    )
    job = build_env.build({**request, "skip_install": True})
    (warning,) = [w for w in job.warnings if "skip_install" in w]
    assert "submit.py has no option to leave out its install step" in warning
    assert warning in job.job_spec_data["warnings"]
    assert not any("skip_install" in w for w in build_env.build(request).warnings)


@pytest.mark.parametrize(
    ("job_name", "message"),
    [
        ("a,b", "request field 'job_name': holds a comma, which squeue --name would read"),
        ("", "request field 'job_name': must not be blank"),
        ("  ", "request field 'job_name': must not be blank"),
        ("a\tb", "request field 'job_name': holds a control character"),
        ("a\x1b[1mb", "request field 'job_name': holds a control character"),
        ("a\nb", "request field 'job_name': holds a newline"),
        ("a\rb", "request field 'job_name': holds a carriage return"),
        ("a\x00b", "request field 'job_name': holds a NUL character"),
    ],
)
def test_job_name_is_checked(build_env: BuildEnv, job_name: str, message: str) -> None:
    from scriptbuilder.errors import BuildError

    with pytest.raises(BuildError) as err:
        build_env.build(build_env.request("pytest", job_name=job_name))
    assert message in str(err.value)


@pytest.mark.parametrize("scenario", ["local_slurm", "remote_slurm"])
@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_job_name_is_the_slurm_job_name(build_env: BuildEnv, workflow: str, scenario: str) -> None:
    default = build_env.build(build_env.request(workflow, execution_scenario=scenario))
    name = "team run's #1 ünï"
    job = build_env.build(build_env.request(workflow, execution_scenario=scenario, job_name=name))
    spec, old = job.job_spec_data, default.job_spec_data
    assert spec["job_name"] == name
    assert f'#SBATCH --job-name="{name}"\n' in job.script_text
    assert job.script_text.replace(f'"{name}"', old["job_name"]) == default.script_text
    assert spec["log_file_pattern"] == old["log_file_pattern"] == f"{old['job_name']}_%j.out"
    assert not any("job_name" in w for w in job.warnings)


# ----- on the real Slurm -------------------------------------------------------------------


@pytest.mark.slurm
def test_skip_install_job_runs_on_slurm_under_its_job_name(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """No pip step runs, the tests still run (in a container of their own), and
    ``squeue --name`` finds the job under the request's job_name."""
    env = make_build_env(tmp_path)
    env.slurm_env(**cluster_slurm_env(slurm_cluster))
    home = tmp_path / "home"
    home.mkdir()
    job_name = "sb check it's #1"
    request = env.request(
        "pytest",
        partition=slurm_cluster.partitions["gpu"],
        models_path=str(tmp_path),
        skip_install=True,
        job_name=job_name,
    )
    built = env.build(request, environ={"HOME": str(home)}, machine=platform.machine)
    built.write()
    spec = json.loads((env.work_dir / "job_spec.json").read_text())
    script = Path(spec["script_path"])
    result = slurm_cluster.submit(script, env_extra={"HOME": str(home)}, timeout=180)
    assert result.ok, explain(result, script)
    assert result.info["JobName"] == job_name == spec["job_name"]
    found = slurm_cluster.run("squeue", "-h", "-t", "all", f"--name={job_name}", "-o", "%i|%j")
    assert found.stdout.splitlines() == [f"{result.job_id}|{job_name}"], found
    log = env.work_dir / spec["log_file_pattern"].replace("%j", str(result.job_id))
    assert result.stdout_path == log and log.is_file(), explain(result)
    pip, _, program = split_records(result, "pytest", "pytest")
    assert pip == [], explain(result, script)
    assert len(program) == 1, explain(result, script)
    steps = [s for s in result.steps if s["event"] == "task"]
    assert len(steps) == 1, explain(result)
    assert steps[0]["container_name"] == spec["container_name"]
    assert steps[0]["container_name_reused"] is False, explain(result)
