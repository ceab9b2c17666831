"""pytest-benchmark: spec-checked tokens per second of the C ring, bulk vs single pushes, W in {8, 64, 512}.

Not collected by the default test run (file name ``bench_*``); never a timed
assertion. Run with::

    .venv/bin/python -m pytest tests/bench/bench_ring.py --benchmark-enable -p no:cacheprovider -s

A token counts once its resulting cache was checked against the spec: in bulk
mode the window row and payload checksum from ``ringkv_trace`` against
``pyspec.bulk``; in the op loop the contents against pyspec after every push.
Goal: >= 1,000,000 tokens/s in bulk mode on one core.
The same numbers as dicts: ``fuzz.bench.throughput.measure_bulk`` / ``measure_pushes``.
"""

from __future__ import annotations

import pytest

from fuzz.bench.throughput import measure_pushes
from fuzz.targets.ring_bulk import check_trace

WIDTH = 16
BULK_TOKENS = {8: 1_000_000, 64: 1_000_000, 512: 200_000}
PUSH_TOKENS = {8: 5_000, 64: 1_000, 512: 200}


def _report(benchmark, mode, w, tokens):
    rate = tokens / benchmark.stats.stats.mean
    benchmark.extra_info.update({"mode": mode, "w": w, "width": WIDTH, "tokens": tokens, "tokens_per_s": rate})
    print(f"\n{mode:8s} W={w:<4d} width={WIDTH}: {rate:,.0f} spec-checked tokens/s")


@pytest.mark.parametrize("w", [8, 64, 512])
def test_bulk_checked_tokens(benchmark, w):
    n = BULK_TOKENS[w]
    res = benchmark.pedantic(lambda: check_trace(w, n, width=WIDTH), rounds=3, iterations=1, warmup_rounds=1)
    assert res.tokens == n
    _report(benchmark, "bulk", w, n)


@pytest.mark.parametrize("w", [8, 64, 512])
def test_pushed_checked_tokens(benchmark, w):
    n = PUSH_TOKENS[w]
    out = benchmark.pedantic(lambda: measure_pushes(w, n, WIDTH), rounds=3, iterations=1)
    assert out["tokens"] == n
    _report(benchmark, "pushes", w, n)
