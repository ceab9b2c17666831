#!/usr/bin/env bash
# .venv-serving/: vLLM's and SGLang's block managers, importable on a CPU machine with no model.
#
# impl/serving/ drives the engines' *real* KV-block managers (vLLM's KVCacheManager with its
# SlidingWindowManager / hybrid coordinator and BlockPool; SGLang's SWATokenToKVPoolAllocator and
# SWA radix cache) as paged caches (DESIGN §4 "Paged protocol"). Neither engine installs on a CPU
# machine with its dependencies (CUDA torch, flashinfer, ...), so this venv holds:
#
#   * torch 2.13.0 (the CPU build on local disk: every venv of this project pins it),
#   * vllm 0.33.0 and sglang 0.5.23 with --no-deps,
#   * the pinned dependencies their block-manager imports need: the list below was found by importing
#     vllm.v1.core.kv_cache_manager, vllm.v1.core.sched.scheduler and sglang.srt.mem_cache.allocator.swa,
#     sglang.srt.mem_cache.swa_memory_pool, sglang.srt.mem_cache.common and installing
#     each missing module, one at a time, until they imported (versions: vLLM's own pins where it has
#     one, else what the registry served when this was written),
#   * torchvision 0.28.0 (--no-deps; transformers and sglang.srt.configs import it: its C ops are built
#     against CUDA and do not load here, impl/serving/_imports.py explains how that is bridged),
#   * pytest, pytest-benchmark, hypothesis, cffi (the test suite, tests/test_serving_*.py).
#
# It is never the default venv (.venv, `make setup`); it is git-ignored (.venv-*/).
# Idempotent: a stamp (.venv-serving/.serving-installed) holds a hash of this script; a second run with
# the stamp in place does nothing. Measured on the 2-core machine (a cold pip cache): see docs/serving.md.
#
# Usage: scripts/install_serving_cores.sh [--force]      (--force: delete and rebuild the venv)
#        VLLM_RELEASE=0.34.0 SERVING_VENV=DIR scripts/install_serving_cores.sh   (another vLLM release, its own venv;
#        the dependency list stays the one above: docs/serving.md says what 0.34.0 needs of the adapter)
# Then:  .venv-serving/bin/python -m pytest tests/test_serving_vllm.py tests/test_serving_sglang.py -q
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1

VENV="${SERVING_VENV:-.venv-serving}"
STAMP="$VENV/.serving-installed"
TORCH="torch==2.13.0"
VLLM="vllm==${VLLM_RELEASE:-0.33.0}"
SGLANG="sglang==0.5.23"

# The pure-Python (and a few binary-wheel) dependencies the block-manager imports need, --no-deps each.
DEPS=(
  # shared / transformers (vLLM pins transformers<5.21.0,>=5.16.1; SGLang pins ==5.19.0)
  transformers==5.19.0 huggingface_hub==2.4.0 tokenizers==0.23.3 safetensors==0.8.0 hf-xet==1.8.0
  numpy==2.4.6 packaging==26.4 PyYAML==6.0.4 regex==2026.11.19 tqdm==4.70.1 filelock==4.3.1 fsspec==2026.9.0
  typing_extensions==4.16.0 sympy==1.14.0 mpmath==1.3.0 networkx==3.6.1 Jinja2==3.1.6 MarkupSafe==3.0.4
  httpx2==2.16.2 httpcore2==2.16.2 h11==0.16.0 idna==3.20 anyio==4.16.0 sniffio==1.3.1 truststore==0.10.5
  typer==0.29.2 click==8.5.1 shellingham==1.5.4 rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2
  Pygments==2.21.0 annotated-doc==0.0.7
  # vLLM's import chain (vllm.config, vllm.v1.request, vllm.distributed.kv_events, structured output)
  psutil==7.2.2 pyzmq==27.3.0 urllib3==2.8.0 msgspec==0.23.0 pydantic==2.14.4 pydantic_core==2.50.5
  typing-inspection==0.4.5 annotated-types==0.8.0 cbor2==6.3.0 aiohttp==3.14.5 multidict==7.2.1
  attrs==26.1.0 yarl==1.25.1 propcache==0.5.4 aiohappyeyeballs==2.7.1 aiosignal==1.4.0 frozenlist==1.8.0
  requests==2.34.2 certifi==2026.10.19.post1 charset-normalizer==3.5.3 openai-harmony==0.0.8 openai==3.57.0
  pillow==13.0.0 pybase64==1.5.1 cachetools==8.0.2 cloudpickle==3.1.3 uvloop==0.23.0 py-cpuinfo==9.0.0
  prometheus_client==0.26.0 xgrammar==0.2.8 apache-tvm-ffi==0.1.15.post2 fastapi==0.165.0 starlette==1.10.0
  opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-semantic-conventions==0.66b2
  partial-json-parser==0.2.1.1.post7 llguidance==1.9.1
  # SGLang's import chain (sglang.srt.mem_cache -> sglang.srt.configs, layers, sampling)
  orjson==3.13.0 triton==3.9.0 ipython==9.18.1 traitlets==5.16.1 dill==0.4.1 sentencepiece==0.2.3
  compressed-tensors==0.17.0 loguru==0.7.3 gguf==0.19.0 torchvision==0.28.0
  # the test suite
  pytest==9.2.0 pytest-benchmark==5.3.1 iniconfig==2.3.1 pluggy==1.7.0 hypothesis==6.170.17
  sortedcontainers==2.4.0 cffi==2.1.1 pycparser==3.12
)

die() { echo "install_serving_cores: $*" >&2; exit 1; }

[ "${1:-}" = "--force" ] && rm -rf "$VENV"
[ $# -le 1 ] || die "usage: $0 [--force]"
[ -z "${1:-}" ] || [ "$1" = "--force" ] || die "unknown option $1 (usage: $0 [--force])"

RECIPE="$(sha256sum "$0" | cut -c1-16)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$RECIPE" ]; then
  echo "install_serving_cores: $VENV is up to date (stamp $STAMP); --force rebuilds it"
  exit 0
fi

command -v python3.11 >/dev/null || command -v python3 >/dev/null || die "no python3 on PATH"
PYTHON="$(command -v python3.11 || command -v python3)"
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' 2>/dev/null \
  || die "$PYTHON is not Python 3.11 (the local torch 2.13.0 wheel and the engines' wheels are cp311)"

START=$(date +%s)
rm -f "$STAMP"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV" || die "could not create $VENV"
PIP=("$VENV/bin/python" -m pip install -q --no-deps)

echo "install_serving_cores: [1/4] $TORCH (the CPU build on local disk)"
"${PIP[@]}" "$TORCH" || die "could not install $TORCH: it must come from local disk (pip's find-links); \
a torch from the registry is a GPU build of several GB"

echo "install_serving_cores: [2/4] $VLLM and $SGLANG (--no-deps: their CUDA dependencies are not needed to drive the block managers)"
"${PIP[@]}" "$VLLM" "$SGLANG" || die "could not install $VLLM / $SGLANG (the wheels are ~340 MB and ~40 MB)"

echo "install_serving_cores: [3/4] ${#DEPS[@]} pinned dependencies (--no-deps each)"
"${PIP[@]}" "${DEPS[@]}" || die "could not install the pinned dependencies (see the list in $0)"

echo "install_serving_cores: [4/4] checking the imports impl/serving needs"
"$VENV/bin/python" -c 'import torch, sys; v = torch.__version__; sys.exit(0 if v.startswith("2.13.0") else f"torch {v}")' \
  || die "the venv's torch is not 2.13.0"
"$VENV/bin/python" - <<'EOF' || die "the engines' block managers do not import (the message above names the module)"
import sys
sys.path.insert(0, ".")
from impl.serving._imports import import_vllm, import_sglang
v, s = import_vllm(), import_sglang()
print(f"install_serving_cores: vllm {v.release} and sglang {s.release} block managers import")
EOF

SECONDS_TAKEN=$(( $(date +%s) - START ))
SIZE="$(du -sh "$VENV" | cut -f1)"
echo "$RECIPE" > "$STAMP.tmp" && mv "$STAMP.tmp" "$STAMP"
echo "install_serving_cores: done in ${SECONDS_TAKEN}s; $VENV is $SIZE"
