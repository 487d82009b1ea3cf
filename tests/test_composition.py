"""One composition point (JobBuilder), the workflows' MPI rules, plain values for plans
and trees."""

from __future__ import annotations

import dataclasses

import pytest

from scriptbuilder.job.builder import JobBuilder
from scriptbuilder.resolution.mpi import clears_mpi_env, names_pmix
from scriptbuilder.scenarios.registry import SCENARIOS
from scriptbuilder.script.plan import Container, JobSetup, SlurmAllocation, TaskShape
from scriptbuilder.script.render import render
from scriptbuilder.script.tree import Command, Lit, Run, Var, Word
from scriptbuilder.workflows.bench import BenchWorkflow
from scriptbuilder.workflows.eval import EvalWorkflow
from scriptbuilder.workflows.registry import WORKFLOWS
from tests.build_env import BuildEnv

SHAPE = TaskShape(1, 4, 4, "pmix_v5")


def allocation(shape: TaskShape = SHAPE) -> SlurmAllocation:
    return SlurmAllocation("m_eval", "gpu", "acct", "01:00:00", shape, None, "/logs")


CONTAINER = Container("img:1", "m_eval", ("/a:/a",), "/code")


# ------------------------------------------------------------------ the MPI rule


@pytest.mark.parametrize(
    ("kind", "ntasks", "cluster", "requested", "expected"),
    [
        # The build (cluster known, nothing requested): procedure Step 3.
        ("pytest", 1, "pmix_v5", None, None),
        ("eval", 1, "pmix_v5", None, "pmix_v5"),
        ("eval", 4, "pmix", None, "pmix"),
        ("bench", 1, "pmix_v5", None, None),
        ("bench", 2, "pmix_v5", None, "pmix_v5"),
        ("custom", 4, "pmix_v5", None, None),
        # The drop-in (no cluster, --mpi as requested).
        ("pytest", 2, None, "pmi2", "pmi2"),
        ("custom", 1, None, None, None),
        ("custom", 16, None, "pmix_v4", "pmix_v4"),
        ("bench", 2, None, None, "pmix"),
        ("bench", 2, None, "pmi2", "pmix"),
        ("bench", 2, None, "pmix_v4", "pmix_v4"),
        ("eval", 1, None, "pmix_v5", "pmix_v5"),
        ("eval", 1, None, None, "pmix"),
        ("eval", 1, None, "pmi2", "pmix"),
        ("eval", 2, None, "pmix_v4", "pmix_v4"),
    ],
)
def test_workflow_mpi_rules(
    kind: str, ntasks: int, cluster: str | None, requested: str | None, expected: str | None
) -> None:
    rule = WORKFLOWS[kind].mpi_rule
    assert rule.plugin(ntasks=ntasks, cluster=cluster, requested=requested) == expected


def test_names_pmix() -> None:
    assert [names_pmix(p) for p in ("pmix", "pmix_v5", "pmix_v", "pmi2", None)] == [
        True,
        True,
        False,
        False,
        False,
    ]


def test_clears_mpi_env_only_single_node_without_mpi() -> None:
    assert clears_mpi_env(TaskShape(1, 4, 4, None))
    assert not clears_mpi_env(TaskShape(1, 4, 4, "pmix"))
    assert not clears_mpi_env(TaskShape(2, 2, 1, None))


def test_build_and_dropin_share_the_rule(build_env: BuildEnv) -> None:
    """A single-task eval gets the cluster's plugin in the build (procedure: always),
    and a pmix plugin from the drop-in too (the old script's defect, not kept)."""
    job = build_env.build(build_env.request("eval", eval_cmd="trtllm-eval --model /m/x gsm8k"))
    assert "--mpi=pmix_v5" in job.script_text
    assert job.job_spec_data["slurm_params"]["mpi_plugin"] == "pmix_v5"


# -------------------------------------------------------------- the scenarios


def setup(allocation: SlurmAllocation | None = None, models_root: str = "/m") -> JobSetup:
    return JobSetup("m_eval", CONTAINER, models_root, allocation)


def test_docker_plans_one_process() -> None:
    """The scenario, not its caller, says that Docker runs the steps as one process."""
    workflow = BenchWorkflow("", "trtllm-bench throughput")
    builder = JobBuilder(SCENARIOS["local_docker"], workflow, SHAPE, setup())
    (_install, run) = builder.plan().steps
    assert run.shape == TaskShape()
    assert "trtllm-llmapi-launch" not in builder.render()
    slurm = JobBuilder(SCENARIOS["local_slurm"], workflow, SHAPE, setup(allocation()))
    assert slurm.plan().steps[1].shape == SHAPE
    assert "trtllm-llmapi-launch" in slurm.render()


def test_slurm_script_exports_models_root_first() -> None:
    scenario = SCENARIOS["local_slurm"]
    text = render(
        scenario.assemble(setup(allocation(), "/models dir"), EvalWorkflow("x").plan(SHAPE))
    )
    assert "export LLM_MODELS_ROOT='/models dir'" in text


# ------------------------------------------------------------------ plain values


def test_plan_values_and_tree_nodes_are_frozen_values() -> None:
    assert TaskShape(1, 2, 2) == TaskShape(1, 2, 2)
    assert hash(Word.of("a", Var("X"))) == hash(Word((Lit("a"), Var("X"))))
    with pytest.raises(dataclasses.FrozenInstanceError):
        SHAPE.nodes = 3  # type: ignore[misc]
    node = Run(Command.of("echo", "hi"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.command = Command.of("true")  # type: ignore[misc]


def test_rendering_twice_gives_the_same_text() -> None:
    """No render memo: a shared node renders the same every time."""
    scenario = SCENARIOS["local_slurm"]
    builder = JobBuilder(scenario, EvalWorkflow("trtllm-eval gsm8k"), SHAPE, setup(allocation()))
    assert builder.render() == builder.render()


@pytest.mark.parametrize("bad", ["", "1x", "a-b"])
def test_var_refuses_bad_names(bad: str) -> None:
    with pytest.raises(ValueError, match="not a shell variable name"):
        Var(bad)
