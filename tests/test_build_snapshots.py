"""Snapshots of ``scriptbuilder build``: the script, job_spec.json and the report,
for each workflow x scenario. Sandbox paths are replaced by <TMP> and <REPO>.

Review with ``git diff tests/snapshots``; accept with ``--snapshot-update``.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from syrupy.assertion import SnapshotAssertion

from scriptbuilder.scenarios.registry import SCENARIOS as SCENARIO_REGISTRY
from scriptbuilder.workflows import registry
from tests.build_env import BuildEnv

WORKFLOWS = list(registry.WORKFLOWS)
SCENARIOS = list(SCENARIO_REGISTRY)


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_build_snapshot(
    build_env: BuildEnv,
    script_snapshot: SnapshotAssertion,
    json_snapshot: SnapshotAssertion,
    text_snapshot: SnapshotAssertion,
    workflow: str,
    scenario: str,
) -> None:
    job = build_env.build(build_env.request(workflow, execution_scenario=scenario))
    script = build_env.work_dir / job.script_name
    job.write()
    subprocess.run(["bash", "-n", str(script)], check=True)
    shellcheck = shutil.which("shellcheck")
    assert shellcheck
    check = subprocess.run(
        [shellcheck, "-S", "warning", str(script)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout
    assert build_env.scrub(job.script_text) == script_snapshot(name="script")
    assert build_env.scrub(job.job_spec_json) == json_snapshot(name="job_spec")
    assert build_env.scrub(job.report) == text_snapshot(name="report")
