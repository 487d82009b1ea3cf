"""Image references: enroot's ``REGISTRY#IMAGE`` for every pyxis use, Docker's
``REGISTRY/IMAGE`` for ``docker run``, and the canonical Docker form in job_spec.json."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from scriptbuilder.inputs.image_ref import ImageRef, docker_form, enroot_form, parse_image
from scriptbuilder.script.render import quote_literal
from scriptbuilder.workflows.registry import WORKFLOWS
from tests.build_env import REAL_FILES, BuildEnv
from tests.script_runner import run_compat
from tests.test_build_stops import run_cli

URM_PATH = "sw-tensorrt-docker/tensorrt-llm-staging/tritondevel:x86_64-tritondevel-torch_skip-"
URM_PATH += "cca75fa-github-pr-9225-1249"
URM_DOCKER = "urm.nvidia.com/" + URM_PATH
URM_ENROOT = "urm.nvidia.com#" + URM_PATH
DIGEST = "sha256:" + "0123456789abcdef" * 4

# (value, enroot form, Docker form)
FORMS = [
    ("urm.nvidia.com/sw-tensorrt-docker/x:tag", "urm.nvidia.com#sw-tensorrt-docker/x:tag", None),
    ("nvcr.io#nvidia/pytorch:24.01-py3", None, "nvcr.io/nvidia/pytorch:24.01-py3"),
    ("nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io#nvidia/pytorch:24.01-py3", None),
    ("localhost/img:1", "localhost#img:1", None),
    ("localhost:5000/team/img", "localhost:5000#team/img", None),
    ("registry:5000/img", "registry:5000#img", None),
    ("localhost:5000#team/img", None, "localhost:5000/team/img"),
    # Docker Hub: the first component is no registry host, nothing to move
    ("nvidia/cuda:12.4.0-base", None, None),
    ("ubuntu:22.04", None, None),
    ("ubuntu", None, None),
    ("img", None, None),
    # an enroot user prefix stays in the enroot form; Docker has no place for it
    ("$oauthtoken@nvcr.io#nvidia/x", None, "nvcr.io/nvidia/x"),
    ("$oauthtoken@nvcr.io/nvidia/x", "$oauthtoken@nvcr.io#nvidia/x", "nvcr.io/nvidia/x"),
    ("alice@ubuntu", None, "ubuntu"),
    # a digest is no user prefix
    (f"ubuntu@{DIGEST}", None, None),
    (f"nvcr.io/nvidia/x@{DIGEST}", f"nvcr.io#nvidia/x@{DIGEST}", None),
    # squashfs files: untouched both ways
    ("/lustre/images/trtllm.sqsh", None, None),
    ("./trtllm.sqsh", None, None),
]


@pytest.mark.parametrize(("value", "enroot", "docker"), FORMS, ids=[f[0] for f in FORMS])
def test_forms(value: str, enroot: str | None, docker: str | None) -> None:
    expected_enroot = enroot or value
    expected_docker = docker or value
    assert enroot_form(value) == expected_enroot
    assert docker_form(value) == expected_docker
    # converting a value already in the target form changes nothing (never doubled)
    assert enroot_form(expected_enroot) == expected_enroot
    assert docker_form(expected_docker) == expected_docker
    assert enroot_form(docker_form(value)) == enroot_form(docker_form(expected_enroot))


def test_parse_parts() -> None:
    assert parse_image("u@nvcr.io#nvidia/x:1") == ImageRef("nvidia/x:1", "nvcr.io", "u")
    assert parse_image("nvidia/x") == ImageRef("nvidia/x")
    assert parse_image("/a.sqsh") == ImageRef("/a.sqsh", file=True)


def spec(job: object) -> dict[str, str]:
    data: dict[str, str] = json.loads(job.job_spec_json)  # type: ignore[attr-defined]
    return data


@pytest.mark.parametrize("scenario", ["local_slurm", "remote_slurm"])
@pytest.mark.parametrize("workflow", list(WORKFLOWS))
def test_slurm_script_uses_enroot_form(build_env: BuildEnv, scenario: str, workflow: str) -> None:
    (build_env.repo / "jenkins" / "current_image_tags.properties").write_text(
        (REAL_FILES / "current_image_tags.properties").read_text()
    )
    job = build_env.build(build_env.request(workflow, execution_scenario=scenario))
    assert quote_literal(f"--container-image={URM_ENROOT}") in job.script_text
    assert URM_DOCKER not in job.script_text
    data = spec(job)
    assert (data["docker_image"], data["container_image"]) == (URM_ENROOT, URM_DOCKER)


@pytest.mark.parametrize(
    ("given", "script"),
    [(URM_DOCKER, URM_DOCKER), (URM_ENROOT, URM_DOCKER), ("ubuntu:22.04", "ubuntu:22.04")],
)
def test_docker_run_uses_docker_form(build_env: BuildEnv, given: str, script: str) -> None:
    req = build_env.request(execution_scenario="local_docker", container_image=given)
    job = build_env.build(req)
    data = spec(job)
    assert f" {script} " in data["docker_cmd"]
    assert "#" not in data["docker_cmd"].split(" bash ")[0]
    assert (data["docker_image"], data["container_image"]) == (script, script)


def test_given_enroot_form_is_not_doubled(build_env: BuildEnv) -> None:
    job = build_env.build(build_env.request(container_image="nvcr.io#nvidia/x:1"))
    assert "'--container-image=nvcr.io#nvidia/x:1' " in job.script_text
    assert spec(job)["container_image"] == "nvcr.io/nvidia/x:1"


def test_submit_py_gets_enroot_form(build_env: BuildEnv) -> None:
    config = REAL_FILES / "gpt_oss_120b_fp4_blackwell.yaml"
    local = build_env.root / config.name
    shutil.copy(config, local)
    req = build_env.request(
        "benchmark",
        perf_config_yaml=str(local),
        perf_test_name="gpt_oss_fp4_tp2_mtp0_1k1k",
        model_name="demo",
        container_image=URM_DOCKER,
    )
    job = build_env.build(req)
    assert job.submit is not None
    argv = list(job.submit.argv)
    assert argv[argv.index("--image") + 1] == URM_ENROOT
    data = spec(job)
    assert (data["docker_image"], data["container_image"]) == (URM_ENROOT, URM_DOCKER)


def test_explain_shows_the_rewrite(build_env: BuildEnv, tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(build_env.request(container_image=URM_DOCKER)))
    code, out, err = run_cli(["build", "--dry-run", "--explain", str(path)])
    assert code == 0, err
    assert f"{URM_DOCKER}  <- container_image input" in out
    assert f"{URM_ENROOT}  <- enroot form for pyxis --container-image" in out


def test_explain_is_silent_when_nothing_changes(build_env: BuildEnv, tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(build_env.request(container_image="nvcr.io#nvidia/x:1")))
    code, out, err = run_cli(["build", "--dry-run", "--explain", str(path)])
    assert code == 0, err
    assert "enroot form" not in out


@pytest.mark.parametrize(
    ("given", "used"),
    [(URM_DOCKER, URM_ENROOT), (URM_ENROOT, URM_ENROOT), ("/images/x.sqsh", "/images/x.sqsh")],
)
def test_dropin_docker_image_gets_enroot_form(tmp_path: Path, given: str, used: str) -> None:
    outcome = run_compat(
        [
            "pytest",
            "--model-name",
            "m",
            "--log-dir",
            str(tmp_path / "logs"),
            "--partition",
            "p",
            "--account",
            "a",
            "--docker-image",
            given,
            "--container-mounts",
            "/a:/a",
            "--project-path",
            "/a",
            "--test-cmd",
            "pytest x",
        ]
    )
    assert outcome.exit_code == 0, outcome.stderr
    assert quote_literal(f"--container-image={used}") + " \\\n" in outcome.stdout


@pytest.mark.parametrize(
    ("scenario", "image"),
    [
        ("local_slurm", "/lustre/images/trtllm.sqsh"),
        ("local_slurm", "./trtllm.sqsh"),
        ("local_slurm", "nvcr.io/nvidia/pytorch:24.01-Py3_RC"),  # tags may hold capitals
        ("local_docker", f"nvcr.io/nvidia/x@{DIGEST}"),
        ("local_docker", "Example.com/Team/X:1"),  # docker itself says what it thinks
    ],
)
def test_images_each_reader_takes(build_env: BuildEnv, scenario: str, image: str) -> None:
    job = build_env.build(build_env.request(execution_scenario=scenario, container_image=image))
    assert spec(job)["docker_image"] in (image, enroot_form(image))


@pytest.mark.parametrize(
    ("tool", "args", "code"),
    [
        ("srun", [f"--container-image={URM_DOCKER}"], 1),
        ("srun", [f"--container-image={URM_ENROOT}"], 0),
        ("srun", ["--container-image=ubuntu:22.04"], 0),
        ("docker", ["run", "--rm", URM_ENROOT], 125),
        ("docker", ["run", "--rm", URM_DOCKER], 0),
    ],
)
def test_bash_level_standins_read_images_like_the_real_tools(
    tool: str, args: list[str], code: int
) -> None:
    from tests.script_runner import FAKE_BIN

    done = subprocess.run(
        [str(FAKE_BIN / tool), *args, "true"], capture_output=True, text=True, check=False
    )
    assert done.returncode == code, done.stderr
