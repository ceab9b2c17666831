"""The CUDA ring on a GPU: append / append_step / gather versus pyspec's lastWindow, every dtype.
Skipped with the reason when no GPU (or no library)."""

from __future__ import annotations

import random

import pytest

import pyspec

torch = pytest.importorskip("torch")
from impl import cuda_ring  # noqa: E402
from tests.support.cuda import DTYPES, pytestmark, rand  # noqa: E402,F401 - pytestmark skips without a GPU


class Streams:
    """Host model: per (seq, layer) the history of (k, v) rows [H, D]; expected = lastWindow."""

    def __init__(self, B, L):
        self.hist = {(b, l): [] for b in range(B) for l in range(L)}

    def expected(self, w, b, l):
        return pyspec.last_window(w, self.hist[(b, l)])


def check_all(ring, streams, where):
    for layer in range(ring.layers):
        k, v = ring.gather(layer)
        k, v = k.cpu(), v.cpu()
        for b in range(ring.batch):
            want = streams.expected(ring.window, b, layer)
            n = len(streams.hist[(b, layer)])
            assert ring.length(layer, b) == n, where
            for i, (kk, vv) in enumerate(want):
                assert torch.equal(k[b, :, i], kk) and torch.equal(v[b, :, i], vv), \
                    f"{where}: (seq {b}, layer {layer}) logical row {i} of {len(want)}"
            assert bool((k[b, :, len(want):] == 0).all()) and bool((v[b, :, len(want):] == 0).all()), \
                f"{where}: rows past the window are not zero-filled"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("window", [1, 5, 64])
def test_append_gather_match_pyspec(dtype, window):
    B, L, H, D = 3, 2, 2, 16
    gen = torch.Generator().manual_seed(window * 7 + len(dtype))
    rng = random.Random(window)
    ring = cuda_ring.CudaRing(B, L, H, window, D, dtype, fill=float("nan"))
    streams = Streams(B, L)
    sizes = [0, 1, window - 1, window, window + 1, 2 * window + 3, 3 * window + 2]
    for step in range(40):
        b, layer = rng.randrange(B), rng.randrange(L)
        if rng.random() < 0.08:
            ring.reset(b)
            for l2 in range(L):
                streams.hist[(b, l2)] = []
            where = f"step {step}: reset seq {b}"
        else:
            k = max(0, rng.choice(sizes))
            kk, vv = rand((k, H, D), dtype, gen), rand((k, H, D), dtype, gen)
            n = ring.length(layer, b)
            ring.append(layer, b, n, kk.cuda(), vv.cuda())
            streams.hist[(b, layer)].extend(zip(kk, vv))
            where = f"step {step}: chunk {k} to (seq {b}, layer {layer})"
        torch.cuda.synchronize()
        check_all(ring, streams, where)
    ring.close()


@pytest.mark.parametrize("dtype", DTYPES)
def test_append_step_matches_pyspec(dtype):
    B, L, H, D, W = 4, 1, 3, 8 if dtype != "fp32" else 4, 6
    gen = torch.Generator().manual_seed(3)
    ring = cuda_ring.CudaRing(B, L, H, W, D, dtype, fill=float("nan"))
    streams = Streams(B, L)
    for b, k in enumerate([0, 2, 6, 9]):  # different fill states before the steps
        kk, vv = rand((k, H, D), dtype, gen), rand((k, H, D), dtype, gen)
        ring.append(0, b, 0, kk.cuda(), vv.cuda())
        streams.hist[(b, 0)].extend(zip(kk, vv))
    for step in range(2 * W + 1):
        kk, vv = rand((B, H, D), dtype, gen), rand((B, H, D), dtype, gen)
        positions = [ring.length(0, b) for b in range(B)]
        ring.append_step(0, positions, kk.cuda(), vv.cuda())
        for b in range(B):
            streams.hist[(b, 0)].append((kk[b], vv[b]))
        torch.cuda.synchronize()
        check_all(ring, streams, f"step {step}")
    ring.close()
