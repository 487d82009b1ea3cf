"""Perf-sanity config YAMLs and test ids as read from a TensorRT-LLM checkout
(what they mean for a job: :mod:`scriptbuilder.workflows.perf_sanity`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class PerfConfigError(ValueError):
    """A config YAML that cannot be used; the message names the file and the fix."""


@dataclass
class PerfConfig:
    path: Path
    gpus_per_node: int
    disaggregated: bool
    server_names: list[str]
    raw: dict[str, Any] = field(repr=False)


def load_perf_config(path: Path) -> PerfConfig:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PerfConfigError(
            f"{path}: config YAML not found; pass an existing perf_config_yaml"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PerfConfigError(
            f"{path}: cannot read config YAML ({' '.join(str(exc).split())}); check the path and"
            " permissions"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PerfConfigError(
            f"{path}: not valid YAML ({' '.join(str(exc).split())}); fix the file's syntax"
        ) from None
    if not isinstance(data, dict):
        raise PerfConfigError(
            f"{path}: top level is {type(data).__name__}, not a mapping;"
            " a perf config YAML is a mapping with hardware, server_configs or worker_config"
        )
    hardware = data.get("hardware")
    gpn = hardware.get("gpus_per_node") if isinstance(hardware, dict) else None
    if isinstance(gpn, bool) or not isinstance(gpn, int) or gpn < 1:
        found = "missing" if gpn is None else f"{gpn!r}"
        raise PerfConfigError(
            f"{path}: hardware.gpus_per_node is {found}; add hardware: {{gpus_per_node: N}}"
            " (a positive integer)"
        )
    workers = data.get("worker_config")
    disaggregated = (isinstance(workers, dict) and ("ctx" in workers or "gen" in workers)) or (
        isinstance(hardware, dict) and "num_ctx_servers" in hardware
    )
    servers = data.get("server_configs")
    names = (
        [str(s.get("name", "")) for s in servers if isinstance(s, dict)]
        if isinstance(servers, list) and not disaggregated
        else []
    )
    return PerfConfig(path, gpn, disaggregated, names, data)


def derive_accuracy_config(base: Path) -> str:
    """YAML text of ``base`` with ``accuracy.enable_accuracy_test: true``."""
    config = load_perf_config(base)
    data = config.raw  # a fresh load, owned here
    accuracy = data.get("accuracy")
    if accuracy is None:
        accuracy = data["accuracy"] = {}
    if not isinstance(accuracy, dict):
        raise PerfConfigError(
            f"{config.path}: accuracy is {type(accuracy).__name__}, not a mapping;"
            " make it a mapping (accuracy: {enable_accuracy_test: true, ...})"
        )
    accuracy["enable_accuracy_test"] = True
    return yaml.safe_dump(data, sort_keys=False)


AGGREGATED_CONFIG_DIR = "tests/scripts/perf-sanity/aggregated"
DISAGGREGATED_CONFIG_DIR = "tests/scripts/perf-sanity/disaggregated"

_TEST_ID = re.compile(r"test_perf_sanity\.py::test_e2e\[(?P<body>[^\]]+)\]")
_TIMEOUT_SUFFIX = re.compile(r"\s+TIMEOUT\s*\(\d+\)\s*$")


@dataclass(frozen=True)
class PerfTestId:
    """``perf/test_perf_sanity.py::test_e2e[<kind>[_upload]-...]`` taken apart; ``mode``
    is ``e2e``/``gen_only`` (``disagg-<mode>-<stem>``), ``ctx_only``
    (``aggr-ctx_only-<stem>``) or None (``aggr-<stem>[-<server>]``)."""

    kind: str
    mode: str | None
    config_stem: str
    server_name: str | None
    upload: bool
    label: str  # the text between the brackets

    @property
    def config_dir(self) -> str:
        if self.kind == "aggr" and self.mode != "ctx_only":
            return AGGREGATED_CONFIG_DIR
        return DISAGGREGATED_CONFIG_DIR

    @property
    def config_file(self) -> str:
        return f"{self.config_dir}/{self.config_stem}.yaml"


def parse_perf_test_id(test: str, config_dirs: list[Path] | None = None) -> PerfTestId | None:
    """A perf-sanity test id (a trailing ``TIMEOUT (N)`` ignored); None when ``test`` is not one. In
    ``aggr-<stem>-<server>`` both parts may contain ``-``: the stem is the longest prefix naming a
    ``.yaml``/``.yml`` in ``config_dirs``, else the text before the last ``-``."""
    match = _TEST_ID.search(_TIMEOUT_SUFFIX.sub("", test.strip()))
    if match is None:
        return None
    label = match.group("body")
    prefix, sep, rest = label.partition("-")
    if not sep or not rest:
        return None
    upload = prefix.endswith("_upload")
    kind = prefix.removesuffix("_upload")
    if kind not in ("aggr", "disagg"):
        return None
    if kind == "disagg":
        mode, sep, stem = rest.partition("-")
        if mode in ("e2e", "gen_only") and sep and stem:
            return PerfTestId(kind, mode, stem, None, upload, label)
        return PerfTestId(kind, None, rest, None, upload, label)  # older ids: no mode
    if rest.startswith("ctx_only-") and len(rest) > len("ctx_only-"):
        return PerfTestId(kind, "ctx_only", rest[len("ctx_only-") :], None, upload, label)
    cuts = [len(rest)] + [i for i in range(len(rest) - 1, 0, -1) if rest[i] == "-"]
    files = [(d, ext) for d in config_dirs or [] for ext in (".yaml", ".yml")]
    cut = next((c for c in cuts if any((d / f"{rest[:c]}{e}").is_file() for d, e in files)), None)
    if cut is None:
        stem, sep, server = rest.rpartition("-")
        cut = len(stem) if sep and stem and server else len(rest)
    return PerfTestId(kind, None, rest[:cut], rest[cut + 1 :] or None, upload, label)
