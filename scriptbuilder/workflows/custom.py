"""Custom: a user command run once per task through a run script."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from functools import cache
from pathlib import Path

from scriptbuilder.job.plan import Step, TaskShape
from scriptbuilder.resolution.mpi import clears_mpi_env
from scriptbuilder.script.tree import Command, Run, Statement, Var
from scriptbuilder.workflows.base import Workflow

RUN_SCRIPT_NAME = "slurm_run_custom.sh"
_RUN_PACKAGED: tuple[Statement, ...] = (Run(Command.of("bash", "-c", Var("1"), RUN_SCRIPT_NAME)),)
_RUN_FILE: tuple[Statement, ...] = (Run(Command.of("bash", Var("1"))),)


@cache
def packaged_run_script_path() -> Path:
    """The run script shipped with scriptbuilder."""
    return Path(__file__).resolve().parent.parent / "data" / RUN_SCRIPT_NAME


def packaged_run_script() -> str:
    """The packaged run script's text."""
    return packaged_run_script_path().read_text(encoding="utf-8")


@dataclass(frozen=True)
class CustomWorkflow(Workflow):
    """Exports ``CUSTOM_COMMAND``, ``CUSTOM_ENV``, ``CUSTOM_WORKDIR`` and ``llmSrcNode``.

    The run script applies ``CUSTOM_ENV``, changes to ``CUSTOM_WORKDIR`` and
    runs ``CUSTOM_COMMAND`` once. With ``run_script`` None the packaged run
    script travels inside the batch script itself, so no file has to be
    visible in the container; otherwise ``bash <run_script>`` runs that file.
    """

    kind = "custom"
    job_suffix = "custom"
    success_patterns = ()
    failure_patterns = ("Error", "Traceback")

    custom_cmd: str
    _: KW_ONLY
    custom_env: str = ""
    custom_workdir: str
    project_path: str
    run_script: str | None = None

    def env(self) -> tuple[tuple[str, str], ...]:
        return (
            ("CUSTOM_COMMAND", self.custom_cmd),
            ("CUSTOM_ENV", self.custom_env),
            ("CUSTOM_WORKDIR", self.custom_workdir),
            ("llmSrcNode", self.project_path),
        )

    def _run(self) -> tuple[tuple[Statement, ...], tuple[str, ...]]:
        """The step body and its arguments: the run script's text or its path."""
        if self.run_script is None:
            return _RUN_PACKAGED, (packaged_run_script(),)
        return _RUN_FILE, (self.run_script,)

    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
        body, args = self._run()
        return (
            Step(
                label="run the custom command",
                body=body,
                args=args,
                shape=shape,
                clear_mpi_env=clears_mpi_env(shape),
                command=self.custom_cmd,
            ),
        )
