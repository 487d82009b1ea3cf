"""scriptbuilder.inputs.image_tags: the properties file and the arch -> image choice."""

from __future__ import annotations

from pathlib import Path

import pytest

from scriptbuilder.inputs.image_tags import (
    ARCH_KEYS,
    find_properties_file,
    image_for_arch,
    normalize_arch,
    read_properties,
)

DATA = Path(__file__).parent / "data"
REAL = DATA / "trtllm" / "current_image_tags.properties"
REPO = DATA / "trtllm_repo"
X86 = (
    "urm.nvidia.com/sw-tensorrt-docker/tensorrt-llm-staging/tritondevel:"
    "x86_64-tritondevel-torch_skip-cca75fa-github-pr-9225-1249"
)
SBSA = (
    "urm.nvidia.com/sw-tensorrt-docker/tensorrt-llm-staging/tritondevel:"
    "sbsa-tritondevel-torch_skip-cca75fa-github-pr-9225-1249"
)


def test_real_file() -> None:
    props = read_properties(REAL)
    assert list(props) == [
        "IMAGE_NAME",
        "LLM_DOCKER_IMAGE",
        "LLM_SBSA_DOCKER_IMAGE",
        "LLM_ROCKYLINUX8_PY310_DOCKER_IMAGE",
        "LLM_ROCKYLINUX8_PY312_DOCKER_IMAGE",
    ]
    assert props["IMAGE_NAME"] == "urm.nvidia.com/sw-tensorrt-docker/tensorrt-llm"
    assert image_for_arch(props, "x86_64") == X86
    assert image_for_arch(props, "aarch64") == SBSA


def test_synthetic_repo_has_the_real_file() -> None:
    found = find_properties_file(REPO)
    assert found == str(REPO / "jenkins" / "current_image_tags.properties")
    assert found is not None and Path(found).read_bytes() == REAL.read_bytes()


@pytest.mark.parametrize(
    ("arch", "expected"),
    [
        ("x86_64", "x86_64"),
        ("amd64", "x86_64"),
        ("AMD64", "x86_64"),
        (" x86-64\n", "x86_64"),
        ("aarch64", "aarch64"),
        ("arm64", "aarch64"),
        ("sbsa", "aarch64"),
        ("ppc64le", "ppc64le"),
    ],
)
def test_normalize_arch(arch: str, expected: str) -> None:
    assert normalize_arch(arch) == expected


def test_arch_keys() -> None:
    assert ARCH_KEYS == {"aarch64": "LLM_SBSA_DOCKER_IMAGE", "x86_64": "LLM_DOCKER_IMAGE"}


@pytest.mark.parametrize(
    ("props", "arch", "expected"),
    [
        ({"LLM_DOCKER_IMAGE": "x", "LLM_SBSA_DOCKER_IMAGE": "a"}, "amd64", "x"),
        ({"LLM_DOCKER_IMAGE": "x", "LLM_SBSA_DOCKER_IMAGE": "a"}, "arm64", "a"),
        # a suffixed twin is never taken for the exact key
        ({"LLM_SBSA_DOCKER_IMAGE_12_9": "old"}, "aarch64", None),
        ({"LLM_SBSA_DOCKER_IMAGE_12_9": "old", "LLM_SBSA_DOCKER_IMAGE": "a"}, "aarch64", "a"),
        ({"LLM_DOCKER_IMAGE_CU12": "old"}, "x86_64", None),
        ({"LLM_DOCKER_IMAGE": ""}, "x86_64", None),
        ({"LLM_DOCKER_IMAGE": "x"}, "ppc64le", None),
    ],
)
def test_image_for_arch(props: dict[str, str], arch: str, expected: str | None) -> None:
    assert image_for_arch(props, arch) == expected


def test_read_properties_rules(tmp_path: Path) -> None:
    path = tmp_path / "tags.properties"
    path.write_text(
        "# comment\n"
        "! bang comment\n"
        "   # indented comment\n"
        "\n"
        "  SPACED  =  value with spaces  \n"
        'DOUBLE="quoted value"\n'
        "SINGLE='single'\n"
        "MISMATCHED=\"half'\n"
        "EMPTY=\n"
        "EQUALS=a=b=c\n"
        "HASH=nvcr.io#nvidia/pytorch:24.01-py3\n"
        "export EXPORTED=yes\n"
        "no separator line\n"
        "DUP=first\n"
        "DUP=second\n"
        "LLM_SBSA_DOCKER_IMAGE_12_9=twin\n"
    )
    assert read_properties(path) == {
        "SPACED": "value with spaces",
        "DOUBLE": "quoted value",
        "SINGLE": "single",
        "MISMATCHED": "\"half'",
        "EMPTY": "",
        "EQUALS": "a=b=c",
        "HASH": "nvcr.io#nvidia/pytorch:24.01-py3",
        "EXPORTED": "yes",
        "DUP": "second",
        "LLM_SBSA_DOCKER_IMAGE_12_9": "twin",
    }


def _touch(root: Path, *paths: str) -> None:
    for rel in paths:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("LLM_DOCKER_IMAGE=x\n")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            ["jenkins/current_image_tags.properties", "jenkins/a_image_tags.properties"],
            "jenkins/current_image_tags.properties",
        ),
        (
            ["jenkins/b/x_image_tags.properties", "jenkins/z_image_tags.properties"],
            "jenkins/z_image_tags.properties",  # shallower first
        ),
        (
            ["jenkins/b/x_image_tags.properties", "jenkins/a/y_image_tags.properties"],
            "jenkins/a/y_image_tags.properties",  # same depth: sorted order
        ),
        (
            [".ci/image_tags.properties", "ci/image_tags.properties"],
            ".ci/image_tags.properties",  # jenkins/, .ci/, ci/, then the root
        ),
        (
            ["ci/deep/image_tags.properties", "image_tags.properties"],
            "ci/deep/image_tags.properties",
        ),
        (["docker/image_tags.properties"], "docker/image_tags.properties"),
        (["a/b/c/image_tags.properties"], None),  # depth 4 from the root
        (["jenkins/a/b/c/image_tags.properties"], None),  # depth 4 under jenkins/
        ([".git/image_tags.properties"], None),
        (["jenkins/image_tags.txt", "jenkins/tags.properties"], None),
        ([], None),
    ],
)
def test_find_properties_file(tmp_path: Path, files: list[str], expected: str | None) -> None:
    _touch(tmp_path, *files)
    found = find_properties_file(tmp_path)
    assert found == (str(tmp_path / expected) if expected is not None else None)


def test_find_properties_file_missing_root(tmp_path: Path) -> None:
    assert find_properties_file(tmp_path / "nope") is None
