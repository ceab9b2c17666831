"""What the harness's own checking costs: spec-checked tokens per second of a campaign, of the C ring's
bulk mode, and of single pushes through the op loop.

A token counts once, when the cache that holds it has been checked against the
spec (a chunk of k is k tokens). None of these is a timed assertion: ``kvwindow
bench`` reports them, ``tests/bench/bench_ring.py`` wraps two for pytest-benchmark.
"""

from __future__ import annotations

import time
from typing import Any

from fuzz.config import CampaignConfig
from fuzz.targets.base import Target


def measure_campaign(target: Target, window: int, seconds: float, campaign_seed: int) -> dict[str, Any]:
    """The ordinary campaign (:func:`fuzz.campaign.fuzz_target`: boundary tours, then cases that
    start at window ``window``, resets at or below it) on ``target`` for ``seconds``.

    ``tokens`` leave out the long tour's (one explicit stream of 70 001 tokens per campaign, nearly all
    of them in three chunks: counted, they would swamp a short measurement); its time stays in
    ``seconds``, as does the bulk phase's (``bulk_tokens``, never in ``tokens``)."""
    from fuzz.campaign import LONG_TOUR_SKIPPED, fuzz_target
    from fuzz.strategies import boundary_tours, long_tour

    config = CampaignConfig(seconds=seconds, window_max=window, start_window=window, campaign_seed=campaign_seed,
                            save_seeds=False)
    r = fuzz_target(target, config)
    if r.failures:
        raise RuntimeError(f"{target.name} failed during the benchmark: {r.failures[0].error.splitlines()[0]}")
    if r.faults:
        raise RuntimeError(f"{target.name}: a harness fault during the benchmark: {r.faults[0]}")
    tours = [c for c in boundary_tours(window, target.max_tokens, target.bad_kinds) if target.accepts(c) is None]
    tour = long_tour(window)
    ran = not any(w.startswith(LONG_TOUR_SKIPPED) for w in r.warnings)
    long = tour.tokens if ran and tour in tours and r.examples >= tours.index(tour) + 1 else 0
    tokens = r.tokens - long
    return {"examples": r.examples, "tokens": tokens, "long_tour_tokens": long, "bulk_tokens": r.bulk_tokens,
            "seconds": r.seconds, "phases": dict(r.phases), "examples_per_s": r.examples_per_s,
            "tokens_per_s": tokens / r.seconds if r.seconds else 0.0}


def measure_bulk(w: int, n: int, width: int = 16, *, backend=None) -> dict[str, Any]:
    """Spec-checked tokens per second in bulk mode (:func:`fuzz.targets.ring_bulk.check_trace`).

    Every one of the ``n`` tokens is checked (positions row and checksum); the time
    includes payload generation and the numpy checks, not just the C calls."""
    from fuzz.targets.ring_bulk import check_trace

    res = check_trace(w, n, width=width, backend=backend)
    return {"mode": "bulk", "w": w, "width": width, "tokens": res.tokens,
            "seconds": res.seconds, "tokens_per_s": res.tokens_per_s}


def measure_long(target: Target, seconds: float, campaign_seed: int) -> dict[str, Any]:
    """What the bulk phase and the long tour cost a default campaign of ``target``: the campaign as
    ``kvwindow fuzz`` runs it (default config, ``seconds``), its bulk phase's share of the time and of
    the spec-checked tokens (bulk tokens over case tokens plus bulk tokens), and one run of the long tour
    (:func:`fuzz.strategies.long_tour`, every campaign runs it once) timed on its own."""
    from fuzz.campaign import fuzz_target
    from fuzz.strategies import long_tour

    r = fuzz_target(target, CampaignConfig(seconds=seconds, campaign_seed=campaign_seed, save_seeds=False))
    if r.failures:
        raise RuntimeError(f"{target.name} failed during the benchmark: {r.failures[0].error.splitlines()[0]}")
    tour = long_tour()
    start = time.perf_counter()
    target.run(tour)
    tour_s = time.perf_counter() - start
    all_tokens = r.tokens + r.bulk_tokens
    phase_s = {name: rec.get("seconds", 0.0) for name, rec in r.phases_run.items()}
    return {**{f"{d}_time_share": (phase_s.get(d, 0.0) / r.seconds if r.seconds else None) for d in DIMENSIONS},
            "scale_window": r.phases_run.get("scale", {}).get("window"),
            "threads_examples": r.phases_run.get("threads", {}).get("examples", 0),
            "seconds": r.seconds, "tokens": r.tokens, "bulk_tokens": r.bulk_tokens, "bulk_seconds": r.bulk_seconds,
            "bulk_time_share": r.bulk_seconds / r.seconds if r.seconds else None,
            "bulk_token_share": r.bulk_tokens / all_tokens if all_tokens else None,
            "bulk_tokens_per_s": r.bulk_tokens / r.bulk_seconds if r.bulk_seconds else None,
            "long_tour_tokens": tour.tokens, "long_tour_s": tour_s}


#: The campaign phases of issue 28's dimensions whose share of a default campaign's time :func:`measure_long` reports:
#: the scale tours (W = 33 ... 65 537), the leak probe and the threads phase.
DIMENSIONS = ("scale", "leaks", "threads")


def measure_pushes(w: int, n: int, width: int = 16, *, backend=None) -> dict[str, Any]:
    """The op-loop counterpart of :func:`measure_bulk`: ``n`` single-token pushes through
    :class:`~fuzz.targets.cache.CacheTarget`, the contents checked after each."""
    from fuzz.ops import Case, Push
    from fuzz.targets.cache import CacheTarget
    from impl.ring import CRing

    target = CacheTarget("ring-c", lambda: CRing(width, backend=backend), width=width)
    start = time.perf_counter()
    stats = target.run(Case(w, (Push(),) * n))
    seconds = time.perf_counter() - start
    return {"mode": "pushes", "w": w, "width": width, "tokens": stats.tokens, "seconds": seconds,
            "tokens_per_s": stats.tokens / seconds if seconds > 0 else float("inf")}
