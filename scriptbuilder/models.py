"""The pydantic models: the build request, slurm_env.json and job_spec.json.

They are the one declaration of those shapes. Their JSON Schemas are shipped
in ``scriptbuilder/data/schemas/`` (written by ``python -m scriptbuilder.schemas``;
a test keeps them current), and builds validate against those files, so the
CLI does not pay for importing pydantic. ``BuiltJob.job_spec`` gives the job
spec as a :class:`JobSpec`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1

# ------------------------------------------------------------------ the request

WorkflowType = Literal["pytest", "eval", "bench", "custom", "perf_sanity", "benchmark"]
ExecutionScenario = Literal["local_docker", "local_slurm", "remote_slurm"]


class EnvCheck(BaseModel):
    """What the orchestrator's environment check found on the local machine."""

    model_config = ConfigDict(extra="forbid")

    gpus_per_node: int | None = Field(None, ge=1, description="GPUs per node (local_docker).")
    available_gpus: int | None = Field(None, ge=0, description="GPUs visible locally.")
    default_models_repo: str | None = Field(
        None, description="Host folder holding the models, the last mount fallback."
    )


class BuildRequest(BaseModel):
    """Every input field of the script-builder procedure.

    Unknown fields are refused; each field is documented in the JSON Schema
    (``scriptbuilder schema request``).
    """

    model_config = ConfigDict(extra="forbid")

    workflow_type: WorkflowType = Field(description="What to run.")
    work_dir: str = Field(description="Local folder receiving the script and job_spec.json.")
    execution_scenario: ExecutionScenario = Field(
        "local_slurm", description="Where it runs: local_docker, local_slurm or remote_slurm."
    )
    skill_dir: str | None = Field(None, description="Folder of the calling skill (recorded only).")
    repo_root: str | None = Field(None, description="Local TensorRT-LLM checkout.")
    test_cmd: str | None = Field(None, description="pytest command line (pytest, perf-sanity).")
    eval_cmd: str | None = Field(None, description="trtllm-eval command line (eval).")
    bench_cmd: str | None = Field(
        None,
        description="trtllm-bench command line; one top-level '&&' may separate the "
        "prepare-dataset step (bench).",
    )
    custom_cmd: str | None = Field(None, description="Command line (custom).")
    custom_script: str | None = Field(
        None, description="Script run as 'bash <custom_script>' (custom; wins over custom_cmd)."
    )
    custom_env: str | None = Field(None, description="Shell assignments applied first (custom).")
    perf_config_yaml: str | None = Field(None, description="Perf-sanity/benchmark config YAML.")
    perf_test_name: str | None = Field(None, description="Server name in an aggregated config.")
    model_name: str | None = Field(None, description="Job name prefix; derived when possible.")
    required_devices: int | None = Field(None, ge=1, description="GPUs needed (default 1).")
    node_count: int | None = Field(None, ge=1, description="Nodes requested.")
    partition: str | None = Field(None, description="Slurm partition (Slurm scenarios).")
    account: str | None = Field(None, description="Slurm account (Slurm scenarios).")
    slurm_env_file: str | None = Field(
        None, description="Probe output; default <work_dir>/slurm_env.json."
    )
    time_limit: str | None = Field(None, description="Job time limit (default 02:00:00).")
    llm_models_root: str | None = Field(
        None, description="Models folder inside the container (LLM_MODELS_ROOT)."
    )
    checkpoint_path: str | None = Field(
        None, description="Host checkpoint; its parent is mounted at llm_models_root."
    )
    models_path: str | None = Field(None, description="Host models folder.")
    device_type: str | None = Field(None, description="GPU type, e.g. B200 (recorded only).")
    persistent_mode: bool | None = Field(
        None, description="Reuse a held allocation (local_slurm; default on there)."
    )
    container_image: str | None = Field(None, description="Image; wins over the properties file.")
    remote_repo_path: str | None = Field(None, description="Checkout on the cluster (remote).")
    remote_work_dir: str | None = Field(None, description="Work dir on the cluster (remote).")
    env_check: EnvCheck = Field(default_factory=EnvCheck)


# ------------------------------------------------------------------ slurm_env.json


class Partition(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    state: str | None = None
    time_limit: str | None = None
    nodes: str | int | None = None
    arch: str | None = None
    gres: str | None = None
    gpus_per_node: int | None = None
    requires_gres: bool = False


class Pmix(BaseModel):
    model_config = ConfigDict(extra="allow")

    available: list[str] = []
    preferred: str | None = None


class SlurmEnv(BaseModel):
    """The probe's output. Unknown keys are kept (the raw object is embedded in job_spec)."""

    model_config = ConfigDict(extra="allow")

    user: str | None = None
    default_account: str | None = None
    accounts: list[str] = []
    default_partition: str | None = None
    partitions: list[Partition] = []
    pmix: Pmix = Pmix()
    errors: list[str] = []
    cluster_name: str | None = None
    mounts: list[str] = []
    ssh_host: str | None = None
    slurm_user: str | None = None
    remote_cwd: str | None = None


# ------------------------------------------------------------------ job_spec.json


class SlurmParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    partition: str
    account: str
    time_limit: str
    nodes: int
    ntasks: int
    ntasks_per_node: int
    gpus_per_node: int | None
    gres: str | None = Field(description="'gpu:<n>', or null when no --gres line is written.")
    mpi_plugin: str | None = Field(description="srun --mpi of the workload step, or null.")


class JobSpec(BaseModel):
    """Every resolved value an executor needs. Scenario-specific top-level fields
    are present only for their scenario (omitted rather than null)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    generator: str = Field(description="scriptbuilder and its version.")
    workflow_type: str
    model_name: str
    execution_scenario: str
    docker_image: str
    required_devices: int
    node_count: int
    script_path: str | None = Field(None, description="Local path of the script (Slurm).")
    script_name: str | None = None
    log_file_pattern: str | None = Field(None, description="Slurm output file name, %j = job id.")
    success_patterns: list[str]
    failure_patterns: list[str]
    extra_files: list[str] = Field(description="Local files the remote executor copies too.")
    slurm_params: SlurmParams | None = None
    slurm_env: dict[str, Any] | None = Field(None, description="slurm_env.json, verbatim.")
    remote_repo_path: str | None = None
    remote_work_dir: str | None = None
    persistent_mode: bool | None = None
    container_name: str | None = None
    container_mounts: str | None = None
    docker_cmd: str | None = Field(None, description="The docker run command (local_docker).")
    log_file: str | None = Field(None, description="Where the docker executor tees output.")
    warnings: list[str] = []
