"""A build imports the readers its request needs: test inspection for pytest
requests, yaml for a request that is not JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.build_env import BuildEnv

_SHOW_MODULES = """
import sys
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
