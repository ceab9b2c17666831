#!/usr/bin/env bash
# GPU check for the CUDA ring KV cache (issue 7), one run, under 5 minutes:
#   1. environment (torch must see a GPU),
#   2. build csrc/build/libringkv_cuda.so with nvcc (or use a prebuilt one when nvcc is absent),
#   3. GPU tests (tests/test_cuda_*.py),
#   3b. the paged gather / decode kernels (issue 22): build csrc/build/libpagedkv_cuda.so, then
#       tests/test_paged_c_gpu.py (against the C pool and the index mirror) and the compile check,
#   4. a short GPU campaign: kvwindow fuzz --target cuda-ring --target cuda-decoder --time 30,
#   4b. the CUDA attention libraries' sliding-window kernels: gpu:flash-attn, gpu:flashinfer (docs/kernels.md; 20 s
#       each where the package is installed — nothing can be installed on a lent machine, so a target whose package
#       is missing prints its unavailable reason and exits 2, which is reported, not failed) and, where .venv-triton
#       exists, the triton:* kernel targets natively (15 s each),
#   5. the decode-attention benchmark (B=64, W=4096, 8 KV heads, 32 query heads, D=128, bf16):
#      achieved bandwidth vs the device's peak, side by side with torch SDPA.
# Exit status: nonzero if the build, a test, the campaign or the benchmark's correctness check
# fails. The bandwidth goal (>= 70 % of peak and faster than SDPA) is reported; set
# REQUIRE_BW_GOAL=1 to make it fail the script too. KVWINDOW_PEAK_BW overrides the peak.
set -uo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
PY=.venv/bin/python
status=0
step() { echo; echo "=== $* [$(( $(date +%s) - START ))s]"; }
fail() { echo "FAIL: $*"; status=1; }

step "environment"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ ! -x "$PY" ]; then
  echo ".venv missing: make setup"
  make setup || { echo "FAIL: make setup"; exit 1; }
fi
"$PY" - <<'PYEOF' || exit 1
import sys, torch
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), cuda available: {torch.cuda.is_available()}")
if not torch.cuda.is_available():
    sys.exit("FAIL: torch sees no CUDA device (a CPU-only torch in .venv?); nothing to check")
print("device:", torch.cuda.get_device_name(), "capability", torch.cuda.get_device_capability())
PYEOF

step "build"
"$PY" - <<'PYEOF' || exit 1
import sys
from impl import cuda_ring as c
if c.nvcc_path():
    print("nvcc:", c.nvcc_path())
    print("built:", c.build(verbose=True))
elif c.library_path().exists():
    print(f"nvcc not found; using the prebuilt {c.library_path()}")
else:
    sys.exit(f"FAIL: no nvcc and no prebuilt {c.library_path()}")
reason = c.unavailable_reason()
if reason:
    sys.exit(f"FAIL: the CUDA ring cannot run: {reason}")
print("library loads; rkvc_dtype_supported(bf16) =", c.load()[1].rkvc_dtype_supported(2))
PYEOF

step "GPU tests"
timeout 170 "$PY" -m pytest -q -rs -p no:cacheprovider tests/test_cuda_gpu_*.py tests/test_cuda_index.py \
  tests/test_cuda_reference.py || fail "GPU tests"

step "paged CUDA kernels"
"$PY" - <<'PYEOF' || fail "paged kernels build"
import sys
from impl import cuda_paged as c
from impl.cuda_ring import nvcc_path
if nvcc_path():
    print("built:", c.build(verbose=True))
elif c.library_path().exists():
    print(f"nvcc not found; using the prebuilt {c.library_path()}")
else:
    sys.exit(f"FAIL: no nvcc and no prebuilt {c.library_path()}")
reason = c.unavailable_reason()
if reason:
    sys.exit(f"FAIL: the paged kernels cannot run: {reason}")
PYEOF
timeout 120 "$PY" -m pytest -q -rs -p no:cacheprovider tests/test_paged_c_gpu.py tests/test_paged_c_cuda.py \
  tests/test_paged_c_index.py || fail "paged GPU tests"

mkdir -p bench-out
step "GPU campaign (30 s)"
timeout 100 .venv/bin/kvwindow fuzz --target cuda-ring --target cuda-decoder --time 30 \
  --report bench-out/cuda_campaign.json || fail "GPU campaign"

step "CUDA attention libraries and Triton kernels natively (gpu:*, triton:*)"
kernel_campaign() {  # PYTHON TARGET SECONDS: exit 2 (unavailable here, the reason printed) is reported, not failed
  local rc
  timeout $(( $3 + 120 )) "$1" -m fuzz.cli fuzz --target "$2" --time "$3" --accept-known --plain \
    --report "bench-out/${2//:/_}.json" 2>&1 | grep -E "^(kernel calls|known|finding|FAILED|HARNESS|kvwindow: error)" ; rc=${PIPESTATUS[0]}
  case $rc in 0) echo "$2: clean" ;; 2) echo "$2: unavailable here (reason above)" ;; *) fail "$2 campaign (exit $rc)" ;; esac
}
for t in gpu:flash-attn gpu:flashinfer; do kernel_campaign "$PY" "$t" 20; done
if [ -x .venv-triton/bin/python ]; then
  for t in triton:vllm-unified triton:vllm-prefix triton:vllm-mla triton:sglang-decode triton:sglang-extend; do
    kernel_campaign .venv-triton/bin/python "$t" 15
  done
else
  echo "triton:* natively: skipped (.venv-triton missing: scripts/ci_triton.sh builds it)"
fi

step "decode-attention benchmark"
mkdir -p bench-out
bench_args=(--json bench-out/cuda_decode_bench.json)
[ "${REQUIRE_BW_GOAL:-0}" = "1" ] && bench_args+=(--require-goal)
timeout 120 "$PY" -m fuzz.bench.gpu "${bench_args[@]}" || fail "benchmark"

step "done"
[ $status -eq 0 ] && echo "gpu_check: PASS" || echo "gpu_check: FAIL"
exit $status
