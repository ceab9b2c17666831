#!/usr/bin/env bash
# Build llama-cpp-python RELEASE from its sdist into the venv VENV with the flags that cut the build from ~31 to
# ~7 min on this 2-core machine (measured for 0.3.36: no tests/examples/tools/server/app, no mtmd/llava, one native
# CPU backend, no OpenMP, ccache), and extract the same sdist's converter (convert_hf_to_gguf.py, conversion/,
# gguf-py/) into VENV/share/kvwindow/llama.cpp-RELEASE/, where impl/engines/llama.py looks for it.
#
# Used by scripts/ci_engines_heavy.sh and, as PRE_INSTALL of scripts/engines/llama.env, by scripts/engine_matrix.sh
# (whose PIP_SPEC install then finds the release installed).
#
# Usage: scripts/engines/llama_build.sh RELEASE VENV   (DEV_VENV: the venv whose pip runs; default .venv)
set -euo pipefail
REL="$1"; VENV="$2"; DEV_VENV="${DEV_VENV:-.venv}"
dl="$(mktemp -d)"
trap 'rm -rf "$dl"' EXIT
"$DEV_VENV/bin/python" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$REL" -d "$dl"
sdist="$(ls "$dl"/llama_cpp_python-*.tar.gz)"
export CMAKE_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF -DGGML_CCACHE=ON -DGGML_OPENMP=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
t0=$SECONDS
"$DEV_VENV/bin/python" -m pip --python "$VENV/bin/python" install -q "$sdist" gguf
echo "llama_build: llama-cpp-python $REL built in $((SECONDS - t0)) s"
conv="$VENV/share/kvwindow/llama.cpp-$REL"
mkdir -p "$dl/src" "$conv"
tar -xzf "$sdist" -C "$dl/src"
vend="$(ls -d "$dl"/src/llama_cpp_python-*/vendor/llama.cpp)"
rm -rf "${conv:?}"/*
cp -r "$vend/convert_hf_to_gguf.py" "$vend/gguf-py" "$conv/"
if [ -d "$vend/conversion" ]; then cp -r "$vend/conversion" "$conv/"; fi
