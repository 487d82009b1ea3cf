"""The JSON Schemas of the request, slurm_env.json and job_spec.json.

The pydantic models in :mod:`scriptbuilder.models` are their source. The
schemas are shipped as files in ``data/schemas/`` so a build can validate its
inputs without importing pydantic; ``python -m scriptbuilder.schemas``
rewrites the files from the models, and a test fails when they differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parent / "data" / "schemas"
#: Schema name -> the model it is generated from.
MODELS = {"request": "BuildRequest", "slurm-env": "SlurmEnv", "job-spec": "JobSpec"}

_loaded: dict[str, dict[str, Any]] = {}


def schema_text(name: str) -> str:
    """The shipped schema file's text."""
    return (SCHEMA_DIR / f"{name}.json").read_text(encoding="utf-8")


def schema(name: str) -> dict[str, Any]:
    """The shipped schema, parsed once per process."""
    if name not in _loaded:
        _loaded[name] = json.loads(schema_text(name))
    return _loaded[name]


def generate(name: str) -> str:
    """The schema text generated from the pydantic model (imports pydantic)."""
    from scriptbuilder import models

    model = getattr(models, MODELS[name])
    return json.dumps(model.model_json_schema(), indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    SCHEMA_DIR.mkdir(parents=True, exist_ok=True)
    for name in MODELS:
        (SCHEMA_DIR / f"{name}.json").write_text(generate(name), encoding="utf-8")
        print(f"wrote {SCHEMA_DIR / name}.json")


if __name__ == "__main__":
    main()
