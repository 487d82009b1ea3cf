"""Perf-sanity configs and test ids (scriptbuilder.inputs.perf_config) and the GPUs
and nodes they need (the perf path's topology), on the two real perf-sanity
configs and edge cases."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.perf_config import (
    PerfConfigError,
    PerfTestId,
    derive_accuracy_config,
    load_perf_config,
    parse_perf_test_id,
)
from scriptbuilder.workflows.perf_sanity import Topology, topology

DATA = Path(__file__).parent / "data" / "trtllm"
AGGR = DATA / "gpt_oss_120b_fp4_blackwell.yaml"
DISAGG_STEM = "b200_deepseek-r1-fp4_1k1k_con1_ctx1_dep4_gen1_tep8_eplb0_mtp3_ccb-UCX"
DISAGG = DATA / f"{DISAGG_STEM}.yaml"


def _yaml(tmp_path: Path, body: str, name: str = "cfg.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


# ---------------------------------------------------------------- real files


def test_aggregated_real_file() -> None:
    cfg = load_perf_config(AGGR)
    assert cfg.gpus_per_node == 8
    assert cfg.disaggregated is False
    assert cfg.server_names == [
        "gpt_oss_fp4_tp1_eagle3_startup",
        "gpt_oss_fp4_tp2_mtp0_1k1k",
        "gpt_oss_fp4_tp1_mtp0_1k1k",
        "gpt_oss_fp4_tp1_mtp0_8k1k",
    ]
    assert cfg.raw["metadata"]["model_name"] == "gpt_oss_120b_fp4"


@pytest.mark.parametrize(
    ("server", "devices", "nodes"),
    [
        ("gpt_oss_fp4_tp1_eagle3_startup", 1, 1),
        ("gpt_oss_fp4_tp2_mtp0_1k1k", 2, 1),
        ("gpt_oss_fp4_tp1_mtp0_1k1k", 1, 1),
        ("gpt_oss_fp4_tp1_mtp0_8k1k", 1, 1),
        (None, 2, 1),  # several servers, none named: the largest
    ],
)
def test_aggregated_topology(server: str | None, devices: int, nodes: int) -> None:
    assert topology(load_perf_config(AGGR), server, None) == (devices, nodes)


def test_disaggregated_real_file() -> None:
    cfg = load_perf_config(DISAGG)
    assert cfg.gpus_per_node == 8
    assert cfg.disaggregated is True
    assert cfg.server_names == []
    # worker_config.ctx tp4 (1 server) + worker_config.gen tp8 (1 server), 8 GPUs a node
    assert cfg.raw["worker_config"]["ctx"]["tensor_parallel_size"] == 4
    assert cfg.raw["worker_config"]["gen"]["tensor_parallel_size"] == 8
    assert topology(cfg, None, None) == (12, 2)
    assert topology(cfg, "ignored-for-disagg", "e2e") == (12, 2)
    assert topology(cfg, None, "ctx_only") == (4, 1)


# ---------------------------------------------------------------- synthetic topologies


@pytest.mark.parametrize(
    ("body", "server", "expected"),
    [
        (  # cp multiplies; 16 GPUs on 8-GPU nodes = 2 nodes
            """
            hardware: {gpus_per_node: 8}
            server_configs:
              - {name: big, tensor_parallel_size: 4, pipeline_parallel_size: 2,
                 context_parallel_size: 2}
            """,
            None,
            (16, 2),
        ),
        (  # pp/cp default to 1; 6 GPUs on 4-GPU nodes = 2 nodes
            """
            hardware: {gpus_per_node: 4}
            server_configs:
              - {name: a-b, tensor_parallel_size: 6}
            """,
            "a-b",
            (6, 2),
        ),
        (  # disaggregated: 2 ctx x 4 GPUs (1 node each) + 3 gen x 6 GPUs (2 nodes each)
            """
            hardware: {gpus_per_node: 4, num_ctx_servers: 2, num_gen_servers: 3}
            worker_config:
              ctx: {tensor_parallel_size: 4}
              gen: {tensor_parallel_size: 2, pipeline_parallel_size: 3}
            """,
            None,
            (2 * 4 + 3 * 6, 2 * 1 + 3 * 2),
        ),
        (  # gen_only style: no ctx servers
            """
            hardware: {gpus_per_node: 8, num_ctx_servers: 0, num_gen_servers: 1}
            worker_config:
              gen: {tensor_parallel_size: 8}
            """,
            None,
            (8, 1),
        ),
    ],
)
def test_topology(tmp_path: Path, body: str, server: str | None, expected: tuple[int, int]) -> None:
    assert topology(load_perf_config(_yaml(tmp_path, body)), server, None) == expected


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("hardware: {gpus_per_node: 8}\nserver_configs: []\n", "no server_configs list"),
        (
            "hardware: {gpus_per_node: 8}\n"
            "server_configs:\n  - {name: x, tensor_parallel_size: two}\n",
            "tensor_parallel_size must be a non-negative integer",
        ),
        (
            "hardware: {gpus_per_node: 8, num_ctx_servers: 1}\nworker_config: {gen: {}}\n",
            "worker_config.ctx is missing",
        ),
    ],
)
def test_topology_errors(tmp_path: Path, body: str, fragment: str) -> None:
    path = _yaml(tmp_path, body)
    with pytest.raises(BuildError) as err:
        topology(load_perf_config(path), None, None)
    assert fragment in str(err.value) and str(path) in str(err.value)
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------- load errors


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "config YAML not found"),
        ("hardware: [unclosed\n", "not valid YAML"),
        ("- a\n- b\n", "not a mapping"),
        ("just text\n", "not a mapping"),
        ("", "not a mapping"),
        ("server_configs: []\n", "hardware.gpus_per_node is missing"),
        ("hardware: {num_ctx_servers: 1}\n", "hardware.gpus_per_node is missing"),
        ("hardware: {gpus_per_node: 0}\n", "hardware.gpus_per_node is 0"),
        ("hardware: {gpus_per_node: eight}\n", "hardware.gpus_per_node is 'eight'"),
    ],
)
def test_load_errors(tmp_path: Path, content: str | None, fragment: str) -> None:
    path = tmp_path / "cfg.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(PerfConfigError) as err:
        load_perf_config(path)
    message = str(err.value)
    assert fragment in message
    assert str(path) in message
    assert "\n" not in message
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize(
    ("body", "disaggregated"),
    [
        ("hardware: {gpus_per_node: 8, num_ctx_servers: 1}\n", True),
        ("hardware: {gpus_per_node: 8}\nworker_config: {ctx: {}}\n", True),
        ("hardware: {gpus_per_node: 8}\nworker_config: {other: {}}\n", False),
    ],
)
def test_disaggregated(tmp_path: Path, body: str, disaggregated: bool) -> None:
    assert load_perf_config(_yaml(tmp_path, body)).disaggregated is disaggregated


# ---------------------------------------------------------------- accuracy variant


@pytest.mark.parametrize("base", [AGGR, DISAGG])
def test_derive_accuracy_config_real(base: Path, tmp_path: Path) -> None:
    text = derive_accuracy_config(base)
    assert text == derive_accuracy_config(base)  # deterministic
    derived = yaml.safe_load(text)
    original = yaml.safe_load(base.read_text())
    assert derived["accuracy"]["enable_accuracy_test"] is True
    derived["accuracy"].pop("enable_accuracy_test")
    original.setdefault("accuracy", {}).pop("enable_accuracy_test", None)
    assert derived == original  # nothing else changed
    assert list(derived) == list(original)  # key order kept
    out = tmp_path / "acc.yaml"
    out.write_text(text)
    assert load_perf_config(out).raw["accuracy"]["enable_accuracy_test"] is True


def test_derive_accuracy_keeps_other_accuracy_keys() -> None:
    derived = yaml.safe_load(derive_accuracy_config(DISAGG))
    assert derived["accuracy"]["tasks"] == "gsm8k"
    assert derived["accuracy"]["model"] == "local-completions"


def test_derive_accuracy_errors(tmp_path: Path) -> None:
    with pytest.raises(PerfConfigError, match="config YAML not found"):
        derive_accuracy_config(tmp_path / "missing.yaml")
    bad = _yaml(tmp_path, "hardware: {gpus_per_node: 8}\naccuracy: [1]\n")
    with pytest.raises(PerfConfigError, match="accuracy is list, not a mapping"):
        derive_accuracy_config(bad)


# ---------------------------------------------------------------- test ids


def _id(label: str) -> str:
    return f"perf/test_perf_sanity.py::test_e2e[{label}]"


@pytest.mark.parametrize(
    ("test", "expected"),
    [
        (
            _id("aggr-gpt_oss_120b_fp4_blackwell-gpt_oss_fp4_tp2_mtp0_1k1k"),
            ("aggr", None, "gpt_oss_120b_fp4_blackwell", "gpt_oss_fp4_tp2_mtp0_1k1k", False),
        ),
        (
            _id("aggr_upload-gpt_oss_120b_fp4_blackwell-gpt_oss_fp4_tp1_mtp0_8k1k"),
            ("aggr", None, "gpt_oss_120b_fp4_blackwell", "gpt_oss_fp4_tp1_mtp0_8k1k", True),
        ),
        (
            _id("aggr-gpt_oss_120b_fp4_blackwell"),
            ("aggr", None, "gpt_oss_120b_fp4_blackwell", None, False),
        ),
        (_id(f"aggr-ctx_only-{DISAGG_STEM}"), ("aggr", "ctx_only", DISAGG_STEM, None, False)),
        (_id(f"disagg-e2e-{DISAGG_STEM}"), ("disagg", "e2e", DISAGG_STEM, None, False)),
        (_id(f"disagg-gen_only-{DISAGG_STEM}"), ("disagg", "gen_only", DISAGG_STEM, None, False)),
        (_id(f"disagg_upload-e2e-{DISAGG_STEM}"), ("disagg", "e2e", DISAGG_STEM, None, True)),
        (_id(f"disagg-{DISAGG_STEM}"), ("disagg", None, DISAGG_STEM, None, False)),
        (
            _id(f"disagg_upload-gen_only-{DISAGG_STEM}") + " TIMEOUT (120)",
            ("disagg", "gen_only", DISAGG_STEM, None, True),
        ),
        # without config folders an aggregated id splits at its last '-'
        (_id("aggr-my-config-server_a"), ("aggr", None, "my-config", "server_a", False)),
    ],
)
def test_parse_perf_test_id(
    test: str, expected: tuple[str, str | None, str, str | None, bool]
) -> None:
    parsed = parse_perf_test_id(test)
    assert parsed is not None
    got = (parsed.kind, parsed.mode, parsed.config_stem, parsed.server_name, parsed.upload)
    assert got == expected


@pytest.mark.parametrize(
    "test",
    [
        "accuracy/test_llm_api_pytorch.py::TestA::test_b[tp4]",
        _id("bench-x-y"),
        _id("aggr"),
        _id("aggr-"),
        "perf/test_perf_sanity.py::test_e2e",
        "",
    ],
)
def test_not_perf_test_ids(test: str) -> None:
    assert parse_perf_test_id(test) is None


@pytest.mark.parametrize(
    ("files", "label", "stem", "server"),
    [
        (["my-config.yaml"], "aggr-my-config-srv-1", "my-config", "srv-1"),
        (["my-config-srv.yaml"], "aggr-my-config-srv-1", "my-config-srv", "1"),
        (["my.yaml", "my-config.yaml"], "aggr-my-config-srv", "my-config", "srv"),  # longest
        (["whole-thing.yml"], "aggr-whole-thing", "whole-thing", None),
        ([], "aggr-unknown-stem-srv", "unknown-stem", "srv"),  # no file: last '-'
    ],
)
def test_parse_perf_test_id_with_config_dirs(
    tmp_path: Path, files: list[str], label: str, stem: str, server: str | None
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    configs = tmp_path / "aggregated"
    configs.mkdir()
    for name in files:
        (configs / name).write_text("hardware: {gpus_per_node: 8}\n")
    parsed = parse_perf_test_id(_id(label), [empty, configs])
    assert parsed is not None
    assert (parsed.config_stem, parsed.server_name) == (stem, server)


def test_real_ids_resolve_to_real_files() -> None:
    parsed = parse_perf_test_id(
        _id("aggr-gpt_oss_120b_fp4_blackwell-gpt_oss_fp4_tp1_mtp0_1k1k"), [DATA]
    )
    assert parsed == PerfTestId(
        "aggr",
        None,
        "gpt_oss_120b_fp4_blackwell",
        "gpt_oss_fp4_tp1_mtp0_1k1k",
        False,
        "aggr-gpt_oss_120b_fp4_blackwell-gpt_oss_fp4_tp1_mtp0_1k1k",
    )
    assert (
        parsed.config_file == "tests/scripts/perf-sanity/aggregated/gpt_oss_120b_fp4_blackwell.yaml"
    )
    config = load_perf_config(DATA / f"{parsed.config_stem}.yaml")
    assert topology(config, parsed.server_name, None) == Topology(1, 1)
    ctx = parse_perf_test_id(_id(f"aggr_upload-ctx_only-{DISAGG_STEM}"), [DATA])
    assert ctx is not None and ctx.config_dir == "tests/scripts/perf-sanity/disaggregated"
    assert topology(load_perf_config(DATA / f"{ctx.config_stem}.yaml"), None, None).devices == 12
