#!/usr/bin/env bash
# The Triton kernel targets (triton:vllm-unified, triton:vllm-prefix, triton:vllm-mla, triton:sglang-decode,
# triton:sglang-extend; docs/kernels.md):
# build .venv-triton — torch 2.13.0 (the project's pin), triton, the pure-Python modules the kernel files import
# ([triton-vllm], [triton-sglang]), and vLLM / SGLang themselves with --no-deps (their full dependency sets pin
# another torch and CUDA wheels; the kernel files need none of it) — then run the kernel targets' tests under
# Triton's interpreter (TRITON_INTERPRET=1, CUDA_VISIBLE_DEVICES=""). In the default venv (make test) these tests
# skip with the install line.
#
# Usage: scripts/ci_triton.sh   (VENV=PATH builds or reuses that venv instead of .venv-triton)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv-triton}"
if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
"$VENV/bin/pip" install -q torch==2.13.0
"$VENV/bin/pip" install -q -e '.[dev,triton-vllm,triton-sglang]'
"$VENV/bin/pip" install -q --no-deps vllm==0.34.0 sglang==0.5.23
"$VENV/bin/pip" install -q --no-deps torch==2.13.0 triton==3.9.0  # nothing above may have moved them
export TRITON_INTERPRET=1 CUDA_VISIBLE_DEVICES=""
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/test_triton_kernels.py
