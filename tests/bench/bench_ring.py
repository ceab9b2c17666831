"""pytest-benchmark: spec-checked steps per second of the C ring, bulk vs stateful, W in {8, 64, 512}.

Not collected by the default test run (file name ``bench_*``); never a timed
assertion. Run with::

    .venv/bin/python -m pytest tests/bench/bench_ring.py --benchmark-enable -p no:cacheprovider -s

A "step" is one pushed token whose resulting cache was checked against the
spec: in bulk mode the window row and payload checksum from ``ringkv_trace``
against ``pyspec.bulk``; in stateful mode ``contents()`` against pyspec after
every push. Goal: >= 1,000,000 steps/s in bulk mode on one core.
The same numbers as dicts: ``fuzz.targets.ring_bulk.measure_bulk`` / ``measure_stateful``.
"""

from __future__ import annotations

import pytest

from fuzz.targets.ring_bulk import check_trace, measure_stateful

WIDTH = 16
BULK_STEPS = {8: 1_000_000, 64: 1_000_000, 512: 200_000}
STATEFUL_STEPS = {8: 5_000, 64: 1_000, 512: 200}


def _report(benchmark, mode, w, steps):
    rate = steps / benchmark.stats.stats.mean
    benchmark.extra_info.update({"mode": mode, "w": w, "width": WIDTH, "steps": steps, "steps_per_s": rate})
    print(f"\n{mode:8s} W={w:<4d} width={WIDTH}: {rate:,.0f} spec-checked steps/s")


@pytest.mark.parametrize("w", [8, 64, 512])
def test_bulk_checked_steps(benchmark, w):
    n = BULK_STEPS[w]
    res = benchmark.pedantic(lambda: check_trace(w, n, width=WIDTH), rounds=3, iterations=1, warmup_rounds=1)
    assert res.steps == n
    _report(benchmark, "bulk", w, n)


@pytest.mark.parametrize("w", [8, 64, 512])
def test_stateful_checked_steps(benchmark, w):
    n = STATEFUL_STEPS[w]
    out = benchmark.pedantic(lambda: measure_stateful(w, n, WIDTH), rounds=3, iterations=1)
    assert out["steps"] == n
    _report(benchmark, "stateful", w, n)
