"""Campaigns: a list of tests (a list file in TensorRT-LLM's grammar, or a test-db
selection) planned into few jobs and built as one work_dir per job plus campaign.json."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.api import build_campaign
from scriptbuilder.campaign.entries import Entry, parse_line, select_test_db
from scriptbuilder.campaign.plan import STARTUP_MINUTES, TOLERANCE, Need, pack, simulate
from scriptbuilder.errors import BuildError
from scriptbuilder.lifecycle.record import load_build
from scriptbuilder.models.campaign import CampaignFile
from scriptbuilder.models.job_spec import JobSpec
from scriptbuilder.models.request import TestDbSelection
from tests.build_env import FIXED_CLOCK, BuildEnv
from tests.script_runner import check_syntax
from tests.test_build_stops import cli_refusal, run_cli, snapshot_tree

#: The shared corpus beside the checkout (or beside the folder of its worktree).
ROOT = Path(__file__).resolve().parent.parent
FIXTURE = next(
    (
        folder / "shared" / "fixtures" / "trtllm-tests"
        for folder in (ROOT.parent, ROOT.parent.parent)
        if (folder / "shared" / "fixtures" / "trtllm-tests").is_dir()
    ),
    ROOT.parent / "shared" / "fixtures" / "trtllm-tests",
)
H100 = "tests/integration/test_lists/test-db/l0_dgx_h100.yml"

#: The six tests of the 4-GPU pre-merge PyTorch block of the real l0_dgx_h100.yml
#: excerpt (read by hand from the file: lines 21-26), with their -m filter.
H100_BLOCK = [
    ("unittest/_torch/multi_gpu", None),
    ("unittest/_torch/auto_deploy/unit/multigpu", None),
    ("unittest/llmapi/test_llm_multi_gpu_pytorch.py", "gpu4"),
    (
        "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_bfloat16_4gpus"
        "[tp4-attn_backend=TRTLLM-torch_compile=False]",
        None,
    ),
    (
        "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_fp8_4gpus"
        "[tp4-fp8kv=False-attn_backend=TRTLLM-torch_compile=False]",
        None,
    ),
    (
        "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_fp8_4gpus"
        "[pp4-fp8kv=True-attn_backend=TRTLLM-torch_compile=False]",
        None,
    ),
]


@pytest.fixture
def real_checkout(tmp_path: Path) -> Path:
    """The real TensorRT-LLM excerpt, copied for this test."""
    if not FIXTURE.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"the shared corpus is missing: {FIXTURE}")
        pytest.skip(f"the shared corpus is not beside this checkout ({FIXTURE})")
    return Path(shutil.copytree(FIXTURE, tmp_path / "trtllm-tests"))


@pytest.mark.parametrize(
    "selection",
    [
        {"gpus": 4, "gpu": "H100", "stage": "pre_merge", "backend": "pytorch"},
        {"gpus": 4, "gpu": "NVIDIA H100 80GB HBM3", "terms": {"auto_trigger": "others"}},
        {"terms": {"linux_distribution_name": "ubuntu22.04", "orchestrator": "mpi"}},
        {},
    ],
)
def test_a_test_db_selection_gives_the_tests_of_the_matching_block(
    real_checkout: Path, selection: dict[str, Any]
) -> None:
    entries = select_test_db(
        str(real_checkout), TestDbSelection(context="l0_dgx_h100", **selection)
    )
    assert [(e.test_id, e.mark) for e in entries] == H100_BLOCK
    assert [e.where for e in entries] == [f"{real_checkout / H100}:{n}" for n in range(21, 27)]


@pytest.mark.parametrize(
    ("selection", "shown"),
    [
        ({"gpus": 8}, "system_gpu_count=8"),
        ({"gpus": 4, "gpu": "B200"}, "system_gpu_count=4, gpu=B200"),
        ({"stage": "post_merge"}, "stage=post_merge"),
        ({"backend": "tensorrt"}, "backend=tensorrt"),
        ({"terms": {"linux_distribution_name": "rocky8"}}, "linux_distribution_name=rocky8"),
        ({"terms": {"auto_trigger": "others_h100"}}, "auto_trigger=others_h100"),
    ],
)
def test_a_test_db_selection_matching_no_block_is_refused(
    real_checkout: Path, build_env: BuildEnv, tmp_path: Path, selection: dict[str, Any], shown: str
) -> None:
    request = build_env.request(
        test_cmd=None, repo_root=str(real_checkout), test_db={"context": "l0_dgx_h100", **selection}
    )
    message = cli_refusal(tmp_path, build_env.work_dir, request)
    assert message.startswith(f"test_db: no block of {real_checkout / H100} matches {shown}")


def test_an_unknown_test_db_context_is_refused(build_env: BuildEnv, tmp_path: Path) -> None:
    request = build_env.request(test_cmd=None, test_db={"context": "l0_nowhere"})
    message = cli_refusal(tmp_path, build_env.work_dir, request)
    assert message.startswith("test_db.context 'l0_nowhere': ")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("a.py::t[x-1]", Entry("a.py::t[x-1]", "l:1")),
        ("  a.py::t  # a comment", Entry("a.py::t", "l:1")),
        ("a.py::t[x#1]", Entry("a.py::t[x#1]", "l:1")),
        ('a.py -k "x and not y"', Entry("a.py", "l:1", keyword="x and not y")),
        ("a.py -m 'gpu4' -k z", Entry("a.py", "l:1", keyword="z", mark="gpu4")),
        ("a.py::t TIMEOUT (90)", Entry("a.py::t", "l:1", timeout_minutes=90)),
        (
            "a.py::t TIMEOUT (90),ISOLATION",
            Entry("a.py::t", "l:1", timeout_minutes=90, isolation=True),
        ),
        (
            "a.py::t ISOLATION TIMEOUT(5)",
            Entry("a.py::t", "l:1", timeout_minutes=5, isolation=True),
        ),
        (
            "a.py::t SKIP (https://nvbugs/1 flaky)",
            Entry("a.py::t", "l:1", skip="https://nvbugs/1 flaky"),
        ),
        ("a.py::t SKIP", Entry("a.py::t", "l:1", skip="")),
        ("", None),
        ("   # only a comment", None),
    ],
)
def test_list_lines_read_as_tensorrt_llm_writes_them(line: str, expected: Entry | None) -> None:
    assert parse_line(line, "l:1") == expected


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("a.py::t TIMEOUT 90", "'TIMEOUT' is not understood after the test id"),
        ("a.py::t TIMEOUT (0)", "TIMEOUT (0)"),
        ("a.py::t XFAIL (bug)", "'XFAIL' is not understood"),
        ("a.py::t other.py::u", "'other.py::u' is not understood"),
        ("a.py -k x -k y", "-k given twice"),
        ('-k "x"', "the line starts with '-k'"),
    ],
)
def test_a_list_line_that_does_not_parse_is_refused_with_its_file_and_line(
    build_env: BuildEnv, tmp_path: Path, line: str, said: str
) -> None:
    listing = tmp_path / "tests.txt"
    listing.write_text(
        f"# header\naccuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct\n{line}\n"
    )
    request = build_env.request(test_cmd=None, test_list=str(listing), model_name="l0")
    message = cli_refusal(tmp_path, build_env.work_dir, request)
    assert message.startswith(f"{listing}:3: ") and said in message


def _need(test_id: str, gpus: int, minutes: float, isolation: bool = False) -> Need:
    entry = Entry(test_id, "l:1", isolation=isolation)
    return Need(entry, gpus, False, None, "mark", minutes, ".test_durations")


def test_the_plan_groups_by_gpus_fits_the_time_limit_and_isolates() -> None:
    needs = [_need(f"t{i}.py", gpus, 10.0) for i, gpus in enumerate([1] * 20 + [4] * 6 + [8] * 2)]
    needs.append(_need("alone.py", 1, 5.0, isolation=True))
    jobs, plan = pack(needs, nodes=2, gpus_per_node=8, usable=60.0)
    assert sorted(n.entry.test_id for job in jobs for n in job.needs) == sorted(
        n.entry.test_id for n in needs
    )
    for job in jobs:
        assert {n.gpus for n in job.needs} == {job.gpus}
        assert job.minutes <= 60.0
    (alone,) = [job for job in jobs if any(n.entry.isolation for n in job.needs)]
    assert [n.entry.test_id for n in alone.needs] == ["alone.py"]
    # 20x1 + 6x4 + 2x8 GPUs x 10 min + 5 over 16 GPUs
    assert plan.lower_bound == pytest.approx((200 + 240 + 160 + 5) / 16)
    assert plan.makespan <= 1.5 * plan.lower_bound + STARTUP_MINUTES
    # One job per test would pay the start-up 29 times over, for a makespan hardly shorter.
    single = simulate(((STARTUP_MINUTES + n.minutes, n.gpus) for n in needs), 2, 8)
    assert plan.gpu_hours < sum((STARTUP_MINUTES + n.minutes) * n.gpus for n in needs) / 60
    assert plan.makespan <= TOLERANCE * single + STARTUP_MINUTES


def test_the_plan_keeps_to_max_jobs_or_says_why_not() -> None:
    needs = [_need(f"t{i}.py", 1, 10.0) for i in range(12)] + [_need("big.py", 8, 10.0)]
    jobs, _ = pack(needs, nodes=4, gpus_per_node=8, usable=200.0, max_jobs=2)
    assert len(jobs) == 2
    with pytest.raises(BuildError, match="max_jobs = 1, but the tests need at least 2 jobs"):
        pack(needs, nodes=4, gpus_per_node=8, usable=200.0, max_jobs=1)
    with pytest.raises(BuildError, match="need at least 4 jobs"):  # 3x4 of 1 GPU, 1 of 8
        pack(needs, nodes=4, gpus_per_node=8, usable=60.0, max_jobs=2)


PY = "accuracy/test_llm_api_pytorch.py"
LLAMA = f"{PY}::TestLlama3_1_8BInstruct"
LIST = f"""\
# a campaign over the sandbox checkout
{LLAMA}::test_bfloat16
{LLAMA}::test_fp8_large_memory TIMEOUT (30)
{PY}::TestDeepSeekV3Lite::test_fp8_4gpus
{PY}::TestQwen3_30B_A3B::test_auto_dtype[tp4-attn_backend=TRTLLM] ISOLATION
accuracy/test_disaggregated_serving.py::TestLlama3_1_8BInstruct SKIP (https://nvbugs/1)
unittest/_torch/modules/test_linear_multi.py
unittest/_torch/multi_gpu/test_allreduce.py -k "not fp8"
"""
DURATIONS = {f"{LLAMA}::test_bfloat16": 120.0, f"{PY}::TestDeepSeekV3Lite::test_fp8_4gpus": 600.0}


def _campaign_request(build_env: BuildEnv, tmp_path: Path, text: str = LIST, **fields: Any) -> Path:
    (build_env.repo / "tests/integration/defs/.test_durations").write_text(json.dumps(DURATIONS))
    (tmp_path / "tests.txt").write_text(text)
    request = build_env.request(test_cmd=None, test_list="tests.txt", model_name="l0", **fields)
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    return path


def test_a_campaign_build_writes_one_ordinary_work_dir_per_job(
    build_env: BuildEnv, tmp_path: Path
) -> None:
    request = _campaign_request(build_env, tmp_path)
    (build_env.work_dir / "job-99").mkdir()  # an earlier build's
    code, out, err = run_cli(["build", str(request)])
    assert code == 0, err
    campaign = CampaignFile.model_validate_json((build_env.work_dir / "campaign.json").read_text())
    assert out.startswith(f"Campaign: {build_env.work_dir / 'campaign.json'}\n")
    ran = {
        e.test_id: (job.gpus, e.minutes, e.minutes_source)
        for job in campaign.jobs
        for e in job.entries
    }
    default = "default_test_minutes"
    assert ran == {
        f"{LLAMA}::test_bfloat16": (1, 2.0, ".test_durations"),
        f"{LLAMA}::test_fp8_large_memory": (1, 30.0, "TIMEOUT marker"),
        f"{PY}::TestDeepSeekV3Lite::test_fp8_4gpus": (4, 10.0, ".test_durations"),
        f"{PY}::TestQwen3_30B_A3B::test_auto_dtype[tp4-attn_backend=TRTLLM]": (4, 10.0, default),
        "unittest/_torch/modules/test_linear_multi.py": (8, 10.0, default),
        "unittest/_torch/multi_gpu/test_allreduce.py": (8, 10.0, default),
    }
    assert [(s.test_id, s.reason) for s in campaign.skipped] == [
        ("accuracy/test_disaggregated_serving.py::TestLlama3_1_8BInstruct", "https://nvbugs/1")
    ]
    # The two 8-GPU unit tests share a job: one pytest run each, as the -k one needs.
    (eight,) = [job for job in campaign.jobs if job.gpus == 8]
    assert eight.test_cmd.splitlines()[1:3] == [
        "pytest -v unittest/_torch/modules/test_linear_multi.py || sb_rc=${sb_rc:-$?}",
        "pytest -v unittest/_torch/multi_gpu/test_allreduce.py -k 'not fp8' || sb_rc=${sb_rc:-$?}",
    ]
    isolated = [job for job in campaign.jobs if any(e.isolation for e in job.entries)]
    assert [len(job.entries) for job in isolated] == [1]
    for job in campaign.jobs:
        build = load_build(Path(job.work_dir))  # what submit, status and watch read
        spec = JobSpec.model_validate(build.spec)
        assert (spec.total_required_devices, spec.work_dir) == (job.gpus, job.work_dir)
        script = build.script.read_text()
        assert f"#SBATCH --gres=gpu:{job.gpus}\n" in script
        assert f"#SBATCH --output={job.work_dir}/l0_auto_test_%j.out\n" in script
        check_syntax(build.script)
    assert sorted(p.name for p in build_env.work_dir.iterdir()) == [
        ".scriptbuilder.lock", "campaign.json", *(j.name for j in campaign.jobs), "job-99",
        "slurm_env.json",
    ]  # fmt: skip
    assert f"{build_env.work_dir / 'job-99'} is not a job of this campaign" in campaign.warnings[0]


def test_the_job_command_runs_every_invocation_and_ends_with_the_first_failure(
    tmp_path: Path,
) -> None:
    job_cmd = pack(
        [_need("a.py", 1, 1.0), Need(Entry("b.py", "l:2", mark="m"), 1, False, None, "", 1.0, "")],
        nodes=1,
        gpus_per_node=1,
        usable=None,
        max_jobs=1,
    )[0][0].test_cmd
    fake = tmp_path / "pytest"
    fake.write_text(
        '#!/bin/sh\necho "$@" >> "$LOG"\ncase "$2" in a.py) exit 3;; *) exit 1;; esac\n'
    )
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "LOG": str(tmp_path / "log")}
    done = subprocess.run(["bash", "-c", job_cmd], env=env, check=False)
    assert done.returncode == 3
    assert (tmp_path / "log").read_text() == "-v a.py\n-v b.py -m m\n"


def test_dry_run_and_explain_show_the_plan_and_write_nothing(
    build_env: BuildEnv, tmp_path: Path
) -> None:
    request = _campaign_request(build_env, tmp_path)
    before = snapshot_tree(build_env.work_dir)
    code, out, err = run_cli(["build", "--dry-run", "--explain", str(request)])
    assert code == 0, err
    assert snapshot_tree(build_env.work_dir) == before
    assert f"{tmp_path / 'tests.txt'}:2  {LLAMA}::test_bfloat16  1 GPUs" in out
    assert "2.00 min <- .test_durations" in out
    shown = out.split("# --- campaign.json (not written)\n")[1]
    assert CampaignFile.model_validate_json(shown).jobs


def test_an_unknown_test_id_is_refused_or_left_out_when_allowed(
    build_env: BuildEnv, tmp_path: Path
) -> None:
    text = LIST + f"{PY}::TestNowhere::test_x\nnowhere/test_gone.py\n"
    request = json.loads(_campaign_request(build_env, tmp_path, text).read_text())
    message = cli_refusal(tmp_path, build_env.work_dir, request)
    assert message.startswith(f"{tmp_path / 'tests.txt'}:9: ")
    assert message.endswith("fix the test id (or pass allow_missing_tests: true)")
    campaign = build_campaign(
        {**request, "allow_missing_tests": True, "test_list": str(tmp_path / "tests.txt")},
        environ={"HOME": build_env.home},
        machine=lambda: "x86_64",
        clock=lambda: FIXED_CLOCK,
    ).campaign
    assert [(m.test_id, m.where) for m in campaign.missing] == [
        (f"{PY}::TestNowhere::test_x", f"{tmp_path / 'tests.txt'}:9"),
        ("nowhere/test_gone.py", f"{tmp_path / 'tests.txt'}:10"),
    ]


def test_a_need_above_one_node_is_refused_with_its_line(
    build_env: BuildEnv, tmp_path: Path
) -> None:
    request = json.loads(_campaign_request(build_env, tmp_path, partition="arm").read_text())
    message = cli_refusal(tmp_path, build_env.work_dir, request)
    assert message.startswith(
        f"{tmp_path / 'tests.txt'}:7: unittest/_torch/modules/test_linear_multi.py needs 8 GPUs"
    )
    assert "more than the 4 GPUs per node of partition arm" in message


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"test_cmd": "pytest a.py"}, "request field 'test_list': replaces test_cmd"),
        ({"required_devices": 2}, "required_devices is derived for each job"),
        ({"persistent_mode": True}, "persistent_mode: campaign jobs run side by side"),
        ({"workflow_type": "custom", "custom_cmd": "x"}, "is a list of pytest tests"),
        ({"time_limit": "00:10:00"}, "more than a job can hold within 80% of the time limit"),
    ],
)
def test_campaign_requests_that_cannot_be_built(
    build_env: BuildEnv, tmp_path: Path, fields: dict[str, Any], said: str
) -> None:
    request = json.loads(_campaign_request(build_env, tmp_path).read_text())
    message = cli_refusal(tmp_path, build_env.work_dir, {**request, **fields})
    assert said in message


def test_the_benchmark_plans_fewer_gpu_hours_than_one_job_per_test() -> None:
    script = ROOT / "benchmarks" / "campaign_plan.py"
    done = subprocess.run(
        [sys.executable, str(script), "--tests", "60", "--nodes", "2"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = {line[:18].strip(): line[18:].split() for line in done.stdout.splitlines()[2:]}
    bound, planned, single = rows["lower bound"], rows["planned campaign"], rows["one job per test"]
    assert single[0] == "60" and int(planned[0]) < 60
    assert float(planned[3]) < float(single[3])  # GPU-hours
    assert float(planned[1]) <= 1.5 * float(bound[1]) + STARTUP_MINUTES  # makespan


@pytest.mark.parametrize("dry_run", [True, False])
def test_build_json_of_a_campaign(build_env: BuildEnv, tmp_path: Path, dry_run: bool) -> None:
    request = _campaign_request(build_env, tmp_path)
    before = snapshot_tree(build_env.work_dir)
    code, out, err = run_cli(["build", "--json", *(["--dry-run"] if dry_run else []), str(request)])
    assert (code, err) == (0, "")
    result = json.loads(out)
    assert (result["ok"], result["written"], "job_spec" in result) == (True, not dry_run, False)
    campaign = CampaignFile.model_validate(result["campaign"])
    assert result["files"][-1] == str(build_env.work_dir / "campaign.json")
    assert {str(Path(f).parent) for f in result["files"][:-1]} == {
        j.work_dir for j in campaign.jobs
    }
    assert (snapshot_tree(build_env.work_dir) == before) is dry_run


def test_an_entry_whose_selection_the_source_does_not_show_is_refused(
    build_env: BuildEnv, tmp_path: Path
) -> None:
    text = LIST + 'unittest/_torch/test_moe.py -k "nothing_here"\n'
    request = json.loads(_campaign_request(build_env, tmp_path, text).read_text())
    message = cli_refusal(tmp_path, build_env.work_dir, request)
    assert message.startswith(
        f"{tmp_path / 'tests.txt'}:9: no test of unittest/_torch/test_moe.py matches -k "
        "nothing_here, so the GPUs it needs are not known"
    )
