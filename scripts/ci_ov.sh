#!/usr/bin/env bash
# The OpenVINO targets (ov:paged, ov:<model_type>; docs/kernels.md, "OpenVINO"): a small venv .venv-ov holding only
# openvino (a .pth appends the dev venv's site-packages: torch, transformers, pytest, ...; like
# scripts/ci_engines_heavy.sh), then tests/test_ov.py in it. In the default venv (make test) those tests skip with
# the install line. optimum-intel is not installed: its newest release (2.2.0) needs transformers<5.6 (see
# impl/engines/ov_models.py); the models are converted by openvino.convert_model.
#
# Usage: scripts/ci_ov.sh [--build-only]
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
OV_RELEASE="${OV_RELEASE:-2026.4.1}"
DEV_VENV="${DEV_VENV:-.venv}"
if [ ! -x "$DEV_VENV/bin/python" ]; then echo "ci_ov: run 'make setup' first" >&2; exit 2; fi
SHARED="$("$DEV_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
PYVER="$("$DEV_VENV/bin/python" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")')"
V=.venv-ov
stamp="$V/.kvwindow-ov"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$OV_RELEASE" ]; then
  [ -x "$V/bin/python" ] || "$DEV_VENV/bin/python" -m venv --without-pip "$V"
  printf '%s\n%s\n' "$SHARED" "$PWD" > "$V/lib/$PYVER/site-packages/zz_kvwindow_shared.pth"
  t0=$SECONDS
  "$DEV_VENV/bin/python" -m pip --python "$V/bin/python" install -q "openvino==$OV_RELEASE"
  echo "ci_ov: openvino $OV_RELEASE installed in $((SECONDS - t0)) s"
  echo "$OV_RELEASE" > "$stamp"
fi
[ "${1:-}" = --build-only ] && exit 0
"$V/bin/python" -m pytest -q -p no:cacheprovider tests/test_ov.py
