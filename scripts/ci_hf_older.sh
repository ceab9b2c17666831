#!/usr/bin/env bash
# CI for an older transformers: (re)create .venv-hf445 with transformers 4.45.x and run the HF tests there.
# Idempotent: the venv is created once and reinstalled only when this script or the packaging changes.
# Usage: scripts/ci_hf_older.sh [extra pytest args]   (TRANSFORMERS_SPEC / HF_VENV override the defaults)
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
VENV="${HF_VENV:-.venv-hf445}"
SPEC="${TRANSFORMERS_SPEC:-transformers==4.45.*}"
STAMP="$VENV/.kvwindow-hf-installed"
KEY="$(cat scripts/ci_hf_older.sh pyproject.toml setup.py 2>/dev/null | sha256sum | cut -c1-16) $SPEC"

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$KEY" ]; then
  "$VENV/bin/python" -m pip install -q --upgrade pip setuptools wheel
  "$VENV/bin/python" -m pip install -q "torch==2.13.0" "$SPEC" numpy hypothesis pytest pytest-benchmark \
    cffi rich matplotlib
  "$VENV/bin/python" -m pip install -q -e . --no-deps
  echo "$KEY" > "$STAMP"
fi
"$VENV/bin/python" -c 'import transformers, torch; print(f"ci_hf_older: transformers {transformers.__version__}, torch {torch.__version__}")'
exec "$VENV/bin/python" -m pytest -p no:cacheprovider tests/test_hf_caches.py tests/test_hf_models.py tests/test_hf_findings.py "$@"
