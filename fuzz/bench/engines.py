"""``kvwindow bench --only engines``: examples/s of every installed engine target (``ort: mlx: ct2: llama: keras:``,
found through the registry), side by side in one run, on one core, against the goal per kind of target.

Goals (issue 21): an op-level target (one operator or one cache driven directly: ``ort:*``, ``mlx:rotating``,
``mlx:batch-rotating``) at least 200 examples/s, a model-level target (a tiny model end to end) at least 10.
The process is pinned to one CPU (``os.sched_setaffinity``) while a target is measured, so two-thread views run
on one core as a CI runner's share would; the pin is undone afterwards. Each target runs the ordinary campaign
(:func:`fuzz.bench.throughput.measure_campaign`) ``repeats`` times at ``W = 8``; the median rate is reported.
"""

from __future__ import annotations

import contextlib
import os
import statistics
from typing import Any, Callable, Iterator

from impl.errors import Unavailable

PREFIXES = ("ort:", "mlx:", "ct2:", "llama:", "keras:")
OP_LEVEL = frozenset({"ort:gqa", "ort:attention", "mlx:rotating", "mlx:batch-rotating"})
GOALS = {"op": 200.0, "model": 10.0}
WINDOW = 8


@contextlib.contextmanager
def one_core() -> Iterator[str]:
    """Pin this process to its lowest-numbered CPU for the block (where the platform allows it)."""
    if not hasattr(os, "sched_getaffinity"):
        yield "not pinned (no sched_setaffinity here)"
        return
    old = os.sched_getaffinity(0)
    cpu = min(old)
    os.sched_setaffinity(0, {cpu})
    try:
        yield f"pinned to CPU {cpu}"
    finally:
        os.sched_setaffinity(0, old)


def engine_names() -> list[str]:
    from fuzz.targets import registry

    return [n for n, _ in registry.listed_names() if n.startswith(PREFIXES) and not n.endswith("*")]


def measure(seconds: float, repeats: int, log: Callable[[str], None] = print) -> dict[str, Any]:
    from fuzz.bench.throughput import measure_campaign
    from fuzz.targets import registry

    rows, skipped = [], {}
    targets = {}
    for name in engine_names():
        t, why = registry.probe(name)
        if t is None:
            skipped[name] = why
        else:
            targets[name] = t
    if not targets:
        raise Unavailable("no engine target is installed: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    with one_core() as pin:
        for name, t in targets.items():  # warm-up: sessions, kernels, first Hypothesis call
            measure_campaign(t, WINDOW, min(0.5, seconds), campaign_seed=0)
        rates: dict[str, list[float]] = {n: [] for n in targets}
        for rep in range(repeats):
            for name, t in targets.items():  # side by side: each repeat visits every target
                m = measure_campaign(t, WINDOW, seconds, campaign_seed=rep + 1)
                rates[name].append(m["examples_per_s"])
            log(f"  engines repeat {rep + 1}/{repeats} done")
    for name, rs in rates.items():
        level = "op" if name in OP_LEVEL else "model"
        med = statistics.median(rs)
        rows.append({"target": name, "level": level, "examples_per_s": round(med, 1),
                     "repeats": [round(r, 1) for r in rs], "goal": GOALS[level], "meets_goal": med >= GOALS[level]})
    return {"status": "ok", "window": WINDOW, "seconds_per_repeat": seconds, "cpu": pin, "rows": rows,
            "skipped": skipped}


def section_engines(b, log: Callable[[str], None]) -> dict[str, Any]:
    return measure(max(1.0, 3 * b.stateful_s), b.repeats, log)
