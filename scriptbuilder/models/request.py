"""The build request: every input field of the script-builder procedure, strictly typed."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    ValidationInfo,
    field_validator,
)
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


class TestDbSelection(BaseModel):
    """A test-db context and the values its blocks' ``condition`` is matched against."""

    __test__ = False  # not a pytest test class
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    context: OneLine = Field(
        min_length=1,
        description="The test-db list: tests/integration/test_lists/test-db/<context>.yml.",
    )
    gpus: int | None = Field(None, ge=1, description="system_gpu_count (ranges).")
    gpu: OneLine | None = Field(None, description="GPU name, matched by the gpu wildcards.")
    stage: OneLine | None = Field(None, description="stage term, e.g. pre_merge.")
    backend: OneLine | None = Field(None, description="backend term, e.g. pytorch.")
    terms: dict[str, OneLine | int | bool] = Field(
        default_factory=dict,
        description="Any other condition key by name (orchestrator, auto_trigger, cpu, "
        "linux_distribution_name, ...).",
    )

    @field_validator("terms")
    @classmethod
    def _no_key_twice(cls, terms: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        named = {"gpus": "system_gpu_count", "gpu": "gpu", "stage": "stage", "backend": "backend"}
        for name, key in named.items():
            if info.data.get(name) is not None and key in terms:
                raise PydanticCustomError(
                    "test_db_twice",
                    "gives {key}, also given as {name}; keep one",
                    {"key": key, "name": name},
                )
        return terms


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
    test_list: OneLine | None = Field(
        None,
        description="A list file of test ids in TensorRT-LLM's line grammar (pytest, instead "
        "of test_cmd): a campaign of jobs is built into work_dir.",
    )
    test_db: TestDbSelection | None = Field(
        None,
        description="A test-db context and selection (pytest, instead of test_cmd): every "
        "test of every matching block, as a campaign of jobs built into work_dir.",
    )
    default_test_minutes: float = Field(
        10.0,
        gt=0,
        description="A campaign entry's minutes when neither .test_durations nor a TIMEOUT "
        "marker gives them.",
    )
    max_jobs: int | None = Field(
        None, ge=1, description="At most this many jobs in a campaign (default: no cap)."
    )
    share_node: bool | None = Field(
        None,
        description="true: a Slurm job asks for exactly the GPUs its tests need "
        "(--gres=gpu:N), so other jobs can share the node (campaign jobs always do). "
        "Default: the whole node's GPUs.",
    )
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

    @field_validator("test_list", "test_db")
    @classmethod
    def _one_test_source(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return value
        for other in ("test_cmd", "test_list"):
            if other != info.field_name and info.data.get(other) is not None:
                raise PydanticCustomError(
                    "test_source",
                    "replaces {other}, which is given too; pass one of them",
                    {"other": other},
                )
        if info.data.get("workflow_type") != "pytest":
            raise PydanticCustomError(
                "test_source", "is a list of pytest tests; pass workflow_type pytest"
            )
        return value

    @property
    def is_campaign(self) -> bool:
        """A list of tests (``test_list`` or ``test_db``), built as a campaign of jobs."""
        return self.test_list is not None or self.test_db is not None
