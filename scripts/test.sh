#!/usr/bin/env bash
# Runs every check CI runs: lint, types, the test suite (including the tests
# that submit generated scripts to a one-node Slurm started on loopback; they
# install the Debian packages when missing, which needs root) and a smoke run
# of the benchmark. Extra arguments go to pytest.
set -euo pipefail
SB_EXTRAS=test source "$(dirname "$0")/env.sh"
ruff check scriptbuilder tests benchmarks
ruff format --check scriptbuilder tests benchmarks
mypy
python -m pytest -ra "$@"
python benchmarks/run.py --smoke
