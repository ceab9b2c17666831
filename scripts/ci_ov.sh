#!/usr/bin/env bash
# The OpenVINO targets (ov:paged, ov:<model_type>; docs/kernels.md, "OpenVINO"): a small venv .venv-ov holding only
# openvino (a .pth appends the dev venv's site-packages: torch, transformers 5.25, pytest, ...; like
# scripts/ci_engines_heavy.sh), then tests/test_ov.py in it: ov:paged, and the models through openvino.convert_model
# (the optimum-intel tests skip, saying why). In the default venv (make test) all of them skip with the install line.
#
# --optimum: a second small venv .venv-ov-optimum that also holds optimum-intel 2.2.0 and transformers 4.57 (its own,
# ahead of the dev venv's 5.25: optimum-intel 2.2.0 needs transformers<5.6, and exports Gemma 2 / Gemma 3 text only
# up to 5.0; impl/engines/ov_models.py), then the same tests there: the stateful export, its decode/chunk steps and
# openvino.genai's SDPA->PagedAttention pass. optimum-intel pulls torchvision, built for another torch: removed.
#
# Measured on this 2-core machine (shared): default 111 s (openvino install 23 s, tests 67 s); --optimum 364 s
# (install 167 s, tests 169 s; measured while two campaigns ran beside it). A second run reuses the venv (stamp).
#
# Usage: scripts/ci_ov.sh [--build-only] [--optimum]
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
OV_RELEASE="${OV_RELEASE:-2026.4.1}"
DEV_VENV="${DEV_VENV:-.venv}"
if [ ! -x "$DEV_VENV/bin/python" ]; then echo "ci_ov: run 'make setup' first" >&2; exit 2; fi
SHARED="$("$DEV_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
PYVER="$("$DEV_VENV/bin/python" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")')"
OPTIMUM_RELEASE="${OPTIMUM_RELEASE:-2.2.0}"
BUILD_ONLY=0; OPTIMUM=0
for a in "$@"; do
  case "$a" in
    --build-only) BUILD_ONLY=1 ;;
    --optimum) OPTIMUM=1 ;;
    *) echo "ci_ov: unknown option $a" >&2; exit 2 ;;
  esac
done
V=.venv-ov
SPEC="openvino==$OV_RELEASE"
if [ "$OPTIMUM" = 1 ]; then
  V=.venv-ov-optimum
  SPEC="openvino==$OV_RELEASE optimum-intel==$OPTIMUM_RELEASE transformers>=4.57,<5.0"
fi
stamp="$V/.kvwindow-ov"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$SPEC" ]; then
  [ -x "$V/bin/python" ] || "$DEV_VENV/bin/python" -m venv --without-pip "$V"
  printf '%s\n%s\n' "$SHARED" "$PWD" > "$V/lib/$PYVER/site-packages/zz_kvwindow_shared.pth"
  t0=$SECONDS
  # shellcheck disable=SC2086
  "$DEV_VENV/bin/python" -m pip --python "$V/bin/python" install -q $SPEC torch==2.13.0
  if [ -d "$V/lib/$PYVER/site-packages/torchvision" ]; then
    "$DEV_VENV/bin/python" -m pip --python "$V/bin/python" uninstall -q -y torchvision
  fi
  echo "ci_ov: $SPEC installed in $((SECONDS - t0)) s"
  echo "$SPEC" > "$stamp"
fi
[ "$BUILD_ONLY" = 1 ] && exit 0
"$V/bin/python" -m pytest -q -p no:cacheprovider tests/test_ov.py
