"""A build does only the work its request needs: test inspection for pytest
requests, yaml for a request that is not JSON, no validator or JSON encoder in
the drop-in, no copy of job_spec.json's data when there is no secret to mask."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.build_env import BuildEnv
from tests.test_compat_flags import base

_SHOW_MODULES = """
import sys
from pathlib import Path
from scriptbuilder.cli.build import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
print(" ".join(sorted(sys.modules)))
"""


def _modules_after_build(build_env: BuildEnv, name: str, text: str) -> set[str]:
    request = build_env.root / name
    request.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-c", _SHOW_MODULES, "build", "--dry-run", str(request)],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(proc.stdout.splitlines()[-1].split())


@pytest.mark.parametrize("workflow", ["eval", "bench", "custom"])
def test_json_request_without_tests_skips_yaml_and_test_inspection(
    build_env: BuildEnv, workflow: str
) -> None:
    modules = _modules_after_build(
        build_env, "request.json", json.dumps(build_env.request(workflow))
    )
    assert "scriptbuilder.api" in modules
    assert "yaml" not in modules
    assert not {m for m in modules if m.startswith("scriptbuilder.inputs.tests")}


def test_yaml_request_and_pytest_load_what_they_need(build_env: BuildEnv) -> None:
    request = build_env.request("pytest")
    text = "".join(f"{key}: {json.dumps(value)}\n" for key, value in request.items())
    modules = _modules_after_build(build_env, "request.yaml", text)
    assert {"yaml", "scriptbuilder.inputs.tests"} <= modules


_DROP_IN_MODULES = """
import sys
from pathlib import Path
from scriptbuilder.cli.dropin import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
print(" ".join(sorted(sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize("subcommand", ["pytest", "custom", "bench", "eval"])
def test_drop_in_imports_no_validator_json_or_yaml(tmp_path: Path, subcommand: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _DROP_IN_MODULES, *base(subcommand, tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.startswith("#!")
    modules = set(proc.stderr.splitlines()[-1].split())
    assert "scriptbuilder.script.render" in modules
    assert not modules & {"json", "yaml", "pydantic"}


def test_job_spec_data_is_not_copied_without_secrets() -> None:
    from scriptbuilder.resolution.secrets import mask_data

    data = {"slurm_env": {"partitions": [{"name": "gpu"}]}, "token": "s3cret"}
    assert mask_data(data, ()) is data
    assert mask_data(data, ("s3cret",)) == {
        "slurm_env": {"partitions": [{"name": "gpu"}]},
        "token": "***",
    }
