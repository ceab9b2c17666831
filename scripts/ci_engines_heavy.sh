#!/usr/bin/env bash
# The heavy engines' tests: llama.cpp (llama-cpp-python, built from its sdist) and keras-hub (tensorflow
# backend), each in its own venv (.venv-llama/, .venv-keras/: a small venv + a .pth to the dev venv's
# site-packages, like scripts/hf_matrix.sh), then tests/test_engine_llama*.py and test_engine_keras*.py in it.
#
# Measured on this 2-core machine (shared): llama-cpp-python 0.3.36 builds in 424 s with the CMAKE_ARGS
# below (no tests/examples/tools/server/app, no mtmd/llava, one native CPU backend, no OpenMP, ccache),
# against ~31 min with the defaults; the converter (convert_hf_to_gguf.py + conversion/ + gguf-py/) is
# extracted from the same sdist into .venv-llama/share/kvwindow/llama.cpp-<release>/ (impl/engines/llama.py).
# keras-hub 0.32 + tensorflow-cpu: 83 s from the local wheel cache. Both venvs are built once and reused
# (a stamp per release).
#
# Usage: scripts/ci_engines_heavy.sh [--build-only] [--only llama|keras]
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
LLAMA_RELEASE="${LLAMA_RELEASE:-0.3.36}"
KERAS_RELEASE="${KERAS_RELEASE:-0.32.0}"
BUILD_ONLY=0
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-only) BUILD_ONLY=1; shift ;;
    --only) ONLY="$2"; shift 2 ;;
    *) echo "ci_engines_heavy: unknown option $1" >&2; exit 2 ;;
  esac
done
DEV_VENV="${DEV_VENV:-.venv}"
if [ ! -x "$DEV_VENV/bin/python" ]; then echo "ci_engines_heavy: run 'make setup' first" >&2; exit 2; fi
SHARED="$("$DEV_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
PYVER="$("$DEV_VENV/bin/python" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")')"

small_venv() {  # small_venv DIR: a pip-less venv that sees the dev venv's packages after its own
  [ -x "$1/bin/python" ] || "$DEV_VENV/bin/python" -m venv --without-pip "$1"
  printf '%s\n%s\n' "$SHARED" "$PWD" > "$1/lib/$PYVER/site-packages/zz_kvwindow_shared.pth"
}

build_llama() {
  local v=.venv-llama stamp=.venv-llama/.kvwindow-llama
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$LLAMA_RELEASE" ]; then return 0; fi
  small_venv "$v"
  DEV_VENV="$DEV_VENV" scripts/engines/llama_build.sh "$LLAMA_RELEASE" "$v"
  echo "$LLAMA_RELEASE" > "$stamp"
}

build_keras() {
  local v=.venv-keras stamp=.venv-keras/.kvwindow-keras
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$KERAS_RELEASE" ]; then return 0; fi
  small_venv "$v"
  local t0=$SECONDS
  "$DEV_VENV/bin/python" -m pip --python "$v/bin/python" install -q "keras-hub==$KERAS_RELEASE" tensorflow-cpu
  echo "ci_engines_heavy: keras-hub $KERAS_RELEASE + tensorflow-cpu installed in $((SECONDS - t0)) s"
  echo "$KERAS_RELEASE" > "$stamp"
}

status=0
if [ -z "$ONLY" ] || [ "$ONLY" = llama ]; then
  build_llama
  if [ "$BUILD_ONLY" = 0 ]; then
    .venv-llama/bin/python -m pytest -q -p no:cacheprovider tests/test_engine_llama*.py || status=1
  fi
fi
if [ -z "$ONLY" ] || [ "$ONLY" = keras ]; then
  build_keras
  if [ "$BUILD_ONLY" = 0 ] && ls tests/test_engine_keras*.py >/dev/null 2>&1; then
    KERAS_BACKEND=tensorflow .venv-keras/bin/python -m pytest -q -p no:cacheprovider tests/test_engine_keras*.py || status=1
  fi
fi
exit $status
