#!/usr/bin/env bash
# The serving engines' block managers (vLLM 0.33.0, SGLang 0.5.23): build .venv-serving
# (scripts/install_serving_cores.sh: 553 s and 3.4 GB from a cold pip cache on the 2-core machine), then
# run their tests in it: the adapters against PagedC (tests/test_serving_vllm.py, _sglang.py) and the
# vllm:swa, vllm:hybrid and sglang:swa targets through short paged campaigns (tests/test_serving_targets.py);
# ~60 s. In the default venv (make test) these tests skip with the reason.
#
# Needs `make setup` first: the project's compiled C libraries (impl/*.so, built in place) are shared.
# Usage: scripts/ci_serving.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ls impl/_pagedkv*.so >/dev/null 2>&1; then echo "ci_serving: run 'make setup' first (impl/_pagedkv is not built)" >&2; exit 2; fi
bash scripts/install_serving_cores.sh
.venv-serving/bin/python -m pytest -q -p no:cacheprovider \
  tests/test_serving_adapters.py tests/test_serving_vllm.py tests/test_serving_sglang.py tests/test_serving_targets.py
