"""CPU checks of the pieces the GPU targets rely on: the full-mask decode reference, the named
tolerances (tight enough to see a window off by one key, loose enough for bf16 rounding),
the benchmark's peak-bandwidth lookup, and the GPU targets' "unavailable" reasons.
"""

from __future__ import annotations

import pytest
import torch

import pyspec
from fuzz.targets.cuda import DECODE_TOLERANCES, compare_decode, reference_decode
from impl.errors import Unavailable
from fuzz.bench import gpu as cuda_bench


def _hist(n, h, d, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn((n, h, d), generator=g, dtype=torch.float64),
            torch.randn((n, h, d), generator=g, dtype=torch.float64),
            torch.randn((h * 4, d), generator=g, dtype=torch.float64))


@pytest.mark.parametrize("w,n", [(1, 1), (1, 9), (4, 3), (4, 4), (4, 5), (8, 40)])
def test_reference_over_full_history_equals_attention_over_last_window(w, n):
    """Lean attention_eq: masked attention over the full history = attention over the cache."""
    k, v, q = _hist(n, 2, 64, w * 100 + n)
    scale = 64 ** -0.5
    ref = reference_decode(q, k, v, w, scale)
    keep = [p for p in range(n) if pyspec.in_window(w, n - 1, p)]
    assert keep == pyspec.positions_last_window(w, n)
    kc, vc = k[keep], v[keep]
    for hq in range(q.shape[0]):
        h = hq // 4  # GQA: query head hq uses KV head hq // G
        p = torch.softmax((kc[:, h] @ q[hq]) * scale, dim=0)
        assert torch.allclose(ref[hq], p @ vc[:, h], atol=1e-12)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_tolerance_accepts_rounding_and_rejects_off_by_one_window(dtype):
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    for seed in range(5):
        k, v, q = _hist(40, 2, 64, seed)
        k, v, q = k.to(tdt).double(), v.to(tdt).double(), q.to(tdt).double()
        scale = 64 ** -0.5
        ref = reference_decode(q, k, v, 8, scale)
        assert compare_decode(ref.to(tdt), ref, dtype) is None  # the output rounding alone passes
        for wrong in (7, 9):  # W - 1 and W + 1 keys
            assert compare_decode(reference_decode(q, k, v, wrong, scale).to(tdt), ref, dtype) is not None
    assert set(DECODE_TOLERANCES) == {"bf16", "fp16", "fp32"}


def test_compare_decode_flags_nan():
    ref = torch.zeros((2, 64), dtype=torch.float64)
    bad = ref.clone()
    bad[1, 3] = float("nan")
    assert "(1, 3)" in compare_decode(bad, ref, "fp32")


def test_peak_bandwidth_table_and_override(monkeypatch):
    assert cuda_bench.table_peak("NVIDIA H200") == 4.8e12
    assert cuda_bench.table_peak("NVIDIA H100 80GB HBM3") == 3.35e12
    assert cuda_bench.table_peak("NVIDIA A100-SXM4-80GB") == 2.0e12
    assert cuda_bench.table_peak("Some GPU") is None
    assert cuda_bench.parse_bandwidth("4.8TB/s") == 4.8e12
    assert cuda_bench.parse_bandwidth("2039 GB/s") == 2.039e12
    assert cuda_bench.parse_bandwidth("3.35e12") == 3.35e12
    monkeypatch.setenv(cuda_bench.ENV_PEAK, "1TB/s")
    assert cuda_bench.peak_bandwidth(0) == (1e12, f"${cuda_bench.ENV_PEAK}")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.parametrize("factory", ["make_cuda_ring", "make_cuda_decoder"])
def test_gpu_targets_say_why_they_are_unavailable(factory):
    from fuzz.targets import cuda as cuda_targets

    with pytest.raises(Unavailable, match="no CUDA device"):
        getattr(cuda_targets, factory)()
