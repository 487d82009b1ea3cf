"""The build request: every input field of the script-builder procedure, strictly typed."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, StringConstraints
from pydantic_core import PydanticCustomError

from scriptbuilder.models.defaults import DEFAULT_SECRET_PATTERNS
from scriptbuilder.models.fields import OneLine, Text

WorkflowType = Literal["pytest", "eval", "bench", "custom", "perf_sanity", "benchmark"]
ExecutionScenario = Literal["local_docker", "local_slurm", "remote_slurm"]
#: ``1h``, ``30m``, ``3600s`` or ``HH:MM:SS``, as the orchestrator writes it.
Duration = Annotated[
    str, StringConstraints(pattern=r"^([0-9]+[hms]|[0-9]+:[0-5][0-9]:[0-5][0-9])$")
]


def _job_name(value: str) -> str:
    """A job name ``sbatch -J`` and ``squeue --name`` (a comma-separated list) agree on."""
    if not value.strip():
        raise PydanticCustomError("job_name", "must not be blank")
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in value):
        raise PydanticCustomError(
            "job_name", "holds a control character, which squeue would show garbled"
        )
    if "," in value:
        raise PydanticCustomError(
            "job_name", "holds a comma, which squeue --name would read as two names"
        )
    return value


JobName = Annotated[OneLine, AfterValidator(_job_name)]


class EnvCheck(BaseModel):
    """What the orchestrator's environment check found on the local machine."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    gpus_per_node: int | None = Field(None, ge=1, description="GPUs per node (local_docker).")
    available_gpus: int | None = Field(None, ge=0, description="GPUs visible locally.")
    default_models_repo: OneLine | None = Field(
        None, description="Host folder holding the models, the last mount fallback."
    )


class BuildRequest(BaseModel):
    """Every input field of the script-builder procedure.

    Unknown fields are refused; each field is documented in the JSON Schema
    (``scriptbuilder schema request``).
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    workflow_type: WorkflowType = Field(description="What to run.")
    work_dir: OneLine = Field(description="Local folder receiving the script and job_spec.json.")
    execution_scenario: ExecutionScenario = Field(
        "local_slurm", description="Where it runs: local_docker, local_slurm or remote_slurm."
    )
    skill_dir: OneLine | None = Field(
        None, description="Folder of the calling skill (recorded only)."
    )
    repo_root: OneLine | None = Field(None, description="Local TensorRT-LLM checkout.")
    test_cmd: Text | None = Field(None, description="pytest command line (pytest, perf-sanity).")
    eval_cmd: Text | None = Field(None, description="trtllm-eval command line (eval).")
    bench_cmd: Text | None = Field(
        None,
        description="trtllm-bench command line; one top-level '&&' may separate the "
        "prepare-dataset step (bench).",
    )
    custom_cmd: Text | None = Field(None, description="Command line (custom).")
    custom_script: OneLine | None = Field(
        None, description="Script run as 'bash <custom_script>' (custom; wins over custom_cmd)."
    )
    custom_env: Text | None = Field(None, description="Shell assignments applied first (custom).")
    perf_config_yaml: OneLine | None = Field(None, description="Perf-sanity/benchmark config YAML.")
    perf_test_name: OneLine | None = Field(None, description="Server name in an aggregated config.")
    perf_benchmark_mode: Literal["e2e", "gen_only", "ctx_only"] | None = Field(
        None,
        description="submit.py --benchmark-mode for a disaggregated config file (default e2e).",
    )
    model_name: OneLine | None = Field(None, description="Job name prefix; derived when possible.")
    required_devices: int | None = Field(None, ge=1, description="GPUs needed (default 1).")
    node_count: int | None = Field(None, ge=1, description="Nodes requested.")
    partition: OneLine | None = Field(None, description="Slurm partition (Slurm scenarios).")
    account: OneLine | None = Field(None, description="Slurm account (Slurm scenarios).")
    slurm_env_file: OneLine | None = Field(
        None, description="Probe output; default <work_dir>/slurm_env.json."
    )
    time_limit: OneLine | None = Field(None, description="Job time limit (default 02:00:00).")
    llm_models_root: OneLine | None = Field(
        None, description="Models folder inside the container (LLM_MODELS_ROOT)."
    )
    checkpoint_path: OneLine | None = Field(
        None, description="Host checkpoint; its parent is mounted at llm_models_root."
    )
    models_path: OneLine | None = Field(None, description="Host models folder.")
    device_type: OneLine | None = Field(None, description="GPU type, e.g. B200 (recorded only).")
    persistent_mode: bool | None = Field(
        None, description="Reuse a held allocation (local_slurm; default on there)."
    )
    container_image: OneLine | None = Field(
        None, description="Image; wins over the properties file."
    )
    remote_repo_path: OneLine | None = Field(None, description="Checkout on the cluster (remote).")
    remote_work_dir: OneLine | None = Field(None, description="Work dir on the cluster (remote).")
    allow_missing_tests: bool | None = Field(
        None, description="Warn instead of stopping when a test id is not found (pytest)."
    )
    env_check: EnvCheck = Field(default_factory=EnvCheck)
    # The orchestrator's own fields: checked against what the build derives ...
    total_required_devices: int | None = Field(
        None, ge=1, description="GPUs the caller expects in all; must equal what the build derives."
    )
    required_devices_per_node: int | None = Field(
        None,
        ge=1,
        description="GPUs per node the caller expects; must equal what the build derives.",
    )
    # ... or carried through to job_spec.json for the executors.
    job_name: JobName | None = Field(
        None,
        description="The Slurm job name (#SBATCH --job-name and job_spec.json job_name; "
        "default <model_name>_<workflow suffix>). Log files keep the model-derived name. "
        "No comma or control character.",
    )
    build_project: bool | None = Field(None, description="Build the checkout first (executors).")
    skip_install: bool | None = Field(
        None,
        description="true: leave out the install step (pip install -e . and the requirements) "
        "when the image already holds TensorRT-LLM. Default: install first.",
    )
    monitor_timeout: Duration | None = Field(
        None, description="How long the executor watches the job: 1h, 30m, 3600s or HH:MM:SS."
    )
    slurm_cluster: OneLine | None = Field(None, description="Cluster name (executors).")
    gpu_type: OneLine | None = Field(None, description="GPU type (local_docker executor).")
    user_name: OneLine | None = Field(None, description="The user's name (recorded only).")
    ssh_host: OneLine | None = Field(
        None, description="Login host (remote); wins over slurm_env.ssh_host."
    )
    slurm_user: OneLine | None = Field(
        None, description="User on the login host (remote); wins over slurm_env.slurm_user."
    )
    slurm_password: SecretStr | None = Field(
        None, description="Accepted and never written anywhere.", exclude=True
    )
    remote_cwd: OneLine | None = Field(
        None, description="The user's folder on the cluster; wins over slurm_env.remote_cwd."
    )
    timeout_warning_seconds: int = Field(
        300,
        ge=1,
        le=65535,
        description="Seconds before the time limit at which the job is warned and prints "
        "its time-limit closing line (at most half the limit).",
    )
    # Factories, so no request shares a list; the schema shows plain defaults.
    secret_name_patterns: list[Text] = Field(
        default_factory=lambda: list(DEFAULT_SECRET_PATTERNS),
        json_schema_extra={"default": list(DEFAULT_SECRET_PATTERNS)},
        description="Shell wildcards (any letter case) of custom_env names whose values are "
        "secret: shown as *** in every printout.",
    )
    secret_values: list[Text] = Field(
        default_factory=list,
        json_schema_extra={"default": []},
        description="Further secret values, shown as *** in every printout.",
    )
    secrets_from_environment: bool = Field(
        False,
        description="Secret custom_env values are read from the job's environment at run "
        "time instead of being written into the script.",
    )
