"""``kvwindow bench --only engines``: examples/s of every installed engine target (``ort: mlx: ct2: llama: keras:``,
found through the registry), side by side in one run, on one core, against the goal per kind of target.

Goals (issue 21): an op-level target (one operator or one cache driven directly: ``ort:*``, ``mlx:rotating``,
``mlx:batch-rotating``) at least 200 examples/s, a model-level target (a tiny model end to end) at least 10.
The process is pinned to one CPU (``os.sched_setaffinity``) while a target is measured, so two-thread views run
on one core as a CI runner's share would; the pin is undone afterwards. Each target runs the ordinary campaign
(:func:`fuzz.bench.throughput.measure_campaign`) ``repeats`` times at ``W = 8``; the median rate is reported.

Two rates per target: examples per wall-clock second (what a campaign gets on this machine now) and examples
per CPU-second of the process (``resource.getrusage``: user + system, every thread of it), which leaves out the
time a shared core gave to other processes — the rate on a core of its own. Beside them the same campaign on
a target that does nothing (:class:`Ceiling`, same ``window_max``/``max_tokens`` as the op-level targets): what
Hypothesis and the campaign cost per example, the most any target can reach here.
"""

from __future__ import annotations

import contextlib
import os
import resource
import statistics
from typing import Any, Callable, Iterator

from fuzz.targets.base import Target
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


class Ceiling(Target):
    """A target that runs nothing: the campaign's own cost per example (the module docstring)."""

    name, kind = "(campaign ceiling: a no-op target)", "model"
    window_max, max_tokens = 32, 96

    def run(self, case):
        from fuzz.targets.known import case_stats

        return case_stats(case)


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


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
    ceiling = Ceiling()
    with one_core() as pin:
        for name, t in targets.items():  # warm-up: sessions, kernels, first Hypothesis call
            measure_campaign(t, WINDOW, min(0.5, seconds), campaign_seed=0)
        rates: dict[str, list[float]] = {n: [] for n in [*targets, ceiling.name]}
        cpu_rates: dict[str, list[float]] = {n: [] for n in rates}
        load = []
        for rep in range(repeats):
            for name, t in [*targets.items(), (ceiling.name, ceiling)]:  # side by side: every target each repeat
                c0 = _cpu()
                m = measure_campaign(t, WINDOW, seconds, campaign_seed=rep + 1)
                cpu = _cpu() - c0
                rates[name].append(m["examples_per_s"])
                cpu_rates[name].append(m["examples"] / cpu if cpu > 0 else 0.0)
            load.append(os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"))
            log(f"  engines repeat {rep + 1}/{repeats} done")
    for name, rs in rates.items():
        level = "op" if name in OP_LEVEL else "ceiling" if name == ceiling.name else "model"
        med, cmed = statistics.median(rs), statistics.median(cpu_rates[name])
        goal = GOALS.get(level)
        rows.append({"target": name, "level": level, "examples_per_s": round(med, 1),
                     "examples_per_cpu_s": round(cmed, 1), "repeats": [round(r, 1) for r in rs],
                     "goal": goal, "meets_goal": None if goal is None else med >= goal,
                     "meets_goal_on_own_core": None if goal is None else cmed >= goal})
    return {"status": "ok", "window": WINDOW, "seconds_per_repeat": seconds, "cpu": pin, "rows": rows,
            "skipped": skipped, "load_avg_1m": [round(x, 2) for x in load], "cpus": os.cpu_count()}


def render_markdown(s: dict[str, Any]) -> list[str]:
    """The report's Engines section (``kvwindow bench`` writes it into report.md)."""
    L = [f"One campaign per target and repeat (W = {s['window']}, {s['seconds_per_repeat']:g} s), side by side, "
         f"{s['cpu']}; load average during the run {s.get('load_avg_1m')} on {s.get('cpus')} CPUs. Goal: op-level "
         f">= {GOALS['op']:g} examples/s, model-level >= {GOALS['model']:g}. Examples per CPU-second leave out the "
         "time other processes took from the shared core.", "",
         "| target | level | examples/s | examples per CPU-s | goal | met (wall) | met (own core) | repeats |",
         "|---|---|---:|---:|---:|---|---|---|"]
    yes = lambda b: "—" if b is None else "yes" if b else "no"  # noqa: E731
    for r in s["rows"]:
        L.append(f"| `{r['target']}` | {r['level']} | {r['examples_per_s']:g} | {r.get('examples_per_cpu_s', 0):g} | "
                 f"{'—' if r['goal'] is None else format(r['goal'], 'g')} | {yes(r['meets_goal'])} | "
                 f"{yes(r.get('meets_goal_on_own_core'))} | {', '.join(format(x, 'g') for x in r['repeats'])} |")
    for name, why in s.get("skipped", {}).items():
        L.append(f"| `{name}` | — | not measured: {' '.join(str(why).split())[:120]} | | | | | |")
    return L + [""]


def section_engines(b, log: Callable[[str], None]) -> dict[str, Any]:
    return measure(max(1.0, 3 * b.stateful_s), b.repeats, log)
