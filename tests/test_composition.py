"""One composition point (JobBuilder), one MPI rule, plain values for plans and trees."""

from __future__ import annotations

import dataclasses

import pytest

from scriptbuilder.job.builder import JobBuilder
from scriptbuilder.resolution.mpi import clears_mpi_env, names_pmix, step_mpi
from scriptbuilder.scenarios.docker import Docker, DockerContainer
from scriptbuilder.scenarios.slurm import LocalSlurm, RemoteSlurm, SlurmScenario
from scriptbuilder.script.plan import Container, SlurmAllocation, TaskShape
from scriptbuilder.script.render import render
from scriptbuilder.script.tree import Command, Lit, Run, Var, Word
from scriptbuilder.workflows.bench import BenchWorkflow
from scriptbuilder.workflows.eval import EvalWorkflow
from tests.build_env import BuildEnv

SHAPE = TaskShape(1, 4, 4, "pmix_v5")


def allocation(shape: TaskShape = SHAPE) -> SlurmAllocation:
    return SlurmAllocation("m_eval", "gpu", "acct", "01:00:00", shape, None, "/logs")


CONTAINER = Container("img:1", "m_eval", "/a:/a", "/code")


# ------------------------------------------------------------------ the MPI rule


@pytest.mark.parametrize(
    ("kind", "ntasks", "nodes", "cluster", "requested", "expected"),
    [
        # The build (cluster known, nothing requested): procedure Step 3.
        ("pytest", 1, 1, "pmix_v5", None, None),
        ("eval", 1, 1, "pmix_v5", None, "pmix_v5"),
        ("eval", 4, 1, "pmix", None, "pmix"),
        ("bench", 1, 1, "pmix_v5", None, None),
        ("bench", 2, 1, "pmix_v5", None, "pmix_v5"),
        ("custom", 4, 1, "pmix_v5", None, None),
        ("custom", 16, 2, "pmix_v5", None, "pmix_v5"),
        # The drop-in (no cluster, --mpi as requested).
        ("pytest", 2, 1, None, "pmi2", "pmi2"),
        ("custom", 1, 1, None, None, None),
        ("bench", 2, 1, None, None, "pmix"),
        ("bench", 2, 1, None, "pmi2", "pmix"),
        ("bench", 2, 1, None, "pmix_v4", "pmix_v4"),
        ("eval", 1, 1, None, "pmix_v5", "pmix_v5"),
        ("eval", 1, 1, None, None, "pmix"),
        ("eval", 1, 1, None, "pmi2", "pmix"),
        ("eval", 2, 1, None, "pmix_v4", "pmix_v4"),
    ],
)
def test_step_mpi(
    kind: str,
    ntasks: int,
    nodes: int,
    cluster: str | None,
    requested: str | None,
    expected: str | None,
) -> None:
    got = step_mpi(kind, ntasks=ntasks, nodes=nodes, cluster=cluster, requested=requested)
    assert got == expected


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


# ------------------------------------------------------------- scenarios by data


def test_local_and_remote_slurm_differ_by_name_only() -> None:
    local = LocalSlurm(allocation(), CONTAINER, models_root="/models")
    remote = RemoteSlurm(allocation(), CONTAINER, models_root="/models")
    assert type(local) is type(remote) is SlurmScenario
    assert (local.name, remote.name) == ("local_slurm", "remote_slurm")
    assert dataclasses.replace(local, name="remote_slurm") == remote
    workflow = EvalWorkflow("trtllm-eval gsm8k")
    assert (
        JobBuilder(local, workflow, SHAPE).render() == JobBuilder(remote, workflow, SHAPE).render()
    )


def test_docker_plans_one_process() -> None:
    """The scenario, not its caller, says that Docker runs the steps as one process."""
    docker = Docker(DockerContainer("img:1", "m_bench", (), "/code", "/models"))
    builder = JobBuilder(docker, BenchWorkflow("", "trtllm-bench throughput"), SHAPE)
    (_install, run) = builder.plan().steps
    assert run.shape == TaskShape()
    assert "trtllm-llmapi-launch" not in builder.render()
    slurm = JobBuilder(
        LocalSlurm(allocation(), CONTAINER, models_root="/m"), builder.workflow, SHAPE
    )
    assert slurm.plan().steps[1].shape == SHAPE
    assert "trtllm-llmapi-launch" in slurm.render()


def test_slurm_script_exports_models_root_first() -> None:
    scenario = LocalSlurm(allocation(), CONTAINER, models_root="/models dir")
    text = render(scenario.assemble(EvalWorkflow("x").plan(SHAPE)))
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
    assert not hasattr(node, "__dict__")  # slotted


def test_rendering_twice_gives_the_same_text() -> None:
    """No render memo: a shared node renders the same every time."""
    scenario = LocalSlurm(allocation(), CONTAINER, models_root="/m")
    builder = JobBuilder(scenario, EvalWorkflow("trtllm-eval gsm8k"), SHAPE)
    assert builder.render() == builder.render()


@pytest.mark.parametrize("bad", ["", "1x", "a-b"])
def test_var_refuses_bad_names(bad: str) -> None:
    with pytest.raises(ValueError, match="not a shell variable name"):
        Var(bad)
