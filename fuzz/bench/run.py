"""``kvwindow bench`` — measured throughput, time-to-kill and decode curves, with plots.

One command measures what a harness costs and what it finds, and draws it:

1. **throughput** — spec-checked tokens/s and examples/s per target, in stateful
   mode (a Hypothesis campaign through :func:`fuzz.campaign.fuzz_target`, one
   start window ``W`` per cell) and in bulk mode (the C ring's trace call,
   :func:`fuzz.targets.ring_bulk.measure_bulk`), over ``W``;
2. **mutants** — examples- and seconds-to-kill per mutant, boundary-biased
   strategies versus the uniform-random baseline;
3. **decode** — per-token decode time versus ``t`` for the ring-buffer cache and
   for full recompute, and KV bytes held versus the formula
   ``2 · layers · kv_heads · head_dim · W · bytes``;
4. **gpu** — the CUDA decode-attention kernel, or one line saying why it was skipped.

Every comparison is measured side by side in the same run, repeat by repeat
(interleaved, so a noisy neighbour slows both sides of a ratio alike), and
reported as a ratio with min / median / max over the repeats. A section whose
implementation is missing on this machine is reported as ``not available:
<reason>`` instead of failing the run.

``python -m fuzz.bench.run [--quick] [--out DIR]`` writes ``report.json``,
``report.md`` and PNG plots into ``DIR`` (default ``bench-out/``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any, Callable

from fuzz.machine import machine_info
from impl.errors import Unavailable

DEFAULT_OUT = "bench-out"
REPORT_VERSION = 1


# ---------------------------------------------------------------------------
# Budgets


@dataclass(frozen=True)
class Budget:
    """How much each section measures. ``quick`` fits in 2 minutes on 2 cores, ``full`` in 15."""

    name: str
    repeats: int
    windows: tuple[int, ...]
    #: seconds of stateful campaign per (target, W, repeat)
    stateful_s: float
    #: pushes per bulk stream (the C trace call)
    bulk_n: int
    bulk_width: int
    #: the stateful targets to measure besides ``ring-c`` and ``pyring`` (empty: every CPU target)
    extra_targets: tuple[str, ...] | None
    #: per-mutant time budget per strategy and repeat
    mutant_s: float
    mutant_max_examples: int
    #: mutants to run (``None``: the whole catalogue) and how many repeats of the kill table
    mutant_only: tuple[str, ...] | None
    mutant_repeats: int
    #: decoder benchmark: window, and decode steps timed per t
    decode_window: int
    decode_steps: int
    gpu_iters: int


BUDGETS = {
    # A few seconds: only for the test suite (hidden flag --smoke).
    "smoke": Budget("smoke", repeats=2, windows=(8, 64), stateful_s=0.25, bulk_n=2_000, bulk_width=16,
                    extra_targets=(), mutant_s=0.5, mutant_max_examples=200,
                    mutant_only=("ring-keeps-W+1", "ring-position-is-slot", "c-len-W+1"), mutant_repeats=2,
                    decode_window=8, decode_steps=2, gpu_iters=2),
    "quick": Budget("quick", repeats=3, windows=(8, 64, 512), stateful_s=0.7, bulk_n=20_000, bulk_width=16,
                    extra_targets=("decoder",), mutant_s=1.5, mutant_max_examples=2_000,
                    mutant_only=None, mutant_repeats=3,
                    decode_window=32, decode_steps=16, gpu_iters=10),
    "full": Budget("full", repeats=5, windows=(8, 16, 64, 512), stateful_s=2.0, bulk_n=200_000,
                   bulk_width=16, extra_targets=None, mutant_s=8.0, mutant_max_examples=20_000,
                   mutant_only=None, mutant_repeats=5,
                   decode_window=64, decode_steps=32, gpu_iters=50),
}


# ---------------------------------------------------------------------------
# Small helpers


def stats(values: list[float]) -> dict[str, Any]:
    """min / median / max (and the raw values) of the repeats of one measurement."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not vals:
        return {"n": 0, "min": None, "median": None, "max": None, "values": []}
    return {"n": len(vals), "min": min(vals), "median": statistics.median(vals), "max": max(vals),
            "values": vals}


def ratio(values: list[float], label: str, numerator: str, denominator: str, **extra) -> dict[str, Any]:
    """A side-by-side comparison: ``numerator / denominator`` per repeat, summarised."""
    out = {"label": label, "numerator": numerator, "denominator": denominator, **stats(values)}
    out.update(extra)
    return out


def _import(path: str) -> Any:
    """``module:attr`` -> object, or raise :class:`Unavailable` with the reason."""
    mod, _, attr = path.partition(":")
    try:
        module = importlib.import_module(mod)
    except Exception as e:  # noqa: BLE001 - any import failure just disables the section
        raise Unavailable(f"cannot import {mod} ({type(e).__name__}: {e})") from e
    obj = getattr(module, attr, None)
    if obj is None:
        raise Unavailable(f"{mod} has no {attr}")
    return obj


def _plain(x: Any) -> Any:
    """Make helper results JSON-serialisable (dataclasses, numpy scalars, tensors, tuples)."""
    if is_dataclass(x) and not isinstance(x, type):
        return _plain(asdict(x))
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if hasattr(x, "tolist"):
        return x.tolist()
    if hasattr(x, "item") and callable(x.item):
        try:
            return x.item()
        except Exception:  # noqa: BLE001
            return str(x)
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)


def _fmt(x: Any, unit: str = "") -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        a = abs(x)
        s = f"{x:.3g}" if a < 1000 else f"{x:,.0f}"
    else:
        s = f"{x:,}" if isinstance(x, int) else str(x)
    return f"{s}{unit}"


def _fmt_ratio(r: dict | None) -> str:
    if not r or r.get("median") is None:
        return "—"
    lb = "≥ " if r.get("lower_bound") else ""
    return f"{lb}{r['median']:.3g}× ({r['min']:.3g}–{r['max']:.3g}, n={r['n']})"


# ---------------------------------------------------------------------------
# Machine details


# ---------------------------------------------------------------------------
# Section 1: throughput


def measure_campaign(target, window: int, seconds: float, campaign_seed: int) -> dict[str, Any]:
    """The ordinary campaign (:func:`fuzz.campaign.fuzz_target`: boundary tours, then cases that
    start at window ``window``, resets at or below it) on ``target`` for ``seconds``."""
    from fuzz.campaign import fuzz_target
    from fuzz.config import CampaignConfig

    config = CampaignConfig(seconds=seconds, window_max=window, start_window=window, campaign_seed=campaign_seed,
                            save_seeds=False)
    r = fuzz_target(target, config)
    if r.failures:
        raise RuntimeError(f"{target.name} failed during the benchmark: {r.failures[0].error.splitlines()[0]}")
    return {"examples": r.examples, "tokens": r.tokens, "seconds": r.seconds,
            "examples_per_s": r.examples_per_s, "tokens_per_s": r.tokens_per_s}


#: The helpers each section measures with (imported lazily: a missing one disables only its section).
BULK_FN = "fuzz.targets.ring_bulk:measure_bulk"
MUTANTS_FN = "fuzz.killtable:run_mutants"
DECODE_FN = "fuzz.bench.decode:measure_decode"
GPU_FN = "fuzz.bench.gpu:measure_decode_attention"


def section_throughput(b: Budget, seed_dir: Path, log: Callable[[str], None]) -> dict[str, Any]:
    from fuzz.targets import registry

    wanted = ["ring-c", "pyring"]
    skipped: dict[str, str] = {}
    if b.extra_targets is None:  # every CPU target that runs here (builds them all: imports transformers)
        infos = registry.list_targets()
        wanted += [t.name for t in infos if t.available and t.cpu and t.name not in wanted]
        skipped.update({t.name: t.reason for t in infos if not t.available})
    else:
        wanted += [n for n in b.extra_targets if n not in wanted]
    targets = {}
    for name in wanted:
        if name in skipped:
            continue
        target, why = registry.probe(name)
        if target is None:
            skipped[name] = why
        else:
            targets[name] = target
    if not targets:
        raise Unavailable("no CPU target is available: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))

    try:
        bulk_path, bulk, bulk_reason = BULK_FN, _import(BULK_FN), None
    except Unavailable as e:
        bulk_path, bulk, bulk_reason = None, None, str(e)

    # Warm-up, not recorded: first Hypothesis call, library loading, torch kernels.
    for name, t in targets.items():
        measure_campaign(t, min(b.windows), min(0.3, b.stateful_s), campaign_seed=0)
    if bulk is not None:
        try:
            bulk(w=min(b.windows), n=min(1000, b.bulk_n), width=b.bulk_width)
        except Exception as e:  # noqa: BLE001
            bulk, bulk_reason = None, f"{bulk_path} raised {type(e).__name__}: {e}"

    # raw[(target, mode, W)] -> list of per-repeat dicts
    raw: dict[tuple[str, str, int], list[dict]] = {}
    cell_s = b.stateful_s
    for rep in range(b.repeats):
        for w in b.windows:
            for name, t in targets.items():
                mw = t.window_max
                if mw is not None and w > mw:
                    skipped.setdefault(f"{name}@W={w}", f"window above {name}'s maximum {mw}")
                    continue
                # slow model targets get a small share at big windows; the rate is what matters
                m = measure_campaign(t, w, cell_s, campaign_seed=rep * 1000 + w)
                if not m["examples"]:  # the budget ended before one example finished: no rate
                    m["tokens_per_s"] = m["examples_per_s"] = None
                raw.setdefault((name, "stateful", w), []).append(m)
            if bulk is not None:
                try:
                    r = _plain(bulk(w=w, n=b.bulk_n, width=b.bulk_width))  # deterministic: repeats vary only in time
                except Exception as e:  # noqa: BLE001
                    bulk, bulk_reason = None, f"{bulk_path} raised {type(e).__name__}: {e}"
                else:
                    raw.setdefault(("ring-c", "bulk", w), []).append(r)
        log(f"  throughput repeat {rep + 1}/{b.repeats} done")

    rows = []
    for (name, mode, w), reps in sorted(raw.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        rows.append({"target": name, "mode": mode, "window": w,
                     "tokens_per_s": stats([r.get("tokens_per_s") for r in reps]),
                     "examples_per_s": stats([r.get("examples_per_s") for r in reps if "examples_per_s" in r]),
                     "tokens": sum(int(r.get("tokens", r.get("n", 0)) or 0) for r in reps),
                     "repeats": reps})

    ratios = []
    for w in b.windows:
        def per_rep(a, b_):
            ra, rb = raw.get(a, []), raw.get(b_, [])
            return [x["tokens_per_s"] / y["tokens_per_s"] for x, y in zip(ra, rb)
                    if x.get("tokens_per_s") and y.get("tokens_per_s")]
        pairs = [(("ring-c", "bulk", w), ("ring-c", "stateful", w), "bulk / stateful, ring-c"),
                 (("ring-c", "stateful", w), ("pyring", "stateful", w), "ring-c / pyring, stateful")]
        for a, b_, label in pairs:
            vals = per_rep(a, b_)
            if vals:
                ratios.append(ratio(vals, f"{label}, W={w}", f"{a[0]} {a[1]} tokens/s", f"{b_[0]} {b_[1]} tokens/s",
                                    window=w))
    return {"status": "ok", "rows": rows, "ratios": ratios,
            "bulk": {"function": bulk_path, "n": b.bulk_n, "width": b.bulk_width,
                     "status": "ok" if bulk is not None else f"not available: {bulk_reason}"},
            "stateful": {"function": "fuzz.campaign:fuzz_target", "seconds_per_cell": cell_s,
                         "strategy": "fuzz.strategies.op_lists, start window W, resets <= W"},
            "skipped": skipped}


# ---------------------------------------------------------------------------
# Section 2: mutants


#: What a kill costs, three ways: test cases run, tokens pushed, wall seconds (until the first failure).
KILL_METRICS = ("examples", "tokens", "seconds")


def section_mutants(b: Budget, seed_dir: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """``run_mutants(baseline=True)``: per mutant, the boundary-biased campaign and then the uniform
    baseline under the same budget, side by side; repeated with a different campaign seed each time."""
    run_mutants = _import(MUTANTS_FN)
    per: dict[str, dict[str, Any]] = {}
    unavailable: dict[str, str] = {}
    # One call, ``repeats`` campaign seeds: per mutant and seed the biased run, then the baseline.
    from fuzz.config import CampaignConfig

    config = CampaignConfig(seconds=b.mutant_s, max_examples=b.mutant_max_examples, campaign_seed=0, save_seeds=False)
    res = run_mutants(config, mode="both", repeats=b.mutant_repeats,
                      only=list(b.mutant_only) if b.mutant_only else None)
    for k in res:
        if not k.available:
            unavailable[k.name] = k.reason
            continue
        per[k.name] = {"bug_class": k.bug_class, "kind": k.kind, "reference": k.reference,
                       "biased": list(k.biased_runs), "uniform": list(k.baseline_runs),
                       "shrunk": str(k.case) if k.killed and k.case is not None else None}
    log(f"  mutants: {len(per)} mutants x {b.mutant_repeats} seeds x 2 testers done")
    if not per:
        raise Unavailable("no mutant could be built here: " + "; ".join(f"{k}: {v}" for k, v in unavailable.items()))

    rows, ratios = [], []
    for name, e in per.items():
        row: dict[str, Any] = {"mutant": name, "bug_class": e["bug_class"], "kind": e["kind"],
                               "reference": e["reference"], "shrunk": e["shrunk"]}
        for mode in ("biased", "uniform"):
            ds = e[mode]
            killed = [d for d in ds if d["killed"]]
            row[mode] = {"killed": f"{len(killed)}/{len(ds)}",
                         **{m: stats([d[m] for d in killed]) for m in KILL_METRICS},
                         "repeats": ds}
        # Per repeat: uniform cost / biased cost (> 1: the boundary bias kills with less).
        # A baseline that survived counts at what it spent, so the ratio is a lower bound;
        # a repeat where the biased side survived has no ratio.
        for metric in KILL_METRICS:
            vals, lower = [], False
            for db_, du in zip(e["biased"], e["uniform"]):
                if not db_["killed"] or not db_.get(metric):
                    continue
                num = du.get(metric)
                if not du["killed"]:  # survived: what it spent is a lower bound on its cost to kill
                    num = du.get(f"{metric}_run", du.get(metric) if metric == "seconds" else None)
                    lower = True
                if num:
                    vals.append(float(num) / float(db_[metric]))
            if vals:
                r = ratio(vals, f"{name}: uniform / biased {metric} to kill", f"uniform {metric}",
                          f"biased {metric}", mutant=name, metric=metric, lower_bound=lower)
                ratios.append(r)
                row[f"ratio_{metric}"] = r
        rows.append(row)
    overall = {}
    for metric in KILL_METRICS:
        meds = [r[f"ratio_{metric}"]["median"] for r in rows if r.get(f"ratio_{metric}")]
        if meds:
            g = math.exp(sum(math.log(x) for x in meds) / len(meds))
            overall[metric] = {"geometric_mean_of_medians": g, "mutants": len(meds)}
    return {"status": "ok", "function": MUTANTS_FN, "budget_per_mutant_s": b.mutant_s,
            "max_examples": b.mutant_max_examples, "rows": rows, "ratios": ratios, "overall": overall,
            "unavailable": unavailable,
            "killed_by_biased": sum(all(d["killed"] for d in r["biased"]["repeats"]) for r in rows),
            "killed_by_uniform": sum(all(d["killed"] for d in r["uniform"]["repeats"]) for r in rows),
            "mutants": len(rows)}


# ---------------------------------------------------------------------------
# Section 3: decode curves


def section_decode(b: Budget, log: Callable[[str], None]) -> dict[str, Any]:
    measure = _import(DECODE_FN)
    w = b.decode_window
    ts = [max(1, w // 2), w, 4 * w, 16 * w]  # W/2: the cache is still filling
    reps, reps_c, c_status = [], [], "ok"
    for rep in range(b.repeats):
        r = _plain(measure(window=w, ts=ts, steps=b.decode_steps, seed=rep, repeats=3, backend="torch"))
        reps.append(r)
        if c_status == "ok":  # the same decode with the cache stored in the C ring (impl.ring.CRing)
            try:
                reps_c.append(_plain(measure(window=w, ts=ts, steps=b.decode_steps, seed=rep, repeats=3,
                                             backend="c", full=False)))
            except Exception as e:  # noqa: BLE001
                c_status, reps_c = f"not available: {type(e).__name__}: {e}", []
        log(f"  decode repeat {rep + 1}/{b.repeats} done")
    return {"status": "ok", "function": DECODE_FN, "window": w, "ts": ts, "repeats": reps, "repeats_c_backend": reps_c,
            "c_backend": c_status,
            "config": reps[0].get("config") if reps else None, "steps": b.decode_steps,
            **_summarise_decode(reps, w, ts, reps_c)}


def _summarise_decode(reps: list[dict], w: int, ts: list[int], reps_c: list[dict] | None = None) -> dict[str, Any]:
    """Per-t ring / full times and KV bytes from :func:`fuzz.bench.decode.measure_decode`'s ``points``."""
    curve: dict[int, dict[str, list]] = {}
    for r in reps:
        for p in r["points"]:
            t = p["t"]
            c = curve.setdefault(t, {"ring": [], "full": [], "kv": [], "formula": [], "ring_c": []})
            c["ring"].append(p["ring_s"])
            c["full"].append(p["full_s"])
            c["kv"].append(p["kv_bytes"])
            # the helper's formula is for a full window; before t reaches W the cache holds t slots
            c["formula"].append(p["kv_formula_bytes"] * min(t, w) / w)
    for r in reps_c or []:
        for p in r["points"]:
            if p["t"] in curve:
                curve[p["t"]]["ring_c"].append(p["ring_s"])
    rows, ratios = [], []
    for t in sorted(curve):
        c = curve[t]
        rows.append({"t": t, "ring_s": stats(c["ring"]), "full_s": stats(c["full"]), "ring_c_s": stats(c["ring_c"]),
                     "kv_bytes": stats(c["kv"]), "formula_bytes": stats(c["formula"])})
        vals = [f / r for f, r in zip(c["full"], c["ring"]) if f and r]
        if vals:
            ratios.append(ratio(vals, f"full recompute / ring cache per-token time, t={t}", "full", "ring", t=t))
    for t in sorted(curve):
        c = curve[t]
        vals = [x / y for x, y in zip(c["ring_c"], c["ring"]) if x and y]
        if vals:
            ratios.append(ratio(vals, f"ring cache in the C ring / in torch tensors, per-token time, t={t}",
                                "C-ring storage", "torch storage", t=t))
    tmin, tmax = (w if w in curve else min(curve), max(curve)) if curve else (None, None)
    if tmin is not None and tmax != tmin:
        a, z = curve[tmin]["ring"], curve[tmax]["ring"]
        vals = [y / x for x, y in zip(a, z) if x and y]
        if vals:
            ratios.append(ratio(vals, f"ring per-token time, t={tmax} / t={tmin}", f"ring t={tmax}",
                                f"ring t={tmin}", goal="<= 1.3"))
        a, z = curve[tmin]["full"], curve[tmax]["full"]
        vals = [y / x for x, y in zip(a, z) if x and y]
        if vals:
            ratios.append(ratio(vals, f"full per-token time, t={tmax} / t={tmin}", f"full t={tmax}",
                                f"full t={tmin}"))
    for t in sorted(curve):
        c = curve[t]
        vals = [k / f for k, f in zip(c["kv"], c["formula"]) if k and f]
        if vals:
            ratios.append(ratio(vals, f"KV bytes held / formula, t={t}", "measured", "formula", t=t, goal="== 1"))
    return {"rows": rows, "ratios": ratios}


# ---------------------------------------------------------------------------
# Section 4: GPU


def section_gpu(b: Budget, log: Callable[[str], None]) -> dict[str, Any]:
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        raise Unavailable(f"torch does not import ({e})") from e
    if not torch.cuda.is_available():
        why = "no CUDA device" if torch.version.cuda else f"torch {torch.__version__} is a CPU-only build"
        raise Unavailable(f"skipped: {why} on this machine (torch.cuda.is_available() is False)")
    measure = _import(GPU_FN)
    reps = []
    for rep in range(b.repeats):
        reps.append(_plain(measure(iters=b.gpu_iters, seed=rep)))
        log(f"  gpu repeat {rep + 1}/{b.repeats} done")
    ratios = []
    keys = set().union(*(r.keys() for r in reps)) if reps else set()
    for k in sorted(keys):
        if any(s in k for s in ("speedup", "fraction", "ratio")):
            vals = [r[k] for r in reps if isinstance(r.get(k), (int, float))]
            if vals:
                ratios.append(ratio(vals, k, k, "", key=k))
    return {"status": "ok", "function": GPU_FN, "device": torch.cuda.get_device_name(0), "repeats": reps,
            "summary": {k: stats([r.get(k) for r in reps if isinstance(r.get(k), (int, float))])
                        for k in sorted(keys) if any(isinstance(r.get(k), (int, float)) for r in reps)},
            "ratios": ratios}


# ---------------------------------------------------------------------------
# Plots


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _log_axis(ax, axis: str = "x") -> None:
    """Log scale with plain major tick labels and no minor labels (they overlap on short ranges)."""
    from matplotlib.ticker import LogLocator, NullFormatter

    getattr(ax, f"set_{axis}scale")("log")
    a = ax.xaxis if axis == "x" else ax.yaxis
    a.set_major_locator(LogLocator(base=10, numticks=12))
    a.set_minor_formatter(NullFormatter())


def _errbars(s_list: list[dict]) -> tuple[list, list]:
    med = [s["median"] for s in s_list]
    lo = [s["median"] - s["min"] for s in s_list]
    hi = [s["max"] - s["median"] for s in s_list]
    return med, [lo, hi]


def plot_throughput(sec: dict, path: Path, machine: str) -> None:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.4))
    series: dict[tuple[str, str], list[dict]] = {}
    for r in sec["rows"]:
        series.setdefault((r["target"], r["mode"]), []).append(r)
    colors = plt.get_cmap("tab10").colors
    for i, ((name, mode), rows) in enumerate(sorted(series.items())):
        rows.sort(key=lambda r: r["window"])
        ws = [r["window"] for r in rows]
        style = "-o" if mode == "stateful" else "--s"
        color = colors[i % len(colors)]
        for ax, key in zip(axes, ("tokens_per_s", "examples_per_s")):
            ok = [(w, r[key]) for w, r in zip(ws, rows) if r[key]["median"]]
            if not ok:
                continue
            med, err = _errbars([s for _, s in ok])
            ax.errorbar([w for w, _ in ok], med, yerr=err, fmt=style, capsize=3, color=color,
                        label=f"{name} ({mode})")
    for ax, title, unit in ((axes[0], "Spec-checked tokens per second", "tokens / s"),
                            (axes[1], "Examples (test cases) per second", "examples / s")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("window W (tokens)")
        ax.set_ylabel(unit + " (median, bars: min–max)")
        ax.set_title(title)
        ax.grid(True, which="major", alpha=0.4)
    h, lab = axes[0].get_legend_handles_labels()
    if h:
        fig.legend(h, lab, fontsize=8, loc="center left", bbox_to_anchor=(0.82, 0.5), title="target (mode)",
                   title_fontsize=8)
    fig.suptitle(f"Harness throughput by target and mode — {machine} (bulk mode has no examples: one stream "
                 f"per call)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.82, 1))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_mutants(sec: dict, path: Path, budget: Budget) -> None:
    plt = _plt()
    rows = sec["rows"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 0.32 * max(6, len(rows)) + 1.8), sharey=True)
    names = [r["mutant"] for r in rows]
    y = list(range(len(rows)))
    panels = (("examples", "test cases until the first kill", "Examples to kill", 1.0),
              ("tokens", "tokens pushed until the first kill (0 drawn at 0.5)", "Tokens to kill", 0.5),
              ("seconds", "seconds until the first kill", "Seconds to kill", 1e-3))
    for ax, (metric, unit, title, floor) in zip(axes, panels):
        for off, mode, color, label in ((-0.2, "biased", "tab:blue", "boundary-biased (harness)"),
                                        (0.2, "uniform", "tab:orange", "uniform-random baseline")):
            med, lo, hi, surv = [], [], [], []
            for r in rows:
                s = r[mode][metric]
                if s["median"] is None:  # survived every repeat: draw nothing, mark it
                    med.append(float("nan"))
                    lo.append(0)
                    hi.append(0)
                    surv.append(True)
                else:
                    m = max(s["median"], floor)
                    med.append(m)
                    lo.append(max(0.0, m - max(s["min"], floor)))
                    hi.append(max(0.0, s["max"] - m))
                    surv.append(False)
            ax.barh([v + off for v in y], med, height=0.38, color=color, label=label,
                    xerr=[lo, hi], error_kw={"elinewidth": 0.8, "capsize": 2})
            for v, sv in zip(y, surv):
                if sv:
                    ax.text(0.99, v + off, "survived", transform=ax.get_yaxis_transform(), ha="right",
                            va="center", fontsize=6, color=color)
        ax.set_yticks(y)
        ax.set_yticklabels(names, fontsize=7)
        _log_axis(ax, "x")
        ax.set_xlabel(f"{unit}\n(median over repeats, bars: min–max; log scale)", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_xlim(left=floor * 0.7)
        ax.grid(True, axis="x", which="major", alpha=0.4)
    axes[0].invert_yaxis()
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Cost to kill each mutant: boundary-biased strategies vs uniform-random baseline "
                 f"(budget {budget.mutant_s:g} s per mutant and side, {budget.mutant_repeats} repeats)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=85)
    plt.close(fig)


def plot_decode(sec: dict, path: Path) -> None:
    plt = _plt()
    rows = sec["rows"]
    ts = [r["t"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    ax = axes[0]
    for key, label, style in (("ring_s", "ring-buffer cache, torch storage", "-o"),
                              ("ring_c_s", "ring-buffer cache, C ring storage", "-^"),
                              ("full_s", "full recompute (no cache)", "--s")):
        ok = [(t, r[key]) for t, r in zip(ts, rows) if r.get(key, {}).get("median")]
        if ok:
            med, err = _errbars([{k: (v * 1e3 if isinstance(v, float) else v) for k, v in s.items()}
                                 for _, s in ok])
            ax.errorbar([t for t, _ in ok], med, yerr=err, fmt=style, capsize=3, label=label)
    ax.axvline(sec["window"], color="grey", lw=0.8, ls=":", label=f"t = W = {sec['window']}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens already decoded t")
    ax.set_ylabel("ms per decoded token (median; bars: min–max)")
    ax.set_title("Per-token decode time vs t")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax = axes[1]
    kv = [(t, r["kv_bytes"]["median"]) for t, r in zip(ts, rows) if r["kv_bytes"]["median"]]
    fm = [(t, r["formula_bytes"]["median"]) for t, r in zip(ts, rows) if r["formula_bytes"]["median"]]
    if fm:
        ax.plot([t for t, _ in fm], [v / 1024 for _, v in fm], "-", color="0.6", lw=5, alpha=0.6,
                label="formula 2·layers·kv_heads·head_dim·min(t, W)·bytes")
    if kv:
        ax.plot([t for t, _ in kv], [v / 1024 for _, v in kv], "o--", color="tab:blue", ms=7,
                label="KV bytes held by the ring cache (measured)")
    ax.axvline(sec["window"], color="grey", lw=0.8, ls=":", label=f"t = W = {sec['window']}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens already decoded t")
    ax.set_ylabel("KV cache size (KiB)")
    top = max([v for _, v in kv + fm] or [1024]) / 1024
    ax.set_ylim(0, top * 1.3)
    ax.set_title("KV memory held vs t")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    c = sec.get("config") or {}
    desc = (f" (W={sec['window']}, {c.get('layers')} layers, {c.get('n_heads')}/{c.get('n_kv_heads')} q/kv heads, "
            f"head_dim {c.get('head_dim')}, {c.get('dtype')}, CPU)") if c else ""
    fig.suptitle("Torch windowed-attention decoder: ring-buffer cache vs full recompute" + desc, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# ---------------------------------------------------------------------------
# Markdown report


def _na(sec: dict) -> str | None:
    return None if sec.get("status") == "ok" else sec.get("status", "not available")


def render_markdown(rep: dict) -> str:
    m = rep["machine"]
    v = m["versions"]
    L = [f"# kvwindow bench — {rep['budget']['name']} run", "",
         f"Command: `{rep['command']}` — wall time {rep['wall_s']:.1f} s, {m['date_utc']}, commit {m['git_commit']}.",
         "",
         f"Machine: {m['cpu']}, {m['usable_cores']} usable cores ({m['logical_cores']} logical), "
         f"load average at start {', '.join(f'{x:.1f}' for x in (m['load_average_at_start'] or []))}; "
         f"{m['platform']}; GPU: {m['gpu'] or 'none'}.",
         "", "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val) + ".", "",
         "Every ratio is computed per repeat from two measurements taken side by side, then summarised "
         "as median (min–max, n = repeats).", ""]

    s = rep["sections"]["throughput"]
    L += ["## 1. Throughput: spec-checked tokens/s and examples/s", ""]
    if _na(s):
        L += [f"{_na(s)}", ""]
    else:
        L += ["Stateful: a Hypothesis campaign (`fuzz.campaign.fuzz_target`) starting at window W, contents "
              "checked against pyspec after every op. Bulk: one C trace call per stream, checked against "
              "`pyspec.bulk`. " + (f"Bulk: {s['bulk']['status']}." if s['bulk']['status'] != 'ok' else ""), "",
              "| target | mode | W | tokens/s (median) | min–max | examples/s (median) | tokens measured |",
              "|---|---|---:|---:|---:|---:|---:|"]
        for r in s["rows"]:
            st_ = r["tokens_per_s"]
            L.append(f"| {r['target']} | {r['mode']} | {r['window']} | {_fmt(st_['median'])} | "
                     f"{_fmt(st_['min'])}–{_fmt(st_['max'])} | {_fmt(r['examples_per_s']['median'])} | "
                     f"{_fmt(r['tokens'])} |")
        L += ["", "| comparison | ratio |", "|---|---:|"]
        L += [f"| {r['label']} | {_fmt_ratio(r)} |" for r in s["ratios"]]
        if s.get("skipped"):
            L += ["", "Not measured: " + "; ".join(f"{k} ({v})" for k, v in s["skipped"].items()) + "."]
        L += ["", "![throughput](throughput.png)", ""]

    s = rep["sections"]["mutants"]
    L += ["## 2. Mutants: cost to kill, boundary-biased vs uniform baseline", ""]
    if _na(s):
        L += [f"{_na(s)}", ""]
    else:
        ov = s.get("overall", {})
        L += [f"`{s['function']}(baseline=True)`: per mutant, a boundary-biased campaign and then the "
              f"uniform-random baseline, each with {s['budget_per_mutant_s']:g} s (at most {s['max_examples']} "
              f"examples), no example database; repeated with a new campaign seed. Killed by the biased "
              f"strategies in every repeat: {s['killed_by_biased']}/{s['mutants']}; by the baseline: "
              f"{s['killed_by_uniform']}/{s['mutants']}.", "",
              "Cost = examples (test cases), tokens pushed, and seconds until the first failing example "
              "(before shrinking). Ratio = uniform / biased: above 1 the boundary bias kills with less, "
              "below 1 the baseline does; '≥' marks a lower bound where the baseline survived and is "
              "counted at what it spent.", ""]
        if ov:
            L += ["Geometric mean over mutants of the median ratio: " + "; ".join(
                f"{m} {v['geometric_mean_of_medians']:.3g}× ({v['mutants']} mutants)" for m, v in ov.items()) + ".", ""]
        L += ["| mutant | class | killed b / u | examples b / u | tokens b / u | seconds b / u | "
              "examples ratio | tokens ratio | seconds ratio |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in s["rows"]:
            bi, un = r["biased"], r["uniform"]
            pair = lambda m: f"{_fmt(bi[m]['median'])} / {_fmt(un[m]['median'])}"  # noqa: E731
            L.append(f"| {r['mutant']} | {r['bug_class'] or ''} | {bi['killed']} / {un['killed']} | "
                     f"{pair('examples')} | {pair('tokens')} | {pair('seconds')} | "
                     f"{_fmt_ratio(r.get('ratio_examples'))} | {_fmt_ratio(r.get('ratio_tokens'))} | "
                     f"{_fmt_ratio(r.get('ratio_seconds'))} |")
        if s.get("unavailable"):
            L += ["", "Not built here: " + "; ".join(f"{k} ({v})" for k, v in s["unavailable"].items()) + "."]
        L += ["", "![mutants](mutants.png)", ""]

    s = rep["sections"]["decode"]
    L += ["## 3. Decode: per-token time vs t, KV bytes vs formula", ""]
    if _na(s):
        L += [f"{_na(s)}", ""]
    else:
        c = s.get("config") or {}
        L += [f"Window W = {s['window']}; t = W/2, W, 4W, 16W; `{s['function']}` with {s['steps']} timed "
              f"single-token decodes per t and repeat (ring), one full forward over t + 1 tokens (full "
              f"recompute). Model: {c.get('layers')} layers, d_model {c.get('d_model')}, "
              f"{c.get('n_heads')} query / {c.get('n_kv_heads')} KV heads, head_dim {c.get('head_dim')}, "
              f"{c.get('dtype')}, CPU. Formula: 2·layers·kv_heads·head_dim·min(t, W)·bytes."
              + ("" if s.get("c_backend", "ok") == "ok" else f" C-ring storage: {s['c_backend']}."), "",
              "| t | ring ms/token (torch) | ring ms/token (C ring) | full recompute ms/token | KV bytes held | formula bytes |",
              "|---:|---:|---:|---:|---:|---:|"]
        for r in s["rows"]:
            ms = lambda x: None if x is None else x * 1e3  # noqa: E731
            L.append(f"| {r['t']} | {_fmt(ms(r['ring_s']['median']))} | {_fmt(ms(r['ring_c_s']['median']))} | "
                     f"{_fmt(ms(r['full_s']['median']))} | "
                     f"{_fmt(r['kv_bytes']['median'])} | {_fmt(r['formula_bytes']['median'])} |")
        L += ["", "| comparison | ratio |", "|---|---:|"]
        L += [f"| {r['label']} | {_fmt_ratio(r)} |" for r in s["ratios"]]
        L += ["", "![decode](decode.png)", ""]

    s = rep["sections"]["gpu"]
    L += ["## 4. GPU", ""]
    if _na(s):
        L += [f"{_na(s)}", ""]
    else:
        L += [f"Device: {s['device']}; helper `{s['function']}`.", "", "| metric | median | min–max |",
              "|---|---:|---:|"]
        for k, st_ in s["summary"].items():
            L.append(f"| {k} | {_fmt(st_['median'])} | {_fmt(st_['min'])}–{_fmt(st_['max'])} |")
        L.append("")
    if rep.get("errors"):
        L += ["## Errors", ""] + [f"- {e}" for e in rep["errors"]] + [""]
    return "\n".join(L)


# ---------------------------------------------------------------------------
# Driver


def run_bench(budget: Budget, out: Path, *, command: str, log: Callable[[str], None] = print) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    rep: dict[str, Any] = {"version": REPORT_VERSION, "command": command, "budget": asdict(budget),
                           "machine": machine_info(), "sections": {}, "plots": {}, "errors": []}
    seed_dir = Path(tempfile.mkdtemp(prefix="kvwindow-bench-seeds-"))
    sections = (("throughput", lambda: section_throughput(budget, seed_dir, log)),
                ("mutants", lambda: section_mutants(budget, seed_dir, log)),
                ("decode", lambda: section_decode(budget, log)),
                ("gpu", lambda: section_gpu(budget, log)))
    for name, fn in sections:
        log(f"[{time.monotonic() - t0:6.1f}s] {name} ...")
        t1 = time.monotonic()
        try:
            sec = fn()
        except Unavailable as e:
            msg = str(e)
            sec = {"status": msg if msg.startswith("skipped") else f"not available: {msg}"}
        except Exception as e:  # noqa: BLE001 - one broken section must not lose the others
            sec = {"status": f"not available: {type(e).__name__}: {e}"}
            rep["errors"].append(f"{name}: {type(e).__name__}: {e}")
            log(traceback.format_exc())
        sec["seconds"] = time.monotonic() - t1
        rep["sections"][name] = sec
        if sec.get("status") != "ok":
            log(f"  {name}: {sec['status']}")

    plots = (("throughput", "throughput.png", lambda s, p: plot_throughput(s, p, rep["machine"]["cpu"])),
             ("mutants", "mutants.png", lambda s, p: plot_mutants(s, p, budget)),
             ("decode", "decode.png", plot_decode))
    for name, fname, fn in plots:
        sec = rep["sections"][name]
        if sec.get("status") != "ok" or not sec.get("rows"):
            continue
        try:
            fn(sec, out / fname)
            rep["plots"][name] = fname
        except Exception as e:  # noqa: BLE001
            rep["errors"].append(f"plot {name}: {type(e).__name__}: {e}")
            log(traceback.format_exc())
    rep["wall_s"] = time.monotonic() - t0
    rep = _plain(rep)
    (out / "report.json").write_text(json.dumps(rep, indent=1) + "\n")
    (out / "report.md").write_text(render_markdown(rep) + "\n")
    return rep


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kvwindow bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a short run (under 2 minutes on 2 cores)")
    p.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)  # test suite only: seconds
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT}/)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    budget = BUDGETS["smoke" if args.smoke else "quick" if args.quick else "full"]
    log = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    command = "kvwindow bench " + " ".join(argv) if argv else "kvwindow bench"
    out = Path(args.out)
    rep = run_bench(budget, out, command=command.strip(), log=log)
    print(f"kvwindow bench: {budget.name} run in {rep['wall_s']:.1f} s -> {out / 'report.md'}, "
          f"{out / 'report.json'}" + "".join(f", {out / p}" for p in rep["plots"].values()))
    for name, sec in rep["sections"].items():
        if sec.get("status") != "ok":
            print(f"  {name}: {sec['status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
