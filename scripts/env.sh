# Sourced by the other scripts: a project virtualenv in .venv with scriptbuilder
# installed in editable mode (with the test tools when SB_EXTRAS=test).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${SB_VENV:-$root/.venv}"
extras="${SB_EXTRAS:-}"
stamp="$venv/.installed${extras:+-$extras}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -e "$root${extras:+[$extras]}"
  touch "$stamp"
fi
export PATH="$venv/bin:$PATH"
cd "$root"
