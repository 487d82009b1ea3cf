"""job_spec.json: every resolved value an executor needs, and the earlier one the
orchestrator writes before the build (its remote paths are read, other keys kept).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from scriptbuilder.models.fields import OneLine

SCHEMA_VERSION = 1


class SlurmParams(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    partition: str
    account: str
    time_limit: str
    nodes: int
    ntasks: int
    ntasks_per_node: int
    gpus_per_node: int | None
    gres: str | None = Field(description="'gpu:<n>', or null when no --gres line is written.")
    mpi_plugin: str | None = Field(
        description="The cluster's resolved MPI plugin (pmix.preferred, else pmix), for the "
        "executors' --mpi= flag; the workload steps' own --mpi is in the script."
    )


class JobSpec(BaseModel):
    """Every resolved value an executor needs. Scenario-specific top-level fields
    are present only for their scenario (omitted rather than null); keys of an
    earlier job_spec.json that the builder does not own are kept (extra keys)."""

    model_config = ConfigDict(extra="allow", strict=True)

    schema_version: int = SCHEMA_VERSION
    generator: str = Field(description="scriptbuilder and its version.")
    workflow_type: str
    model_name: str
    execution_scenario: str
    scenario: str = Field(description="The same as execution_scenario (the executors' key).")
    work_dir: str = Field(description="Local work folder (absolute).")
    repo_root: str | None = Field(None, description="Local checkout (absolute), when known.")
    docker_image: str = Field(
        description="The image as the script uses it: enroot's REGISTRY#IMAGE for pyxis "
        "(Slurm), Docker's REGISTRY/IMAGE for docker run."
    )
    container_image: str = Field(description="The same image in Docker's REGISTRY/IMAGE form.")
    job_name: str = Field(
        description="The Slurm job name (the request's job_name, else <model_name>_<suffix>); "
        "for local_docker the container name."
    )
    required_devices: int
    required_devices_source: str | None = Field(
        None, description="What decided required_devices (pytest: the test's evidence)."
    )
    total_required_devices: int = Field(description="GPUs in all (= required_devices).")
    required_devices_per_node: int
    node_count: int
    script_path: str | None = Field(None, description="Local path of the script (Slurm).")
    script_name: str | None = None
    script_sha256: str | None = Field(
        None,
        description="sha256 (hex) of the script as written (script_path; docker_cmd.sh for "
        "local_docker): a script that does not match was not written with this file.",
    )
    log_file_pattern: str | None = Field(None, description="Slurm output file name, %j = job id.")
    success_patterns: list[str]
    failure_patterns: list[str]
    timeout_patterns: list[str] = Field(
        [], description="Log text of a job stopped at its time limit (Slurm)."
    )
    extra_files: list[str] = Field(description="Local files the remote executor copies too.")
    extra_files_sha256: dict[str, str] = Field(
        description="sha256 (hex) of each extra_files entry as written, by path."
    )
    test_records: str | None = Field(
        None,
        description="pytest: the file the job writes one JSON line per test start and "
        "outcome to (%j = job id), read by status, watch and results.",
    )
    slurm_params: SlurmParams | None = None
    slurm_env: dict[str, Any] | None = Field(None, description="slurm_env.json, verbatim.")
    remote_repo_path: str | None = None
    remote_work_dir: str | None = None
    persistent_mode: bool | None = None
    container_name: str | None = None
    container_mounts: str | None = None
    docker_cmd: str | None = Field(None, description="The docker run command (local_docker).")
    log_file: str | None = Field(None, description="Where the docker executor tees output.")
    # Carried through verbatim from the request (or the earlier job_spec.json) for the
    # executors; ssh_host, slurm_user and remote_cwd fall back to slurm_env's.
    build_project: Any = None
    skip_install: Any = None
    monitor_timeout: Any = None
    device_type: Any = None
    gpu_type: Any = None
    slurm_cluster: Any = None
    user_name: Any = None
    ssh_host: Any = None
    slurm_user: Any = None
    remote_cwd: Any = None
    warnings: list[str] = []


#: Request fields written as given; an earlier job_spec.json's value survives a missing one.
PASS_THROUGH = (
    "repo_root", "build_project", "skip_install", "monitor_timeout", "device_type", "gpu_type",
    "slurm_cluster", "user_name", "ssh_host", "slurm_user", "remote_cwd",
)  # fmt: skip


class EarlierJobSpec(BaseModel):
    """The fields read from the job_spec.json found before the build; other keys are kept."""

    model_config = ConfigDict(extra="allow", strict=True)

    remote_repo_path: OneLine | None = None
    remote_work_dir: OneLine | None = None
