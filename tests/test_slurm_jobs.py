"""Generated scripts run on a real one-node Slurm (tests/slurm_cluster).

The same checks as tests/test_compat_quoting.py, done with the real sbatch/srun and the
pyxis stand-in instead of a fake srun: every quoting-corpus command reaches its program
byte for byte, the install step runs first in the same named container, exit codes and
the closing line come back, pmix gives every rank its PMIX_RANK, single-task steps see no
MPI/PMI/SLURM variables, build-API scripts run, persistent mode (bash inside an salloc)
works, sbatch accepts every snapshot script, and a broken script is seen as broken.

Jobs are submitted in batches (one module-scoped fixture per section) and then waited
for one by one, so the node's CPUs stay busy and the file finishes in a few minutes.
"""

from __future__ import annotations

import json
import os
import platform
import posixpath
import re
import shlex
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.build_env import REAL_FILES, make_build_env
from tests.quoting_corpus import CORPUS, CORPUS_ENV, Case
from tests.script_runner import run_compat
from tests.slurm_cluster.cluster import JobResult, JobTimeout, SlurmCluster

pytestmark = pytest.mark.slurm

IMAGE = "nvcr.io#nvidia/pytorch:24.01-py3"
MODEL = "model"
# The pytest workflow runs record-argv on the quoting corpus: the stand-in pytest, like
# pytest, exits 4 for arguments that name no file or folder.
PROGRAM = {
    "pytest": "record-argv",
    "custom": "record-argv",
    "bench": "trtllm-bench",
    "eval": "trtllm-eval",
}
WORKFLOWS = list(PROGRAM)
COMMAND_FLAG = {
    "pytest": "--test-cmd",
    "custom": "--custom-cmd",
    "bench": "--bench-cmd",
    "eval": "--eval-cmd",
}
JOB_SUFFIX = {"pytest": "auto_test", "custom": "custom", "bench": "bench", "eval": "eval"}
PREP = "trtllm-bench --model m prepare-dataset --output /tmp/d.json token-norm-dist"
PREP_ARGV = shlex.split(PREP)[1:]
LAUNCHER = "trtllm-llmapi-launch"
KEPT_SLURM_VARS = frozenset({"SLURM_PROCID", "SLURM_LOCALID"})
EXIT_CODES = [0, 1, 3, 42]
BATCH_TIMEOUT = 600.0
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
SNAPSHOT_SCRIPTS = sorted(
    p
    for p in SNAPSHOTS.rglob("*.sh")
    if "docker_cmd" not in p.name
    and "local_docker" not in p.name
    and "#SBATCH" in p.read_text(encoding="utf-8")
)


# ----- generation --------------------------------------------------------------------------------


@dataclass
class Sandbox:
    """Real folders for one generated job: project (= workdir), logs, mount source."""

    root: Path

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @classmethod
    def make(cls, root: Path) -> Sandbox:
        box = cls(root)
        box.project.mkdir(parents=True, exist_ok=True)
        return box


def workload_command(subcommand: str, command: str) -> str:
    """The value of the workload flag: bench gets the prepare step in front."""
    return f"{PREP} && {command}" if subcommand == "bench" else command


def generate(
    box: Sandbox,
    subcommand: str,
    command: str,
    name: str,
    *extra: str,
    mounts: str | None = None,
    partition: str = "gpu",
) -> Path:
    """Write a drop-in CLI script for ``command`` to ``<root>/<name>.sh``; return its path."""
    script = box.root / f"{name}.sh"
    argv = [
        subcommand,
        "--model-name",
        MODEL,
        "--log-dir",
        str(box.logs),
        "--partition",
        partition,
        "--account",
        "acct",
        "--time-limit",
        "00:10:00",
        "--docker-image",
        IMAGE,
        "--container-mounts",
        mounts or f"{box.root}:{box.root}",
        "--project-path",
        str(box.project),
        COMMAND_FLAG[subcommand],
        workload_command(subcommand, command),
        "--output",
        str(script),
        *extra,
    ]
    outcome = run_compat(argv)
    assert outcome.exit_code == 0, f"build_slurm_script {shlex.join(argv)}:\n{outcome.stderr}"
    assert script.is_file(), outcome.stderr
    return script


# ----- batches -----------------------------------------------------------------------------------


@dataclass
class Submitted:
    script: Path
    record: Path
    job_id: int | None
    refusal: str | None


class JobBatch:
    """Submit many scripts at once (``sbatch --parsable``), then wait for each on demand."""

    def __init__(self, cluster: SlurmCluster, timeout: float = BATCH_TIMEOUT) -> None:
        self.cluster = cluster
        self.timeout = timeout
        self.deadline = 0.0
        self.jobs: dict[str, Submitted] = {}
        self._results: dict[str, JobResult] = {}

    def submit(
        self, key: str, script: Path, env_extra: Mapping[str, str | None] | None = None
    ) -> None:
        record = self.cluster.new_record_file(re.sub(r"[^A-Za-z0-9_-]", "_", key)[:80])
        env = {**(env_extra or {}), "STANDIN_RECORD": str(record)}
        done = self.cluster.run(
            "sbatch", "--parsable", str(script), env_extra=env, cwd=script.parent, timeout=60
        )
        if done.returncode != 0:
            refusal = f"sbatch exited {done.returncode}: {(done.stderr or done.stdout).strip()}"
            self.jobs[key] = Submitted(script, record, None, refusal)
        else:
            job_id = int(done.stdout.strip().splitlines()[-1].split(";")[0])
            self.jobs[key] = Submitted(script, record, job_id, None)
        self.deadline = time.monotonic() + self.timeout

    def result(self, key: str) -> JobResult:
        """The job's end state (waits for it); fails the test if sbatch refused it."""
        if key in self._results:
            return self._results[key]
        job = self.jobs[key]
        if job.job_id is None:
            pytest.fail(f"sbatch refused {job.script}: {job.refusal}\n{excerpt(job.script)}")
        remaining = max(30.0, self.deadline - time.monotonic())
        try:
            result = self.cluster.wait(job.job_id, timeout=remaining, record_file=job.record)
        except JobTimeout as exc:
            pytest.fail(f"{exc}\n{excerpt(job.script)}")
        self._results[key] = result
        return result


def selected(request: pytest.FixtureRequest, test_name: str) -> list[dict[str, Any]]:
    """Parameters of the collected items of ``test_name``: only those jobs are submitted
    (``-k`` or a node id then runs a handful of jobs instead of the whole batch)."""
    return [
        dict(item.callspec.params)
        for item in request.session.items
        if getattr(item, "originalname", None) == test_name and hasattr(item, "callspec")
    ]


def excerpt(script: Path, limit: int = 4000) -> str:
    try:
        return f"--- script {script}:\n{script.read_text()[-limit:]}"
    except OSError as exc:
        return f"<cannot read {script}: {exc}>"


def explain(result: JobResult, script: Path | None = None) -> str:
    """``result.describe()`` plus what the stand-in tools and the pyxis stand-in saw."""
    parts = [result.describe(), "--- tool records (tool, argv[1:], seq):"]
    for rec in result.tool_records():
        parts.append(f"  {rec['tool']} {rec['argv'][1:]!r} seq={rec['seq']}")
    parts.append("--- step records (event, step, rank, container_name, argv):")
    for step in result.steps:
        parts.append(
            f"  {step['event']} step={step['step_id']} rank={step.get('task_rank')} "
            f"name={step.get('container_name')} argv={step.get('argv')!r} "
            f"error={step.get('error')!r}"
        )
    if script is not None:
        parts.append(excerpt(script, 2500))
    return "\n".join(parts)


# ----- checks ------------------------------------------------------------------------------------


def directive(script_text: str, name: str) -> str:
    match = re.search(rf"(?m)^#SBATCH --{re.escape(name)}=(.*)$", script_text)
    assert match, f"no #SBATCH --{name}= line"
    return match.group(1).strip()


def sbatch_path(pattern: str, job_id: int) -> Path:
    """An #SBATCH --output/--error value with %j expanded (and %% unescaped)."""
    return Path(
        re.sub(r"%(.)", lambda m: str(job_id) if m.group(1) == "j" else m.group(1), pattern)
    )


def closing_line(result: JobResult, code: int, text: str | None = None) -> None:
    out = result.stdout() if text is None else text
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines, f"empty stdout\n{explain(result)}"
    pattern = rf"Job {result.job_id} finished at .+ with exit code {code}"
    assert re.fullmatch(pattern, lines[-1]), (
        f"last stdout line {lines[-1]!r} does not match {pattern!r}\n{explain(result)}"
    )


def check_logs(result: JobResult, script: Path) -> None:
    text = script.read_text()
    out = sbatch_path(directive(text, "output"), result.job_id)
    err = sbatch_path(directive(text, "error"), result.job_id)
    assert result.stdout_path == out, explain(result)
    assert result.stderr_path == err, explain(result)
    assert out.is_file(), f"{out} missing\n{explain(result)}"
    assert err.is_file(), f"{err} missing\n{explain(result)}"


def leaked_mpi_vars(env: Mapping[str, str]) -> list[str]:
    """MPI/PMI/SLURM variables a single-task step must not pass to the tool."""
    return sorted(
        name
        for name in env
        if name.startswith(("PMI", "OMPI_"))
        or (name.startswith("SLURM_") and name not in KEPT_SLURM_VARS)
    )


def assert_env_cleared(rec: dict[str, Any], result: JobResult) -> None:
    leaked = leaked_mpi_vars(rec["env"])
    assert leaked == [], (
        f"{rec['tool']} {rec['argv'][1:]!r} saw {leaked} in a single-task step\n{explain(result)}"
    )
    assert set(KEPT_SLURM_VARS) <= set(rec["env"]), explain(result)


def assert_argv(rec: dict[str, Any], expected: Sequence[str], result: JobResult) -> None:
    assert rec["argv"][1:] == list(expected), explain(result)
    got = [bytes.fromhex(h) for h in rec["argv_hex"][1:]]
    assert got == [os.fsencode(a) for a in expected], explain(result)


def split_records(
    result: JobResult, subcommand: str, tool: str | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(pip records, bench prepare records, workload records of ``tool``, by default
    the subcommand's program) in ``seq`` order."""
    records = sorted(result.tool_records(), key=lambda r: r["seq"])
    pip = [r for r in records if r["tool"] == "pip"]
    program = [r for r in records if r["tool"] == (tool or PROGRAM[subcommand])]
    prep: list[dict[str, Any]] = []
    if subcommand == "bench":
        prep = [r for r in program if "prepare-dataset" in r["argv"][1:]]
        program = [r for r in program if r not in prep]
    return pip, prep, program


def assert_install_first(
    result: JobResult, subcommand: str, container: str, tool: str | None = None
) -> None:
    """``pip install -e .`` ran before any workload, and every step shares the container."""
    pip, prep, program = split_records(result, subcommand, tool)
    assert pip, f"no pip record: the install step did not run\n{explain(result)}"
    assert pip[0]["argv"][1:] == ["install", "-e", "."], explain(result)
    later = [*prep, *program]
    assert later, explain(result)
    assert max(r["seq"] for r in pip) < min(r["seq"] for r in later), explain(result)
    steps = [s for s in result.steps if s["event"] == "task"]
    assert [s for s in result.steps if s["event"] != "task"] == [], explain(result)
    assert steps, explain(result)
    steps.sort(key=lambda s: (s["step_id"], s["task_rank"]))
    install = steps[0]
    assert install["argv"][:2] == ["bash", "-c"], explain(result)
    assert "pip install -e ." in install["argv"][2], explain(result)
    assert install["container_name_reused"] is False, explain(result)
    assert {s["container_name"] for s in steps} == {container}, explain(result)
    assert all(s["container_name_reused"] for s in steps[1:]), explain(result)
    assert len({s["step_id"] for s in steps}) == (3 if subcommand == "bench" else 2), explain(
        result
    )


# ----- 1. the full quoting corpus, every workflow ------------------------------------------------


def corpus_key(subcommand: str, case: Case) -> str:
    return f"corpus-{subcommand}-{case.id}"


@pytest.fixture(scope="module")
def corpus_jobs(
    slurm_cluster: SlurmCluster,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[tuple[JobBatch, Sandbox]]:
    box = Sandbox.make(tmp_path_factory.mktemp("corpus"))
    batch = JobBatch(slurm_cluster)
    for params in selected(request, "test_corpus_command_reaches_program_on_slurm"):
        subcommand, case = params["subcommand"], params["case"]
        key = corpus_key(subcommand, case)
        command = f"{PROGRAM[subcommand]} {case.tail}"
        script = generate(box, subcommand, command, key)
        batch.submit(key, script, env_extra=CORPUS_ENV)
    yield batch, box


@pytest.mark.parametrize("case", CORPUS, ids=[c.id for c in CORPUS])
@pytest.mark.parametrize("subcommand", WORKFLOWS)
def test_corpus_command_reaches_program_on_slurm(
    corpus_jobs: tuple[JobBatch, Sandbox], subcommand: str, case: Case
) -> None:
    batch, box = corpus_jobs
    key = corpus_key(subcommand, case)
    script = batch.jobs[key].script
    result = batch.result(key)
    assert result.state == "COMPLETED" and result.exit_code == 0, explain(result, script)
    check_logs(result, script)
    closing_line(result, 0)

    _, prep, program = split_records(result, subcommand)
    assert len(program) == 1, explain(result, script)
    (workload,) = program
    assert_argv(workload, case.argv, result)
    assert workload["env"]["HOME"] == CORPUS_ENV["HOME"], explain(result)
    assert workload["cwd"] == str(box.project), explain(result)
    if subcommand == "bench":
        assert len(prep) == 1, explain(result, script)
        assert_argv(prep[0], PREP_ARGV, result)
        assert_env_cleared(prep[0], result)
    if subcommand == "eval":  # eval runs with a pmix plugin, a single task included
        assert workload["env"].get("PMIX_RANK") == "0", explain(result)
    else:  # one task, no --mpi: the step clears MPI/PMI/SLURM variables (keeps PROCID/LOCALID)
        assert_env_cleared(workload, result)
    if subcommand == "custom":
        assert "0: Rank0 Custom command finished with exit code 0" in result.stdout(), explain(
            result
        )
    assert_install_first(result, subcommand, f"{MODEL}_{subcommand}")


# ----- 2. exit codes -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exit_code_jobs(
    slurm_cluster: SlurmCluster,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[JobBatch]:
    box = Sandbox.make(tmp_path_factory.mktemp("exit_codes"))
    batch = JobBatch(slurm_cluster)
    for params in selected(request, "test_exit_code_and_closing_line_on_slurm"):
        subcommand, code = params["subcommand"], params["code"]
        key = f"rc-{subcommand}-{code}"
        # the assignment prefix reaches only the workload (not pip, not the bench prepare)
        command = f"STANDIN_EXIT_CODE={code} {PROGRAM[subcommand]} --run"
        batch.submit(key, generate(box, subcommand, command, key))
    yield batch


@pytest.mark.parametrize("code", EXIT_CODES)
@pytest.mark.parametrize("subcommand", WORKFLOWS)
def test_exit_code_and_closing_line_on_slurm(
    exit_code_jobs: JobBatch, subcommand: str, code: int
) -> None:
    key = f"rc-{subcommand}-{code}"
    script = exit_code_jobs.jobs[key].script
    result = exit_code_jobs.result(key)
    assert result.exit_code == code, explain(result, script)
    assert result.state == ("COMPLETED" if code == 0 else "FAILED"), explain(result)
    check_logs(result, script)
    closing_line(result, code)
    _, prep, program = split_records(result, subcommand)
    assert [r["argv"][1:] for r in program] == [["--run"]], explain(result)
    if subcommand == "bench":
        assert [r["argv"][1:] for r in prep] == [PREP_ARGV], explain(result)
    if subcommand == "custom":
        line = f"0: Rank0 Custom command finished with exit code {code}"
        assert line in result.stdout(), explain(result)
    assert_install_first(result, subcommand, f"{MODEL}_{subcommand}")


# ----- 3. multi-task pmix ------------------------------------------------------------------------

MULTI_CASE = next(c for c in CORPUS if c.id == "single-quotes")
MULTI_TASK = {
    # --ntasks-per-node 2 given, as the procedure always passes it
    "pytest": ["--ntasks", "2", "--ntasks-per-node", "2", "--mpi", "pmix"],
    "custom": ["--ntasks", "2", "--ntasks-per-node", "2", "--mpi", "pmix"],
    "bench": ["--ntasks", "2", "--ntasks-per-node", "2", "--mpi", "pmix"],
    "eval": ["--ntasks", "2", "--ntasks-per-node", "2", "--mpi", "pmix"],
}
# --ntasks-per-node left at its default (1) on a one-node job
MULTI_TASK_DEFAULT_PER_NODE = {
    "pytest": ["--ntasks", "2", "--mpi", "pmix"],
    "custom": ["--ntasks", "2", "--mpi", "pmix"],
}


@pytest.fixture(scope="module")
def multi_task_jobs(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JobBatch]:
    box = Sandbox.make(tmp_path_factory.mktemp("multi_task"))
    batch = JobBatch(slurm_cluster)
    command = f"{{program}} {MULTI_CASE.tail}"
    for label, table in (("pn2", MULTI_TASK), ("pn-default", MULTI_TASK_DEFAULT_PER_NODE)):
        for subcommand, extra in table.items():
            key = f"multi-{label}-{subcommand}"
            script = generate(
                box, subcommand, command.format(program=PROGRAM[subcommand]), key, *extra
            )
            batch.submit(key, script, env_extra=CORPUS_ENV)
    yield batch


def check_two_ranks(batch: JobBatch, key: str, subcommand: str) -> None:
    script = batch.jobs[key].script
    result = batch.result(key)
    assert result.ok, explain(result, script)
    closing_line(result, 0)
    _, prep, program = split_records(result, subcommand)
    assert len(program) == 2, explain(result, script)
    for rec in program:
        assert_argv(rec, MULTI_CASE.argv, result)
    assert sorted(r["env"].get("PMIX_RANK") for r in program) == ["0", "1"], explain(result)
    assert sorted(r["env"].get("SLURM_PROCID") for r in program) == ["0", "1"], explain(result)
    launched = [r for r in result.tool_records() if r["tool"] == LAUNCHER]
    if subcommand in ("bench", "eval"):
        inner = f"{PROGRAM[subcommand]} {MULTI_CASE.tail}"
        # bash -c <the step's joining code> workload <the command>
        calls = [r["argv"][1:3] + r["argv"][4:] for r in launched]
        assert calls == [["bash", "-c", "workload", inner]] * 2, explain(result)
        # the stand-in launcher execs bash, which runs the command as its child: the
        # launcher's pid as parent means "went through the launcher"
        assert {r["pid"] for r in launched} == {r["ppid"] for r in program}, explain(result)
    else:
        assert launched == [], explain(result)
    if subcommand == "bench":
        # the prepare step stays a single task with the MPI variables cleared
        assert len(prep) == 1, explain(result)
        assert_argv(prep[0], PREP_ARGV, result)
        assert_env_cleared(prep[0], result)
    tasks = [s for s in result.steps if s["event"] == "task"]
    last_step = max(s["step_id"] for s in tasks)
    assert sorted(s["task_rank"] for s in tasks if s["step_id"] == last_step) == [0, 1], explain(
        result
    )
    assert_install_first(result, subcommand, f"{MODEL}_{subcommand}")


@pytest.mark.parametrize("subcommand", WORKFLOWS)
def test_multi_task_pmix_every_rank(multi_task_jobs: JobBatch, subcommand: str) -> None:
    check_two_ranks(multi_task_jobs, f"multi-pn2-{subcommand}", subcommand)


@pytest.mark.parametrize("subcommand", list(MULTI_TASK_DEFAULT_PER_NODE))
def test_multi_task_pmix_default_tasks_per_node(multi_task_jobs: JobBatch, subcommand: str) -> None:
    """``--ntasks 2 --mpi pmix`` alone: the job must still run on 2 ranks of the one node."""
    key = f"multi-pn-default-{subcommand}"
    job = multi_task_jobs.jobs[key]
    text = job.script.read_text()
    assert job.refusal is None, (
        f"BUG in generated script: sbatch refuses `{subcommand} --ntasks 2 --mpi pmix` "
        f"({job.refusal}). The script asks for --nodes={directive(text, 'nodes')} "
        f"--ntasks={directive(text, 'ntasks')} "
        f"--ntasks-per-node={directive(text, 'ntasks-per-node')}: 2 tasks cannot fit on 1 node "
        "at 1 task per node, so Slurm rejects it (and the workload srun repeats the same "
        "triple). Proposed fix: when --ntasks-per-node is not given, use "
        "ceil(ntasks / nodes) in the #SBATCH lines and the workload step; when it is given "
        "and ntasks > nodes * ntasks-per-node, fail at generation with a clear message."
    )
    check_two_ranks(multi_task_jobs, key, subcommand)


# ----- 4. scripts from the build API -------------------------------------------------------------


def cluster_slurm_env(cluster: SlurmCluster) -> dict[str, Any]:
    """slurm_env.json for the test cluster, as the probe would write it."""
    arch = platform.machine()
    partition = {"state": "up", "time_limit": "infinite", "nodes": "1", "arch": arch}
    return {
        "user": "root",
        "default_account": None,
        "accounts": [],
        "default_partition": cluster.partitions["gpu"],
        "partitions": [
            {
                "name": cluster.partitions["gpu"],
                **partition,
                "gres": "gpu:8",
                "gpus_per_node": 8,
                "requires_gres": True,
            },
            {
                "name": cluster.partitions["cpu"],
                **partition,
                "gres": "(null)",
                "gpus_per_node": None,
                "requires_gres": False,
            },
        ],
        "pmix": {"available": ["pmix", "pmix_v4"], "preferred": "pmix"},
        "errors": [],
        "cluster_name": "harness",
        "mounts": [],
        "ssh_host": None,
        "slurm_user": None,
        "remote_cwd": None,
        "mfa_style": False,
    }


API_COMMANDS: dict[str, dict[str, Any]] = {
    # tp 1: one task, which must still run with the pmix plugin
    "eval": {"eval_cmd": "trtllm-eval --model /models/Llama-3.1-8B-Instruct gsm8k"},
    "custom": {"custom_cmd": 'record-argv \'a b\' "$HOME" "$LLM_MODELS_ROOT"'},
}


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_build_api_script_runs(slurm_cluster: SlurmCluster, tmp_path: Path, workflow: str) -> None:
    """The image comes from TensorRT-LLM's real properties file (a registry image), so
    the job runs only if pyxis gets it in enroot's REGISTRY#IMAGE form."""
    env = make_build_env(tmp_path)
    (env.repo / "jenkins" / "current_image_tags.properties").write_text(
        (REAL_FILES / "current_image_tags.properties").read_text()
    )
    slurm_env = cluster_slurm_env(slurm_cluster)
    env.slurm_env(**slurm_env)
    assert slurm_cluster.partitions["gpu"] in {p["name"] for p in slurm_env["partitions"]}
    assert set(slurm_env["pmix"]["available"]) <= set(slurm_cluster.mpi_plugins)
    home = tmp_path / "home"
    home.mkdir()
    models = tmp_path / "models"
    models.mkdir()
    request = env.request(
        workflow,
        partition=slurm_cluster.partitions["gpu"],
        models_path=str(models),
        **API_COMMANDS.get(workflow, {}),
    )
    built = env.build(request, environ={"HOME": str(home)}, machine=platform.machine)
    written = built.write()
    spec = json.loads((env.work_dir / "job_spec.json").read_text())
    script = Path(spec["script_path"])
    assert script in written
    params = spec["slurm_params"]
    assert params["partition"] == "gpu"
    assert slurm_cluster.test_only(script).returncode == 0

    result = slurm_cluster.submit(script, env_extra={"HOME": str(home)}, timeout=180)
    assert result.ok, explain(result, script)
    log = env.work_dir / spec["log_file_pattern"].replace("%j", str(result.job_id))
    assert result.stdout_path == log and log.is_file(), explain(result)
    closing_line(result, 0)

    ntasks = params["ntasks"]
    tool = "pytest" if workflow == "pytest" else None  # a real test id, run by the stand-in
    _, prep, program = split_records(result, workflow, tool)
    assert len(program) == ntasks, explain(result, script)
    request_cmd = {
        "pytest": request.get("test_cmd"),
        "eval": request.get("eval_cmd"),
        "bench": (request.get("bench_cmd") or "").split(" && ")[-1],
    }
    if workflow == "custom":
        expected = ["a b", str(home), "/models"]
    else:
        expected = shlex.split(request_cmd[workflow])[1:]
    # a test-db id (relative to tests/integration/defs) without cd: the step runs there
    cwd = env.repo / "tests/integration/defs" if workflow == "pytest" else env.repo
    for rec in program:
        assert_argv(rec, expected, result)
        assert rec["cwd"] == str(cwd), explain(result)
    assert sorted(r["env"].get("SLURM_PROCID") for r in program) == [
        str(i) for i in range(ntasks)
    ], explain(result)
    launched = [r for r in result.tool_records() if r["tool"] == LAUNCHER]
    if ntasks > 1 and workflow in ("bench", "eval"):
        assert len(launched) == ntasks, explain(result)
        assert sorted(r["env"].get("PMIX_RANK") for r in program) == [
            str(i) for i in range(ntasks)
        ], explain(result)
    else:
        assert launched == [], explain(result)
    if workflow == "bench":
        expected_prep = shlex.split(request["bench_cmd"].split(" && ")[0])[1:]
        assert [r["argv"][1:] for r in prep] == [expected_prep], explain(result)
        assert_env_cleared(prep[0], result)
    if workflow == "eval":
        # procedure: eval always runs with the resolved pmix plugin, even with one task
        assert ntasks == 1, spec
        assert params["mpi_plugin"] == "pmix", spec
        run_step = script.read_text().split("# run the evaluation", 1)[1]
        assert "--mpi=pmix " in run_step or "--mpi=pmix\n" in run_step, excerpt(script)
        assert program[0]["env"].get("PMIX_RANK") == "0", explain(result)
    if workflow in ("pytest", "custom"):
        for rec in program:
            assert_env_cleared(rec, result)
    assert spec["container_name"], spec
    assert_install_first(result, workflow, spec["container_name"], tool)
    images = {s["container_image"] for s in result.steps if s["container_image"]}
    assert images == {spec["docker_image"]}, result.steps
    assert spec["docker_image"].startswith("urm.nvidia.com#"), spec


DS = "accuracy/test_disaggregated_serving.py::TestLlama3_1_8BInstruct"
LL = "accuracy/test_llm_api_pytorch.py::TestDeepSeekV3Lite"
GPU_CASES = {
    # test id, the count its guard wants (side file for the stand-in), --gres, skipped
    "exact": (f"{DS}::test_exact_world[tp2pp2]", "4", "gpu:4", False),
    "at-least-runs-on-the-node": (f"{LL}::test_fp8_4gpus", ">=4", "gpu:8", False),
    "exact-on-the-whole-node": (f"{LL}::test_fp8_4gpus", "4", "gpu:8", True),
}


def test_pytest_step_sees_exactly_the_gpus_its_test_wants(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """The stand-in pytest skips a test whose device guard fails (as pytest does); a test
    with an exact-count guard gets exactly that many GPUs (--gres=gpu:N), so it runs.
    The control: the same exact guard on a test built for the whole node skips."""
    partition = slurm_cluster.partitions["gpu"]
    batch = JobBatch(slurm_cluster)
    jobs: dict[str, tuple[Path, Path]] = {}
    for key, (test_id, wants, gres, _skipped) in GPU_CASES.items():
        env = make_build_env(tmp_path / key)
        env.slurm_env(**cluster_slurm_env(slurm_cluster))
        test_file = env.repo / "tests/integration/defs" / test_id.split("::")[0]
        (test_file.parent / f"{test_file.name}.gpus").write_text(wants)
        models = tmp_path / key / "models"
        models.mkdir()
        request = env.request(
            "pytest",
            partition=partition,
            models_path=str(models),
            test_cmd=f"pytest -v '{test_id}'",
        )
        built = env.build(request, environ={"HOME": str(env.root)}, machine=platform.machine)
        built.write()
        spec = json.loads((env.work_dir / "job_spec.json").read_text())
        assert spec["slurm_params"]["gres"] == gres, spec
        script = Path(spec["script_path"])
        batch.submit(key, script, env_extra={"HOME": str(env.root)})
        jobs[key] = (script, env.work_dir / spec["log_file_pattern"])
    for key, (_test_id, wants, gres, skipped) in GPU_CASES.items():
        script, log_pattern = jobs[key]
        result = batch.result(key)
        assert result.ok, explain(result, script)
        _, _, program = split_records(result, "pytest", "pytest")
        assert len(program) == 1, explain(result, script)
        visible = program[0]["env"].get("CUDA_VISIBLE_DEVICES", "")
        assert len(visible.split(",")) == int(gres.split(":")[1]), explain(result)
        log = Path(str(log_pattern).replace("%j", str(result.job_id))).read_text()
        assert ("1 skipped" in log) is skipped, f"{key} (wants {wants}):\n{log}"


# ----- 5. persistent mode: bash inside an salloc -------------------------------------------------


@pytest.mark.parametrize("subcommand", WORKFLOWS)
def test_persistent_mode_runs_workload_once(
    slurm_cluster: SlurmCluster, tmp_path: Path, standin_record: Path, subcommand: str
) -> None:
    box = Sandbox.make(tmp_path)
    case = MULTI_CASE
    script = generate(box, subcommand, f"{PROGRAM[subcommand]} {case.tail}", "persistent")
    done = slurm_cluster.run_in_allocation(
        script,
        f"--partition={slurm_cluster.partitions['gpu']}",
        "--nodes=1",
        "--ntasks=1",
        env_extra=CORPUS_ENV,
        record_file=standin_record,
        timeout=120,
    )
    records = [json.loads(line) for line in standin_record.read_text().splitlines() if line]
    message = (
        f"salloc rc={done.returncode}\n--- stdout:\n{done.stdout[-3000:]}\n"
        f"--- stderr:\n{done.stderr[-3000:]}\n--- tools: "
        f"{[(r['tool'], r['argv'][1:]) for r in records]}\n{excerpt(script, 2000)}"
    )
    assert done.returncode == 0, message
    program = [r for r in records if r["tool"] == PROGRAM[subcommand]]
    if subcommand == "bench":
        assert [r["argv"][1:] for r in program] == [PREP_ARGV, case.argv], message
    else:
        assert [r["argv"][1:] for r in program] == [case.argv], message
    assert next(r["argv"][1:] for r in records if r["tool"] == "pip") == ["install", "-e", "."]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines and re.fullmatch(r"Job \d+ finished at .+ with exit code 0", lines[-1]), message


# ----- 6. sbatch --test-only accepts every snapshot script ---------------------------------------


def rewrite_for_cluster(text: str, partition: str, log_dir: Path) -> str:
    """Partition -> ``partition``; the --output/--error directory -> ``log_dir``."""
    text, count = re.subn(r"(?m)^#SBATCH --partition=.*$", f"#SBATCH --partition={partition}", text)
    assert count == 1, "no single #SBATCH --partition= line"
    old_dir = posixpath.dirname(directive(text, "output"))

    def relocate(match: re.Match[str]) -> str:
        value = match.group(2)
        if posixpath.dirname(value) == old_dir:
            value = f"{log_dir}/{posixpath.basename(value)}"
        return f"#SBATCH --{match.group(1)}={value}"

    return re.sub(r"(?m)^#SBATCH --(output|error)=(.*)$", relocate, text)


@pytest.mark.parametrize(
    "snapshot", SNAPSHOT_SCRIPTS, ids=[str(p.relative_to(SNAPSHOTS)) for p in SNAPSHOT_SCRIPTS]
)
def test_snapshot_accepted_by_sbatch_test_only(
    slurm_cluster: SlurmCluster, tmp_path: Path, snapshot: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    text = rewrite_for_cluster(snapshot.read_text(), slurm_cluster.partitions["gpu"], logs)
    copy = tmp_path / "job.sh"
    copy.write_text(text)
    args: list[str] = []
    # The node has os.cpu_count() CPUs (2 in CI); a snapshot of a 4-task job is valid but
    # cannot fit, so the task counts are lowered on the command line (which wins over the
    # #SBATCH lines, which sbatch still parses).
    ntasks = int(directive(text, "ntasks"))
    nodes = int(directive(text, "nodes"))
    per_node = int(directive(text, "ntasks-per-node"))
    if per_node > slurm_cluster.cpus:
        per_node = slurm_cluster.cpus
        args = [f"--ntasks={min(ntasks, per_node * nodes)}", f"--ntasks-per-node={per_node}"]
    done = slurm_cluster.test_only(copy, *args)
    assert done.returncode == 0, f"sbatch --test-only {args}: {done.stderr}\n{excerpt(copy)}"
    assert "to start at" in done.stderr, done.stderr


# ----- 7. the harness sees broken scripts --------------------------------------------------------


def test_deleted_mount_source_fails_the_job(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    box = Sandbox.make(tmp_path)
    gone = tmp_path / "gone"
    gone.mkdir()
    mounts = f"{tmp_path}:{tmp_path},{gone}:/gone"
    script = generate(box, "pytest", "pytest -x", "broken-mount", mounts=mounts)
    gone.rmdir()
    result = slurm_cluster.submit(script)
    assert result.state == "FAILED" and result.exit_code != 0, explain(result, script)
    assert result.tool_records() == [], explain(result)
    assert "mount source does not exist" in result.stderr(), explain(result)
    assert [s["event"] for s in result.steps] == ["rejected"], explain(result)
    closing_line(result, result.exit_code)


def test_corrupted_srun_line_fails_the_job(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    box = Sandbox.make(tmp_path)
    script = generate(box, "eval", "trtllm-eval --model m gsm8k", "broken-srun")
    text = script.read_text()
    head, sep, tail = text.rpartition("  srun \\\n")
    assert sep, excerpt(script)
    script.write_text(f"{head}  srun --no-such-srun-option \\\n{tail}")
    result = slurm_cluster.submit(script)
    assert result.state == "FAILED" and result.exit_code != 0, explain(result, script)
    tools = [r["tool"] for r in result.tool_records()]
    assert "pip" in tools and "trtllm-eval" not in tools, explain(result)
    assert "no-such-srun-option" in result.stderr(), explain(result)
    closing_line(result, result.exit_code)
