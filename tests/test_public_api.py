"""The public API is importable from the package, as the README lists it."""

from __future__ import annotations

import re
from pathlib import Path

import scriptbuilder


def test_the_package_exports_the_api_and_its_types() -> None:
    from scriptbuilder import (
        BuildError,
        BuildRequest,
        BuildResult,
        BuiltJob,
        JobSpec,
        LifecycleError,
        Run,
        SlurmEnv,
        SweepResult,
        Verdict,
        build,
        build_many,
        open_run,
        submit,
    )
    from scriptbuilder.api import BuiltJob as ApiBuiltJob
    from scriptbuilder.api import SweepResult as ApiSweepResult
    from scriptbuilder.api import build as api_build
    from scriptbuilder.api import build_many as api_build_many
    from scriptbuilder.errors import BuildError as ErrorsBuildError
    from scriptbuilder.lifecycle import LifecycleError as LcError
    from scriptbuilder.lifecycle import Run as LcRun
    from scriptbuilder.lifecycle import Verdict as LcVerdict
    from scriptbuilder.lifecycle import open_run as lc_open_run
    from scriptbuilder.lifecycle import submit as lc_submit
    from scriptbuilder.models.build_result import BuildResult as ModelBuildResult
    from scriptbuilder.models.job_spec import JobSpec as ModelJobSpec
    from scriptbuilder.models.request import BuildRequest as ModelBuildRequest
    from scriptbuilder.models.slurm_env import SlurmEnv as ModelSlurmEnv

    assert (build, build_many, BuiltJob, SweepResult) == (
        api_build, api_build_many, ApiBuiltJob, ApiSweepResult
    )  # fmt: skip
    assert (submit, open_run, Run, Verdict, LifecycleError) == (
        lc_submit, lc_open_run, LcRun, LcVerdict, LcError
    )  # fmt: skip
    assert (BuildRequest, SlurmEnv, JobSpec, BuildResult, BuildError) == (
        ModelBuildRequest, ModelSlurmEnv, ModelJobSpec, ModelBuildResult, ErrorsBuildError
    )  # fmt: skip
    assert Verdict.PASSED.exit_code == 0


def test_the_models_package_exports_the_models() -> None:
    from scriptbuilder.models import BuildRequest, BuildResult, JobSpec, SlurmEnv

    assert (BuildRequest, BuildResult, JobSpec, SlurmEnv) == (
        scriptbuilder.BuildRequest, scriptbuilder.BuildResult,
        scriptbuilder.JobSpec, scriptbuilder.SlurmEnv,
    )  # fmt: skip


def test_the_readme_lists_every_exported_name() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split("from scriptbuilder import (", 1)[1].split("\n)", 1)[0]
    code = "\n".join(line.split("#")[0] for line in block.splitlines())
    listed = set(re.findall(r"\w+", code))
    assert listed == set(scriptbuilder.__all__) - {"__version__"}
