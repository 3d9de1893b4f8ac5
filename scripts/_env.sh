# Shared by scripts/serve, scripts/demo and scripts/test: make .venv with the project installed
# (idempotent). EXTRAS names the optional dependencies to install with it: none to serve and
# simulate, "test" for the tests (scripts/test sets it).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
EXTRAS="${EXTRAS:-}"
if [ ! -x .venv/bin/python ]; then
  echo "creating .venv (first run)" >&2
  "$PY" -m venv .venv
fi
hash=$(sha1sum pyproject.toml | cut -c1-12)
stamp=".venv/.installed-$hash${EXTRAS:+-$EXTRAS}"
# the test extra holds everything serving needs
if [ ! -f "$stamp" ] && ! { [ -z "$EXTRAS" ] && [ -f ".venv/.installed-$hash-test" ]; }; then
  echo "installing boostbandit${EXTRAS:+ with its $EXTRAS dependencies} into .venv (first run" \
       "or pyproject.toml changed; a few minutes)..." >&2
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".${EXTRAS:+[$EXTRAS]}"
  rm -f .venv/.installed-*
  touch "$stamp"
  echo "installed; the command line is .venv/bin/boostbandit (\`source .venv/bin/activate\`" \
       "puts it on PATH)" >&2
fi
export PATH="$ROOT/.venv/bin:$PATH"
# numba's cache of learners/ cleared when its sources changed (stale kernels otherwise)
.venv/bin/python scripts/_fresh_kernels.py
