"""Sweeps: ``scriptbuilder.build_many`` and ``scriptbuilder build --many FILE``."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import scriptbuilder
from scriptbuilder.api import SweepResult
from scriptbuilder.workflows.registry import WORKFLOWS
from tests.build_env import FIXED_CLOCK, BuildEnv
from tests.test_build_stops import run_cli, snapshot_tree

OPTIONS: dict[str, Any] = {
    "environ": {"HOME": "/home/alice"},
    "machine": lambda: "x86_64",
    "clock": lambda: FIXED_CLOCK,
}


def own_work_dir(build_env: BuildEnv, name: str, workflow: str = "pytest") -> dict[str, Any]:
    """A request writing into its own work_dir, reading the shared slurm_env.json."""
    return build_env.request(
        workflow,
        work_dir=str(build_env.root / name),
        slurm_env_file=str(build_env.work_dir / "slurm_env.json"),
    )


def test_build_many_is_build_for_each_request(build_env: BuildEnv) -> None:
    requests = [build_env.request(kind) for kind in WORKFLOWS]
    before = snapshot_tree(build_env.root)
    results = scriptbuilder.build_many(requests, **OPTIONS)
    assert snapshot_tree(build_env.root) == before  # nothing written
    assert [r.index for r in results] == [0, 1, 2, 3]
    assert all(r.ok and r.error is None for r in results)
    for request, result in zip(requests, results, strict=True):
        assert result.job is not None
        single = build_env.build(request)
        assert result.job.script_text == single.script_text
        assert result.job.job_spec_json == single.job_spec_json


def test_build_many_goes_on_after_a_refused_request(build_env: BuildEnv) -> None:
    requests = [
        build_env.request("pytest"),
        build_env.request("pytest", colour="blue"),
        build_env.request("custom"),
    ]
    results = scriptbuilder.build_many(requests, **OPTIONS)
    assert [r.ok for r in results] == [True, False, True]
    bad = results[1]
    assert isinstance(bad, SweepResult) and bad.job is None and bad.error is not None
    assert "'colour' is unknown" in str(bad.error)
    with pytest.raises(type(bad.error)):
        build_env.build(requests[1])
    assert results[2].job is not None and "demo_custom" in results[2].job.script_text


def test_build_many_takes_any_iterable(build_env: BuildEnv) -> None:
    results = scriptbuilder.build_many(build_env.request(k) for k in ("pytest", "eval"))
    assert [r.ok for r in results] == [True, True]
    assert scriptbuilder.build_many([]) == []


def sweep_file(path: Path, lines: list[Any]) -> Path:
    path.write_bytes(
        b"".join(
            (line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n"
            for line in lines
        )
    )
    return path


def results_of(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def test_many_writes_each_good_request_and_reports_every_line(build_env: BuildEnv) -> None:
    good_a = own_work_dir(build_env, "a")
    refused = {**own_work_dir(build_env, "refused"), "colour": "blue"}
    good_b = own_work_dir(build_env, "b", "custom")
    path = sweep_file(
        build_env.root / "sweep.jsonl",
        [
            good_a,
            refused,
            b"",
            b"   ",
            b"{not json",
            b"[1, 2]",
            b"\xff\xfe{}",
            b"[" * 100_000,
            good_b,
        ],
    )
    code, out, err = run_cli(["build", "--many", str(path)])
    assert err == ""
    assert code == 2
    results = results_of(out)
    assert [r["line"] for r in results] == [1, 2, 5, 6, 7, 8, 9]
    assert [r["ok"] for r in results] == [True, False, False, False, False, False, True]
    first, last = results[0], results[-1]
    assert first["work_dir"] == good_a["work_dir"]
    assert first["files"] == [
        f"{good_a['work_dir']}/qwen3_30b_auto_test.slurm",
        f"{good_a['work_dir']}/sb_test_records.py",  # the per-test recording plugin
        f"{good_a['work_dir']}/job_spec.json",
    ]
    for written in first["files"] + last["files"]:
        assert Path(written).is_file()
    assert "'colour' is unknown" in results[1]["error"]
    assert "write one JSON object per line" in results[2]["error"]
    assert "not a JSON object" in results[3]["error"]
    assert "not UTF-8" in results[4]["error"]
    assert "nested too deeply" in results[5]["error"]
    for failed in results[1:-1]:
        assert failed["exit_code"] == 2
        assert "\n" not in failed["error"] and len(failed["error"]) < 1000
    assert not (build_env.root / "refused").exists()  # a refused request writes nothing


def test_many_same_files_as_single_builds(build_env: BuildEnv, tmp_path: Path) -> None:
    request = own_work_dir(build_env, "sweep")
    path = sweep_file(build_env.root / "sweep.jsonl", [request])
    code, out, _ = run_cli(["build", "--many", str(path)])
    assert code == 0 and results_of(out)[0]["ok"]
    single = build_env.root / "single.json"
    single.write_text(json.dumps({**request, "work_dir": str(build_env.root / "single")}))
    assert run_cli(["build", str(single)])[0] == 0
    swept = (build_env.root / "sweep" / "qwen3_30b_auto_test.slurm").read_bytes()
    alone = (build_env.root / "single" / "qwen3_30b_auto_test.slurm").read_bytes()
    assert swept.replace(b"/sweep", b"/single") == alone


def test_many_all_good_exits_0_and_dry_run_writes_nothing(build_env: BuildEnv) -> None:
    requests = [own_work_dir(build_env, f"w{i}", k) for i, k in enumerate(("eval", "bench"))]
    path = sweep_file(build_env.root / "sweep.jsonl", requests)
    before = snapshot_tree(build_env.root)
    code, out, _ = run_cli(["build", "--many", str(path), "--dry-run"])
    assert code == 0
    assert snapshot_tree(build_env.root) == before
    results = results_of(out)
    assert [r["ok"] for r in results] == [True, True]
    assert results[0]["files"][-1] == f"{requests[0]['work_dir']}/job_spec.json"
    code, out, _ = run_cli(["build", "--many", str(path)])
    assert code == 0
    assert all(Path(f).is_file() for r in results_of(out) for f in r["files"])


def test_many_os_error_is_a_result_line_naming_the_path(build_env: BuildEnv) -> None:
    blocker = build_env.root / "a-file"
    blocker.write_text("")
    request = {**own_work_dir(build_env, "x"), "work_dir": str(blocker / "work")}
    path = sweep_file(build_env.root / "sweep.jsonl", [request, own_work_dir(build_env, "ok")])
    code, out, _ = run_cli(["build", "--many", str(path)])
    assert code == 2
    bad, good = results_of(out)
    assert bad["ok"] is False and bad["exit_code"] == 2  # a work_dir that cannot be made
    assert bad["error"] == (
        f"cannot create work_dir {blocker}/work: Not a directory; make {blocker} a folder "
        "or choose another work_dir"
    )
    assert good["ok"] is True


def test_many_from_stdin(build_env: BuildEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    data = (json.dumps(own_work_dir(build_env, "in")) + "\n").encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, out, err = run_cli(["build", "--many", "-", "--dry-run"])
    assert code == 0, err
    assert results_of(out)[0]["ok"] is True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["build"], "Missing argument 'REQUEST'"),
        (["build", "r.json", "--many", "s.jsonl"], "either REQUEST or --many FILE"),
        (["build", "--many", "s.jsonl", "--explain"], "--explain works on one REQUEST"),
        (["build", "--many", "/no/such/sweep.jsonl"], "--many /no/such/sweep.jsonl: No such file"),
    ],
)
def test_many_usage_errors(args: list[str], message: str) -> None:
    code, out, err = run_cli(args)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("scriptbuilder: error: ")
    assert message in err


@pytest.mark.parametrize("how", ["build_many", "--many"])
def test_a_test_db_list_is_read_again_by_the_next_call(build_env: BuildEnv, how: str) -> None:
    """Within one call (or one ``--many`` run) the requests of a checkout share its
    test-db lists; a list rewritten between two calls gives the next call's jobs its
    new stage."""
    (build_env.repo / "test_unmarked.py").write_text("def test_x():\n    pass\n")
    lists = build_env.repo / "tests/integration/test_lists/test-db"
    lists.mkdir(parents=True, exist_ok=True)
    request = {
        **own_work_dir(build_env, "listed"),
        "test_cmd": "pytest test_unmarked.py::test_x",
    }

    def devices(gpus: int) -> list[int]:
        (lists / "l0_sweep.yml").write_text(
            "l0_sweep:\n- condition:\n    ranges:\n      system_gpu_count:\n"
            f"        gte: {gpus}\n  tests:\n  - test_unmarked.py::test_x\n"
        )
        if how == "build_many":
            results = scriptbuilder.build_many([request, request], **OPTIONS)
            return [json.loads(r.job.job_spec_json)["required_devices"] for r in results if r.job]
        path = sweep_file(build_env.root / "sweep.jsonl", [request, request])
        code, out, err = run_cli(["build", "--many", str(path), "--dry-run"])
        assert code == 0, err
        return [r["job_spec"]["required_devices"] for r in results_of(out)]

    assert devices(2) == [2, 2]
    assert devices(4) == [4, 4]
