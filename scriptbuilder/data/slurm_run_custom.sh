#!/bin/bash
# Runs a custom command inside a job step, once per task.
#   CUSTOM_ENV      optional shell assignments applied first, e.g. A=1 B="x y"
#   CUSTOM_WORKDIR  optional directory to run in
#   CUSTOM_COMMAND  the command line, run once by bash exactly as written
if [ -n "${CUSTOM_ENV:-}" ]; then
  set -a
  eval "${CUSTOM_ENV}" || { echo "CUSTOM_ENV could not be applied" >&2; exit 2; }
  set +a
fi
if [ -n "${CUSTOM_WORKDIR:-}" ]; then
  cd "${CUSTOM_WORKDIR}" || { echo "CUSTOM_WORKDIR ${CUSTOM_WORKDIR} is not a directory" >&2; exit 2; }
fi
eval "${CUSTOM_COMMAND:?CUSTOM_COMMAND is not set}"
rc=$?
echo "Rank${SLURM_PROCID:-0} Custom command finished with exit code ${rc}"
exit "${rc}"
