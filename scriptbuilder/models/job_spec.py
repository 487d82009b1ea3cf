"""job_spec.json: every resolved value an executor needs."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

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
    mpi_plugin: str | None = Field(description="srun --mpi of the workload step, or null.")


class JobSpec(BaseModel):
    """Every resolved value an executor needs. Scenario-specific top-level fields
    are present only for their scenario (omitted rather than null)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    schema_version: int = SCHEMA_VERSION
    generator: str = Field(description="scriptbuilder and its version.")
    workflow_type: str
    model_name: str
    execution_scenario: str
    docker_image: str = Field(
        description="The image as the script uses it: enroot's REGISTRY#IMAGE for pyxis "
        "(Slurm), Docker's REGISTRY/IMAGE for docker run."
    )
    container_image: str = Field(description="The same image in Docker's REGISTRY/IMAGE form.")
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
