#!/usr/bin/env bash
# Builds the bundled example request: resolves every value (printed with the
# rule that chose it), writes the Slurm script and job_spec.json under
# build/example/, and prints the report and the script.
set -euo pipefail
source "$(dirname "$0")/../scripts/env.sh"
mkdir -p build  # work_dir build/example is created in it
scriptbuilder build --explain examples/pytest_request.yaml
echo
cat build/example/qwen3_30b_auto_test.slurm
