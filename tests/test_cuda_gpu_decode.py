"""The fused decode-attention kernel on a GPU versus the full-mask float64 reference, every dtype,
grouped-query ratio and split count. Skipped with the reason when no GPU (or no library)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from impl import cuda_ring  # noqa: E402
from tests.support.cuda import DTYPES, pytestmark, rand  # noqa: E402,F401 - pytestmark skips without a GPU


def run_decode_case(dtype, D, G, W, lengths, splits, H=2, seed=0):
    from fuzz.targets.cuda import compare_decode, reference_decode

    B = len(lengths)
    gen = torch.Generator().manual_seed(seed)
    ring = cuda_ring.CudaRing(B, 1, H, W, D, dtype, fill=float("nan"))  # unfilled slots are NaN
    hist = []
    for b, n in enumerate(lengths):
        kk, vv = rand((n, H, D), dtype, gen), rand((n, H, D), dtype, gen)
        # Two chunks, so chunk boundaries and wrap-around both happen.
        cut = n // 3
        ring.append(0, b, 0, kk[:cut].cuda(), vv[:cut].cuda())
        ring.append(0, b, cut, kk[cut:].cuda(), vv[cut:].cuda())
        hist.append((kk.double(), vv.double()))
    q = rand((B, H * G, D), dtype, gen)
    scale = D ** -0.5
    for s in splits:
        out = ring.decode(0, q.cuda(), scale=scale, num_splits=s).cpu()
        for b, n in enumerate(lengths):
            if n == 0:
                assert bool((out[b] == 0).all()), f"empty sequence {b} not zero (splits {s})"
                continue
            ref = reference_decode(q[b].double(), hist[b][0], hist[b][1], W, scale)
            diff = compare_decode(out[b], ref, dtype)
            assert diff is None, f"seq {b} (n={n}, W={W}, G={G}, D={D}, splits={s or 'auto'}): {diff}"
    ring.close()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("G", [1, 3, 4, 8, 16])
def test_decode_matches_full_mask_reference(dtype, D, G):
    W = 37
    run_decode_case(dtype, D, G, W, [0, 1, W - 1, W, W + 1, 3 * W + 5], splits=(0, 1, 3, 8),
                    seed=D + G)


def test_decode_long_window_bf16():
    W = 4096
    run_decode_case("bf16", 128, 4, W, [W + 100, 5, W, 0, 2 * W + 1], splits=(0, 1, 16), H=8, seed=1)


def test_auto_splits_is_sane():
    ring = cuda_ring.CudaRing(64, 1, 8, 4096, 128, "bf16")
    s = ring.auto_splits(32)
    assert 1 <= s <= 64
    ring.close()
