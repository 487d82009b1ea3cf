"""The lifecycle's inputs without a cluster: durations, sacct's and scontrol's text,
pytest's summary line, the log paths of a script, the verdict table, and bad input
(an unbuilt or half-written work_dir, a run.json of another build, sbatch or squeue
missing or failing): one line naming what and the fix, exit 2, nothing submitted."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from scriptbuilder.lifecycle.durations import parse_duration
from scriptbuilder.lifecycle.logs import TAIL_BYTES, LogView, pytest_summary, read_logs
from scriptbuilder.lifecycle.record import slurm_log_paths
from scriptbuilder.lifecycle.slurm import JobState, from_scontrol, parse_sacct, parse_scontrol
from scriptbuilder.lifecycle.transport import LocalTransport
from scriptbuilder.lifecycle.verdict import EXIT_CODES, Verdict, decide
from scriptbuilder.models.job_spec import JobSpec
from tests.build_env import BuildEnv
from tests.lifecycle_cli import Done, scriptbuilder

NOW = datetime(2026, 1, 2, 4, 0, 0)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1h", 3600), ("30m", 1800), ("3600s", 3600), ("01:00:00", 3600), ("90", 90),
     ("1:30", 90), ("0.5s", 0.5), (45, 45)],
)  # fmt: skip
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1x", "-5", "0", "1:75", "soon", "1h30"])
def test_bad_durations_name_the_value(text: str) -> None:
    with pytest.raises(ValueError, match=rf"--timeout '{text}' is not a duration: use e\.g\. 1h"):
        parse_duration(text, "--timeout")


# sacct -j 4242 -P -n -o JobID,State,ExitCode,Elapsed,Submit,Start (Slurm 22.05's format)
SACCT_OOM = """\
4242|OUT_OF_MEMORY|0:125|00:01:07|2026-01-02T03:00:00|2026-01-02T03:02:00
4242.batch|OUT_OF_MEMORY|0:125|00:01:07|2026-01-02T03:02:00|2026-01-02T03:02:00
4242.extern|COMPLETED|0:0|00:01:07|2026-01-02T03:02:00|2026-01-02T03:02:00
"""
SACCT_STEP_OOM = """\
4243|FAILED|1:0|1-02:03:04|2026-01-02T03:00:00|2026-01-02T03:00:30
4243.batch|FAILED|1:0|1-02:03:04|2026-01-02T03:00:30|2026-01-02T03:00:30
4243.0|OUT_OF_MEMORY|0:125|00:00:10|2026-01-02T03:00:31|2026-01-02T03:00:31
"""
SACCT_CANCELLED = "4244|CANCELLED by 0|0:15|00:00:05|2026-01-02T03:00:00|2026-01-02T03:00:01\n"


def test_sacct_job_row_and_step_rows() -> None:
    oom = parse_sacct(SACCT_OOM, "4242", NOW)
    assert oom is not None and (oom.state, oom.elapsed, oom.queued) == ("OUT_OF_MEMORY", 67, 120)
    step = parse_sacct(SACCT_STEP_OOM, "4243", NOW)
    assert step is not None and step.state == "OUT_OF_MEMORY" and step.exit_code == 1
    assert step.elapsed == 93784
    cancelled = parse_sacct(SACCT_CANCELLED, "4244", NOW)
    assert cancelled is not None and (cancelled.state, cancelled.signal) == ("CANCELLED", 15)
    assert parse_sacct(SACCT_OOM, "999", NOW) is None


SCONTROL = """\
JobId=77 JobName=demo_custom
   JobState=PENDING Reason=BeginTime Dependency=(null)
   Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0
   RunTime=00:00:00 TimeLimit=00:01:00 TimeMin=N/A
   SubmitTime=2026-01-02T03:59:00 EligibleTime=2026-01-02T04:01:00
   StartTime=2026-01-02T04:01:00 EndTime=2026-01-02T04:02:00 Deadline=N/A
   StdOut=/tmp/a dir/demo_custom_77.out
"""


def test_a_job_requeued_after_its_node_failed_is_a_node_failure() -> None:
    fields = parse_scontrol(SCONTROL)
    assert fields["StdOut"] == "/tmp/a dir/demo_custom_77.out"
    job = from_scontrol(fields, NOW)
    assert (job.state, job.restarts, job.queued) == ("NODE_FAIL", 1, 60)


@pytest.mark.parametrize(
    ("text", "counts"),
    [
        ("0: ===== 3 passed, 1 skipped in 2.10s =====", {"passed": 3, "skipped": 1}),
        ("1 failed, 2 passed, 1 warning in 3.02s", {"failed": 1, "passed": 2, "warnings": 1}),
        ("no tests ran in 0.01s", {}),
        ("1 skipped in 0.01s", {"skipped": 1}),
        ("slept 3 seconds in 3s", None),
    ],
)  # fmt: skip
def test_pytest_summary(text: str, counts: dict[str, int] | None) -> None:
    assert pytest_summary(f"earlier\n{text}\nJob 1 finished\n") == counts


def test_log_paths_as_the_job_writes_them() -> None:
    script = "#!/bin/bash\n#SBATCH --output=/w/x_%j.out\n#SBATCH --error='/w d/%x_%j_100%%.err'\n"
    assert slurm_log_paths(script, "/w", "12", "job") == ("/w/x_12.out", "/w d/job_12_100%.err")
    assert slurm_log_paths("#!/bin/bash\n", "/sub", "12", "j") == ("/sub/slurm-12.out",) * 2


SPEC = JobSpec.model_construct(
    workflow_type="pytest",
    success_patterns=[],
    failure_patterns=[],
    timeout_patterns=["reached its time limit"],
)


@pytest.mark.parametrize(
    ("state", "code", "out", "ended_by", "verdict"),
    [
        ("COMPLETED", 0, "1 passed in 1s", None, Verdict.PASSED),
        ("COMPLETED", 0, "Error: benign line\n2 passed in 1s", None, Verdict.PASSED),
        ("FAILED", 1, "all good\n3 passed in 1s", None, Verdict.FAILED),  # the exit code wins
        ("COMPLETED", 0, "2 skipped in 1s", None, Verdict.NO_TESTS_RAN),
        ("FAILED", 5, "no tests ran in 0.1s", None, Verdict.NO_TESTS_RAN),
        ("FAILED", 124, "Job 7 reached its time limit (00:01:00)", None, Verdict.TIMEOUT),
        ("TIMEOUT", 0, "", None, Verdict.TIMEOUT),
        ("FAILED", 137, "Hang detected after 300 seconds", None, Verdict.HANG_DETECTED),
        ("COMPLETED", 0, "Hang detected after 300 seconds\n1 passed in 1s", None, Verdict.PASSED),
        ("CANCELLED", 0, "Hang detected", "hang", Verdict.HANG_DETECTED),
        ("CANCELLED", 0, "", None, Verdict.CANCELLED),
        ("OUT_OF_MEMORY", 0, "", None, Verdict.OUT_OF_MEMORY),
        ("NODE_FAIL", 0, "", None, Verdict.NODE_FAILURE),
        ("PREEMPTED", 0, "", None, Verdict.NODE_FAILURE),
        ("BOOT_FAIL", 0, "", None, Verdict.NODE_FAILURE),
        ("CANCELLED", 0, "", "node_failure", Verdict.NODE_FAILURE),
    ],
)  # fmt: skip
def test_verdict_table(
    state: str, code: int, out: str, ended_by: str | None, verdict: Verdict
) -> None:
    logs = LogView("/o", "/e", out_tail=out)
    assert decide(JobState(state, "", code, 0), logs, SPEC, ended_by) is verdict


def test_exit_codes_are_distinct_and_leave_2_for_bad_input() -> None:
    codes = list(EXIT_CODES.values())
    assert EXIT_CODES[Verdict.PASSED] == 0 and EXIT_CODES[Verdict.FAILED] == 1
    assert len(set(codes)) == len(codes) == len(Verdict) and 2 not in codes


# ----- bad input ----------------------------------------------------------------------------------


@pytest.fixture
def cli() -> Callable[..., Done]:
    """``scriptbuilder ARGS`` in this process, with ``PATH`` as given."""

    def run(*args: str, path: str) -> Done:
        return scriptbuilder(*args, env={**os.environ, "PATH": path})

    return run


def tool(folder: Path, name: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(f"#!/bin/bash\n{body}\n")
    (folder / name).chmod(0o755)


@pytest.fixture
def built(build_env: BuildEnv) -> Path:
    request = build_env.request("custom", persistent_mode=False)
    build_env.build(request).write()
    return build_env.work_dir


def one_line_error(done: Done, *words: str) -> None:
    assert done.returncode == 2, done
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("scriptbuilder: error: "), done.stderr
    for word in words:
        assert word in done.stderr, done.stderr


def test_unbuilt_work_dir(tmp_path: Path, cli: Callable[..., Done]) -> None:
    for command in ("submit", "status", "watch", "cancel"):
        done = cli(command, str(tmp_path), path=os.environ["PATH"])
        one_line_error(done, "job_spec.json not found", "run the build again")


def test_half_written_work_dir(built: Path, tmp_path: Path, cli: Callable[..., Done]) -> None:
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "sbatch", f"echo called >> {tmp_path}/calls; echo 1")
    spec = json.loads((built / "job_spec.json").read_text())
    script = Path(spec["script_path"])
    spec["script_sha256"] = hashlib.sha256(b"another script").hexdigest()
    (built / "job_spec.json").unlink()
    (built / "job_spec.json").write_text(json.dumps(spec))
    path = f"{bin_dir}:{os.environ['PATH']}"
    one_line_error(cli("submit", str(built), path=path), "does not match script_sha256")
    spec["script_sha256"] = hashlib.sha256(script.read_bytes()).hexdigest()
    (built / "job_spec.json").write_text(json.dumps(spec))
    script.unlink()
    one_line_error(cli("submit", str(built), path=path), "is missing", "run the build again")
    (built / "job_spec.json").write_text(json.dumps(spec)[:40])
    one_line_error(cli("submit", str(built), path=path), "is not JSON")
    assert not (tmp_path / "calls").exists() and not (built / "run.json").exists()


def test_sbatch_missing_or_failing(built: Path, tmp_path: Path, cli: Callable[..., Done]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line_error(cli("submit", str(built), path=str(empty)), "sbatch: command not found")
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "sbatch", 'echo "sbatch: error: invalid partition specified: gpu" >&2; exit 1')
    done = cli("submit", str(built), path=f"{bin_dir}:{os.environ['PATH']}")
    one_line_error(done, "sbatch failed: sbatch: error: invalid partition specified: gpu")
    assert not (built / "run.json").exists()


def test_submit_once_and_squeue_missing_or_failing(
    built: Path, tmp_path: Path, cli: Callable[..., Done]
) -> None:
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "sbatch", f'echo "$@" >> {tmp_path}/calls; echo "4242;cluster"')
    path = str(bin_dir)  # sbatch stub only: no squeue
    done = cli("submit", str(built), path=path)
    assert done.returncode == 0 and json.loads(done.stdout)["job_id"] == "4242", done.stderr
    assert json.loads(done.stdout)["kind"] == "sbatch"
    one_line_error(cli("submit", str(built), path=path), "already submitted as job 4242")
    assert len((tmp_path / "calls").read_text().splitlines()) == 1
    one_line_error(cli("status", str(built), path=path), "squeue: command not found")
    tool(bin_dir, "squeue", 'echo "squeue: error: Unable to contact slurm controller" >&2; exit 1')
    one_line_error(cli("watch", str(built), path=path), "squeue failed", "controller")
    # --again over a job that may still run: cancelled first, or nothing is submitted
    one_line_error(cli("submit", str(built), "--again", path=path), "scancel: command not found")
    assert len((tmp_path / "calls").read_text().splitlines()) == 1


#: Slurm once it has forgotten a job: no accounting, and MinJobAge passed.
FORGOTTEN = {
    "squeue": 'echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1',
    "sacct": 'echo "sacct: error: Slurm accounting storage is disabled" >&2; exit 1',
    "scontrol": 'echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1',
}


def forgetful(tmp_path: Path) -> str:
    """A PATH whose sbatch submits job 4242 and whose Slurm has forgotten it."""
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "sbatch", "echo 4242")
    for name, body in FORGOTTEN.items():
        tool(bin_dir, name, body)
    return f"{bin_dir}:{os.environ['PATH']}"


CLOSING = "Job 4242 finished at Thu Dec 3 21:00:00 UTC 2026 with exit code {}\n"


@pytest.mark.parametrize(
    ("tail", "verdict", "rc"),
    [
        ("3 passed in 1.00s\n" + CLOSING.format(0), "PASSED", 0),
        ("going\n" + CLOSING.format(3), "FAILED", 1),
        (
            "Job 4242 reached its time limit (00:01:00) during step 1\n" + CLOSING.format(124),
            "TIMEOUT",
            4,
        ),
    ],
)
def test_a_job_slurm_forgot_ends_by_its_closing_line_and_is_remembered(
    built: Path, tmp_path: Path, cli: Callable[..., Done], tail: str, verdict: str, rc: int
) -> None:
    path = forgetful(tmp_path)
    record = json.loads(cli("submit", str(built), path=path).stdout)
    Path(record["stdout_path"]).write_text("step one\n" + tail)
    done = cli("status", str(built), "--json", path=path)
    assert done.returncode == rc, done.stderr
    report = json.loads(done.stdout)
    assert (report["verdict"], report["phase"]) == (verdict, "ended"), report
    assert report["state_source"] == "closing line", report
    assert json.loads((built / "run.json").read_text())["report"] == report
    # the end is remembered: later looks ask no scheduler at all (none on PATH)
    Path(record["stdout_path"]).unlink()
    again = cli("watch", str(built), "--interval", "0.1s", path=str(tmp_path))
    assert (again.returncode, json.loads(again.stdout)) == (rc, report), again.stderr
    short = cli("status", str(built), path=str(tmp_path))
    assert short.returncode == rc and short.stdout.endswith(f"-> {verdict}\n"), short


def test_a_forgotten_job_without_a_closing_line_is_one_line(
    built: Path, tmp_path: Path, cli: Callable[..., Done]
) -> None:
    path = forgetful(tmp_path)
    assert cli("submit", str(built), path=path).returncode == 0
    one_line_error(cli("status", str(built), path=path), "knows no job 4242", "no closing line")
    assert "report" not in json.loads((built / "run.json").read_text()) or (
        json.loads((built / "run.json").read_text())["report"] is None
    )


def test_submit_over_a_job_of_another_build(
    built: Path, build_env: BuildEnv, tmp_path: Path, cli: Callable[..., Done]
) -> None:
    bin_dir = tmp_path / "bin"
    tool(
        bin_dir,
        "sbatch",
        f"n=0; [ -f {tmp_path}/n ] && read -r n < {tmp_path}/n; n=$((n + 1)); "
        f"echo $n > {tmp_path}/n; echo $((4242 + n))",
    )
    tool(bin_dir, "squeue", 'echo "RUNNING|None|0:05|2026-01-02T03:00:00|2026-01-02T03:00:01"')
    tool(bin_dir, "scancel", f'echo "$@" >> {tmp_path}/cancelled')
    path = str(bin_dir)
    assert json.loads(cli("submit", str(built), path=path).stdout)["job_id"] == "4243"
    build_env.build(build_env.request("custom", persistent_mode=False, custom_cmd="true")).write()
    for command in ("status", "watch"):
        one_line_error(cli(command, str(built), path=path), "from another build", "4243")
    done = cli("submit", str(built), path=path)
    one_line_error(done, "holds job 4243 of an earlier build", "running", "--again", "cancel")
    assert json.loads((built / "run.json").read_text())["job_id"] == "4243"
    again = cli("submit", str(built), "--again", path=path)
    assert again.returncode == 0, again.stderr
    assert again.stderr == f"cancelled job 4243, the earlier run of {built}\n"
    assert (tmp_path / "cancelled").read_text() == "4243\n"
    record = json.loads((built / "run.json").read_text())
    assert record["job_id"] == "4244" and record["replaces"] == {
        "job_id": "4243",
        "cancelled": True,
    }
    # an earlier build's job that has ended is simply replaced; cancel reaches any build's job
    build_env.build(build_env.request("custom", persistent_mode=False, custom_cmd="false")).write()
    assert cli("cancel", str(built), path=path).stdout == "cancelled 4244\n"
    tool(bin_dir, "squeue", 'echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1')
    tool(
        bin_dir,
        "sacct",
        'echo "4244|CANCELLED by 0|0:15|00:00:09|2026-01-02T03:00:00|2026-01-02T03:00:01"',
    )
    done = cli("submit", str(built), path=path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert json.loads(done.stdout)["replaces"] is None


def test_bad_after_and_durations(built: Path, cli: Callable[..., Done]) -> None:
    path = os.environ["PATH"]
    one_line_error(cli("submit", str(built), "--after", "12;rm", path=path), "--after", "job id")
    done = cli("watch", str(built), "--timeout", "soon", path=path)
    one_line_error(done, "--timeout 'soon' is not a duration")


def test_a_huge_log_is_read_from_its_end(tmp_path: Path) -> None:
    """A 4 GiB log (sparse) costs one bounded read: its summary line is found, and the
    excerpt starts at a whole line."""
    log = tmp_path / "job.out"
    with log.open("wb") as f:
        f.truncate(4 << 30)
        f.seek(0, os.SEEK_END)
        f.write(b"x" * 100 + b"\n" + b"line\n" * 200 + b"0: 3 passed, 1 skipped in 9.5s\n")
    view = read_logs(LocalTransport(), str(log), str(log))
    assert len(view.out_tail) <= TAIL_BYTES and pytest_summary(view.out_tail) == {
        "passed": 3,
        "skipped": 1,
    }
    excerpt = view.excerpt(failed=True)["out_last_100"]
    assert len(excerpt) == 100 and excerpt[-1].endswith("in 9.5s") and excerpt[0] == "line"
