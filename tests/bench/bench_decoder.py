"""pytest-benchmark: per-token decode with the ring-buffer cache vs full recompute at t = W, 4W, 16W.

Not collected by the default test run (file name ``bench_*``). Run with::

    .venv/bin/python -m pytest tests/bench/bench_decoder.py --benchmark-enable -p no:cacheprovider

The same numbers as one dict: ``python -m fuzz.bench.decode`` (``fuzz.bench.decode.measure_decode``).
"""

from __future__ import annotations

import pytest
import torch

from impl.decoder import Decoder
from fuzz.bench.decode import BENCH_CONFIG, kv_formula_bytes

W = 64
STREAM = [(p * 2654435761) % BENCH_CONFIG.vocab for p in range(16 * W + 4096)]


@pytest.fixture(scope="module")
def model():
    old = torch.get_num_threads()
    torch.set_num_threads(1)  # as measure_decode: a small model, extra threads only add jitter
    yield Decoder(BENCH_CONFIG, window=W)
    torch.set_num_threads(old)


@pytest.mark.parametrize("t", [W, 4 * W, 16 * W])
def test_ring_decode_per_token(benchmark, model, t):
    cache = model.new_cache()
    for i in range(0, t, 4 * W):
        model.forward_cached(cache, STREAM[i:min(t, i + 4 * W)])
    assert cache.kv_bytes() == kv_formula_bytes(model.config, W)
    pos = iter(range(t, t + 4096))

    benchmark.pedantic(lambda: model.decode(cache, STREAM[next(pos)]), rounds=200, iterations=1, warmup_rounds=5)
    assert cache.kv_bytes() == kv_formula_bytes(model.config, W)


@pytest.mark.parametrize("t", [W, 4 * W, 16 * W])
def test_full_recompute_per_token(benchmark, model, t):
    benchmark.pedantic(lambda: model.full_forward(STREAM[:t + 1]), rounds=10, iterations=1, warmup_rounds=1)
