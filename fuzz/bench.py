"""``kvwindow bench`` — measured throughput, time-to-kill and decode curves, with plots.

One command measures what a harness costs and what it finds, and draws it:

1. **throughput** — spec-checked steps/s and examples/s per target, in stateful
   mode (a Hypothesis campaign through :func:`fuzz.campaign.fuzz_target`, one
   start window ``W`` per cell) and in bulk mode (the C ring's trace call,
   :func:`fuzz.bulk.measure_bulk`), over ``W``;
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

``python -m fuzz.bench [--quick] [--out DIR]`` writes ``report.json``,
``report.md`` and PNG plots into ``DIR`` (default ``bench-out/``).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any, Callable

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
    #: decoder benchmark: window, and decode steps timed per t
    decode_window: int
    decode_steps: int
    gpu_iters: int


BUDGETS = {
    # A few seconds: only for the test suite (hidden flag --smoke).
    "smoke": Budget("smoke", repeats=2, windows=(8, 64), stateful_s=0.25, bulk_n=2_000, bulk_width=16,
                    extra_targets=(), mutant_s=0.5, mutant_max_examples=200,
                    decode_window=8, decode_steps=2, gpu_iters=2),
    "quick": Budget("quick", repeats=3, windows=(8, 64, 512), stateful_s=1.0, bulk_n=20_000, bulk_width=16,
                    extra_targets=("decoder",), mutant_s=1.5, mutant_max_examples=2_000,
                    decode_window=32, decode_steps=4, gpu_iters=10),
    "full": Budget("full", repeats=5, windows=(8, 32, 64, 128, 512), stateful_s=4.0, bulk_n=200_000,
                   bulk_width=16, extra_targets=None, mutant_s=8.0, mutant_max_examples=20_000,
                   decode_window=64, decode_steps=16, gpu_iters=50),
}


# ---------------------------------------------------------------------------
# Small helpers


class Unavailable(Exception):
    """A section or measurement cannot run here; the message says why."""


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


def _first(paths: list[str]) -> tuple[str, Any]:
    reasons = []
    for p in paths:
        try:
            return p, _import(p)
        except Unavailable as e:
            reasons.append(str(e))
    raise Unavailable("; ".join(reasons))


def _call(fn: Callable, **kwargs) -> Any:
    """Call ``fn`` with the keyword arguments it accepts (the helpers' signatures vary a little)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn(**kwargs)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return fn(**kwargs)
    return fn(**{k: v for k, v in kwargs.items() if k in params})


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


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    versions: dict[str, str | None] = {"python": platform.python_version()}
    from importlib import metadata

    for pkg in ("kvwindow", "torch", "numpy", "hypothesis", "transformers", "matplotlib", "cffi"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    gpu = None
    try:
        import torch

        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001
        pass
    commit = None
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parent.parent, timeout=5).stdout.strip() or None
    except Exception:  # noqa: BLE001
        pass
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {"cpu": cpu, "logical_cores": os.cpu_count(), "usable_cores": usable,
            "platform": platform.platform(), "versions": versions, "gpu": gpu, "git_commit": commit,
            "load_average_at_start": load,
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


# ---------------------------------------------------------------------------
# Section 1: throughput


def _fixed_window_cases(window: int, max_tokens: int | None):
    """Boundary-biased cases that start at window ``W`` (resets stay at or below ``W``)."""
    from hypothesis import strategies as st

    from fuzz.strategies import op_lists

    return st.tuples(st.just(window), op_lists(window, window_max=window, max_tokens=max_tokens))


def measure_stateful(target, window: int, seconds: float, seed: int, seed_dir: Path) -> dict[str, Any]:
    """A stateful campaign on ``target`` at start window ``window`` for about ``seconds``.

    :func:`fuzz.campaign.fuzz_target` checks its clock between batches of
    examples, so it is called with a small ``max_examples`` that grows as the
    measured time per example allows, until the budget is spent.
    """
    from fuzz.campaign import fuzz_target

    strat = _fixed_window_cases(window, getattr(target, "max_tokens", None))
    examples = steps = 0
    spent = 0.0
    chunk = 2
    calls = 0
    while spent < seconds:
        r = fuzz_target(target, seconds=seconds - spent, max_examples=chunk, window_max=window,
                        seed=seed * 7919 + calls, database=None, seed_dir=seed_dir, strategy=strat)
        calls += 1
        examples += r.examples
        steps += r.steps
        spent += r.seconds
        if r.failure:
            raise RuntimeError(f"{target.name} failed during the benchmark: {r.failure.splitlines()[0]}")
        per = r.seconds / max(1, r.examples)
        chunk = max(1, min(100, int((seconds - spent) / max(per, 1e-6) * 0.8)))
    return {"examples": examples, "steps": steps, "seconds": spent,
            "examples_per_s": examples / spent if spent else 0.0,
            "steps_per_s": steps / spent if spent else 0.0}


def _bulk_fn() -> tuple[str, Callable]:
    return _first(["fuzz.bulk:measure_bulk", "fuzz.ring_targets:measure_bulk", "impl.ring:measure_bulk"])


def section_throughput(b: Budget, seed_dir: Path, log: Callable[[str], None]) -> dict[str, Any]:
    from fuzz import registry

    infos = registry.list_targets()
    avail = {t.name: t for t in infos if t.available and t.cpu}
    wanted = ["ring-c", "pyring"]
    if b.extra_targets is None:
        wanted += [n for n in avail if n not in wanted]
    else:
        wanted += [n for n in b.extra_targets if n not in wanted]
    skipped = {t.name: t.reason for t in infos if not t.available}
    targets = {}
    for name in wanted:
        if name not in avail:
            skipped.setdefault(name, "not a CPU target here")
            continue
        targets[name] = registry.resolve(name)
    if not targets:
        raise Unavailable("no CPU target is available")

    try:
        bulk_path, bulk = _bulk_fn()
        bulk_reason = None
    except Unavailable as e:
        bulk_path, bulk, bulk_reason = None, None, str(e)

    # raw[(target, mode, W)] -> list of per-repeat dicts
    raw: dict[tuple[str, str, int], list[dict]] = {}
    cell_s = b.stateful_s
    for rep in range(b.repeats):
        for w in b.windows:
            for name, t in targets.items():
                mw = getattr(t, "max_window", None)
                if mw is not None and w > mw:
                    skipped.setdefault(f"{name}@W={w}", f"window above {name}'s maximum {mw}")
                    continue
                # slow model targets get a small share at big windows; the rate is what matters
                m = measure_stateful(t, w, cell_s, seed=rep * 1000 + w, seed_dir=seed_dir)
                raw.setdefault((name, "stateful", w), []).append(m)
            if bulk is not None:
                try:
                    r = _plain(_call(bulk, w=w, n=b.bulk_n, width=b.bulk_width, seed=rep))
                except Exception as e:  # noqa: BLE001
                    bulk, bulk_reason = None, f"{bulk_path} raised {type(e).__name__}: {e}"
                else:
                    raw.setdefault(("ring-c", "bulk", w), []).append(r)
        log(f"  throughput repeat {rep + 1}/{b.repeats} done")

    rows = []
    for (name, mode, w), reps in sorted(raw.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        rows.append({"target": name, "mode": mode, "window": w,
                     "steps_per_s": stats([r.get("steps_per_s") for r in reps]),
                     "examples_per_s": stats([r.get("examples_per_s") for r in reps if "examples_per_s" in r]),
                     "steps": sum(int(r.get("steps", r.get("n", 0)) or 0) for r in reps),
                     "repeats": reps})

    ratios = []
    for w in b.windows:
        def per_rep(a, b_):
            ra, rb = raw.get(a, []), raw.get(b_, [])
            return [x["steps_per_s"] / y["steps_per_s"] for x, y in zip(ra, rb)
                    if x.get("steps_per_s") and y.get("steps_per_s")]
        pairs = [(("ring-c", "bulk", w), ("ring-c", "stateful", w), "bulk / stateful, ring-c"),
                 (("ring-c", "stateful", w), ("pyring", "stateful", w), "ring-c / pyring, stateful")]
        for a, b_, label in pairs:
            vals = per_rep(a, b_)
            if vals:
                ratios.append(ratio(vals, f"{label}, W={w}", f"{a[0]} {a[1]} steps/s", f"{b_[0]} {b_[1]} steps/s",
                                    window=w))
    return {"status": "ok", "rows": rows, "ratios": ratios,
            "bulk": {"function": bulk_path, "n": b.bulk_n, "width": b.bulk_width,
                     "status": "ok" if bulk is not None else f"not available: {bulk_reason}"},
            "stateful": {"function": "fuzz.campaign:fuzz_target", "seconds_per_cell": cell_s,
                         "strategy": "fuzz.strategies.op_lists, start window W, resets <= W"},
            "skipped": skipped}


# ---------------------------------------------------------------------------
# Section 2: mutants


def _mutants_fn() -> tuple[str, Callable]:
    return _first(["impl.mutants:run_mutants", "fuzz.mutants:run_mutants", "fuzz.campaign:run_mutants",
                   "impl.mutants.campaign:run_mutants", "fuzz.mutant_campaign:run_mutants"])


def _kill_dict(k: Any) -> dict[str, Any]:
    d = _plain(k) if not isinstance(k, dict) else _plain(dict(k))
    if not isinstance(d, dict):
        d = {"value": d}
    # normalise the few field names the campaign helper might use
    alias = {"name": ("name", "mutant", "id"), "bug_class": ("bug_class", "cls", "klass", "category"),
             "killed": ("killed",), "examples": ("examples", "examples_to_kill", "n_examples"),
             "seconds": ("seconds", "seconds_to_kill", "time", "elapsed")}
    out = dict(d)
    for key, names in alias.items():
        for n in names:
            if n in d:
                out[key] = d[n]
                break
        else:
            if not isinstance(k, dict):
                for n in names:
                    v = getattr(k, n, None)
                    if v is not None and not callable(v):
                        out[key] = _plain(v)
                        break
    return out


def section_mutants(b: Budget, seed_dir: Path, log: Callable[[str], None]) -> dict[str, Any]:
    path, run_mutants = _mutants_fn()
    # per mutant name: {"biased": [kill dicts], "uniform": [kill dicts]}
    per: dict[str, dict[str, list[dict]]] = {}
    for rep in range(b.repeats):
        for mode, baseline in (("biased", False), ("uniform", True)):
            res = _call(run_mutants, baseline=baseline, time_per=b.mutant_s, seconds=b.mutant_s,
                        time_per_mutant=b.mutant_s, max_examples=b.mutant_max_examples, seed=rep,
                        seed_dir=seed_dir, database=None)
            for k in res:
                d = _kill_dict(k)
                per.setdefault(str(d.get("name")), {"biased": [], "uniform": []})[mode].append(d)
        log(f"  mutants repeat {rep + 1}/{b.repeats} done")

    rows, ratios = [], []
    for name, modes in per.items():
        row: dict[str, Any] = {"mutant": name,
                               "bug_class": next((d.get("bug_class") for d in modes["biased"] + modes["uniform"]
                                                  if d.get("bug_class")), None)}
        for mode in ("biased", "uniform"):
            ds = modes[mode]
            killed = [d for d in ds if d.get("killed")]
            row[mode] = {"killed": f"{len(killed)}/{len(ds)}",
                         "examples": stats([d.get("examples") for d in killed]),
                         "seconds": stats([d.get("seconds") for d in killed]),
                         "repeats": ds}
        # ratio per repeat: uniform cost / biased cost. A survivor on the uniform side counts at
        # its full budget, which makes the ratio a lower bound; a biased survivor makes it undefined.
        for metric in ("examples", "seconds"):
            vals, lower = [], False
            for db_, du in zip(modes["biased"], modes["uniform"]):
                if not db_.get("killed") or not db_.get(metric):
                    continue
                num = du.get(metric)
                if not du.get("killed"):
                    lower = True
                    num = num or (b.mutant_max_examples if metric == "examples" else b.mutant_s)
                if num:
                    vals.append(float(num) / float(db_[metric]))
            if vals:
                r = ratio(vals, f"{name}: uniform / biased {metric}-to-kill", f"uniform {metric}",
                          f"biased {metric}", mutant=name, metric=metric, lower_bound=lower)
                ratios.append(r)
                row[f"ratio_{metric}"] = r
        rows.append(row)
    killed_all = all(all(d.get("killed") for d in r["biased"]["repeats"]) for r in rows)
    return {"status": "ok", "function": path, "budget_per_mutant_s": b.mutant_s,
            "max_examples": b.mutant_max_examples, "rows": rows, "ratios": ratios,
            "every_mutant_killed_by_biased": killed_all}


# ---------------------------------------------------------------------------
# Section 3: decode curves


def _decode_fn() -> tuple[str, Callable]:
    return _first(["impl.decoder_bench:measure_decode", "fuzz.decoder_target:measure_decode",
                   "impl.decoder:measure_decode"])


def section_decode(b: Budget, log: Callable[[str], None]) -> dict[str, Any]:
    path, measure = _decode_fn()
    w = b.decode_window
    ts = [w, 4 * w, 16 * w]
    reps = []
    for rep in range(b.repeats):
        r = _plain(_call(measure, window=w, W=w, ts=ts, steps=b.decode_steps, seed=rep, repeats=1))
        reps.append(r)
        log(f"  decode repeat {rep + 1}/{b.repeats} done")
    return {"status": "ok", "function": path, "window": w, "ts": ts, "repeats": reps,
            **_summarise_decode(reps, w, ts)}


def _summarise_decode(reps: list[dict], w: int, ts: list[int]) -> dict[str, Any]:
    """Pull per-t ring / full times and KV bytes out of the helper's dicts (see its docstring)."""
    def points(r: dict) -> list[dict]:
        for key in ("points", "rows", "curve", "results"):
            if isinstance(r.get(key), list):
                return r[key]
        return []

    def get(p: dict, *names):
        for n in names:
            if p.get(n) is not None:
                return p[n]
        return None

    curve: dict[int, dict[str, list]] = {}
    for r in reps:
        for p in points(r):
            t = get(p, "t", "length", "tokens")
            if t is None:
                continue
            c = curve.setdefault(int(t), {"ring": [], "full": [], "kv": [], "formula": []})
            c["ring"].append(get(p, "ring_s", "ring_per_token_s", "cached_s", "ring"))
            c["full"].append(get(p, "full_s", "full_per_token_s", "recompute_s", "full"))
            c["kv"].append(get(p, "kv_bytes", "ring_kv_bytes", "bytes"))
            c["formula"].append(get(p, "kv_formula_bytes", "formula_bytes", "formula"))
    rows, ratios = [], []
    for t in sorted(curve):
        c = curve[t]
        rows.append({"t": t, "ring_s": stats(c["ring"]), "full_s": stats(c["full"]),
                     "kv_bytes": stats(c["kv"]), "formula_bytes": stats(c["formula"])})
        vals = [f / r for f, r in zip(c["full"], c["ring"]) if f and r]
        if vals:
            ratios.append(ratio(vals, f"full recompute / ring cache per-token time, t={t}", "full", "ring", t=t))
    tmin, tmax = (min(curve), max(curve)) if curve else (None, None)
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
    path, measure = _first(["impl.cuda_bench:measure_decode_attention"])
    reps = []
    for rep in range(b.repeats):
        reps.append(_plain(_call(measure, iters=b.gpu_iters, seed=rep)))
        log(f"  gpu repeat {rep + 1}/{b.repeats} done")
    ratios = []
    keys = set().union(*(r.keys() for r in reps)) if reps else set()
    for k in sorted(keys):
        if any(s in k for s in ("speedup", "fraction", "ratio")):
            vals = [r[k] for r in reps if isinstance(r.get(k), (int, float))]
            if vals:
                ratios.append(ratio(vals, k, k, "", key=k))
    return {"status": "ok", "function": path, "device": torch.cuda.get_device_name(0), "repeats": reps,
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


def _errbars(s_list: list[dict]) -> tuple[list, list]:
    med = [s["median"] for s in s_list]
    lo = [s["median"] - s["min"] for s in s_list]
    hi = [s["max"] - s["median"] for s in s_list]
    return med, [lo, hi]


def plot_throughput(sec: dict, path: Path, machine: str) -> None:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    series: dict[tuple[str, str], list[dict]] = {}
    for r in sec["rows"]:
        series.setdefault((r["target"], r["mode"]), []).append(r)
    for (name, mode), rows in sorted(series.items()):
        rows.sort(key=lambda r: r["window"])
        ws = [r["window"] for r in rows]
        style = "-o" if mode == "stateful" else "--s"
        for ax, key in zip(axes, ("steps_per_s", "examples_per_s")):
            ok = [(w, r[key]) for w, r in zip(ws, rows) if r[key]["median"]]
            if not ok:
                continue
            med, err = _errbars([s for _, s in ok])
            ax.errorbar([w for w, _ in ok], med, yerr=err, fmt=style, capsize=3, label=f"{name} ({mode})")
    for ax, title, unit in ((axes[0], "Spec-checked steps per second", "steps / s"),
                            (axes[1], "Examples per second", "examples / s")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("window W (tokens)")
        ax.set_ylabel(unit + " (median, bars: min–max)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(f"Harness throughput by target and mode — {machine}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_mutants(sec: dict, path: Path, budget: Budget) -> None:
    plt = _plt()
    rows = sec["rows"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.45 * max(4, len(rows)) + 1.6))
    names = [r["mutant"] for r in rows]
    y = list(range(len(rows)))
    for ax, metric, unit, cap in ((axes[0], "examples", "examples to kill", budget.mutant_max_examples),
                                  (axes[1], "seconds", "seconds to kill", budget.mutant_s)):
        for off, mode, color, label in ((-0.2, "biased", "tab:blue", "boundary-biased"),
                                        (0.2, "uniform", "tab:orange", "uniform baseline")):
            vals, hatches = [], []
            for r in rows:
                s = r[mode][metric]
                if s["median"] is None:
                    vals.append(cap)
                    hatches.append("//")
                else:
                    vals.append(max(s["median"], 1e-3 if metric == "seconds" else 1))
                    hatches.append("")
            bars = ax.barh([v + off for v in y], vals, height=0.38, color=color, label=label)
            for bar, h in zip(bars, hatches):
                if h:
                    bar.set_hatch(h)
                    bar.set_alpha(0.45)
        ax.set_yticks(y)
        ax.set_yticklabels(names if ax is axes[0] else [""] * len(names), fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel(f"{unit} (median over repeats, log scale)")
        ax.invert_yaxis()
        ax.grid(True, axis="x", which="both", alpha=0.3)
    axes[0].set_title("Examples to kill each mutant")
    axes[1].set_title("Seconds to kill each mutant")
    axes[0].legend(fontsize=8, loc="lower right", title="hatched: survived budget", title_fontsize=7)
    fig.suptitle("Boundary-biased strategies vs uniform-random baseline", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_decode(sec: dict, path: Path) -> None:
    plt = _plt()
    rows = sec["rows"]
    ts = [r["t"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    ax = axes[0]
    for key, label, style in (("ring_s", "ring-buffer cache (decode)", "-o"),
                              ("full_s", "full recompute (no cache)", "--s")):
        ok = [(t, r[key]) for t, r in zip(ts, rows) if r[key]["median"]]
        if ok:
            med, err = _errbars([{k: (v * 1e3 if isinstance(v, float) else v) for k, v in s.items()}
                                 for _, s in ok])
            ax.errorbar([t for t, _ in ok], med, yerr=err, fmt=style, capsize=3, label=label)
    ax.axvline(sec["window"], color="grey", lw=0.8, ls=":", label=f"t = W = {sec['window']}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens already decoded t")
    ax.set_ylabel("time per decoded token (ms, median, bars: min–max)")
    ax.set_title("Per-token decode time vs t")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax = axes[1]
    kv = [(t, r["kv_bytes"]["median"]) for t, r in zip(ts, rows) if r["kv_bytes"]["median"]]
    fm = [(t, r["formula_bytes"]["median"]) for t, r in zip(ts, rows) if r["formula_bytes"]["median"]]
    if kv:
        ax.plot([t for t, _ in kv], [v / 1024 for _, v in kv], "-o", label="KV bytes held (ring cache)")
    if fm:
        ax.plot([t for t, _ in fm], [v / 1024 for _, v in fm], "--", color="k",
                label="formula 2·layers·kv_heads·head_dim·W·bytes")
    ax.axvline(sec["window"], color="grey", lw=0.8, ls=":", label=f"t = W = {sec['window']}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens already decoded t")
    ax.set_ylabel("KV cache size (KiB)")
    ax.set_ylim(bottom=0)
    ax.set_title("KV memory held vs t")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("Torch windowed-attention decoder: ring-buffer cache vs full recompute", fontsize=10)
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
    L += ["## 1. Throughput: spec-checked steps/s and examples/s", ""]
    if _na(s):
        L += [f"{_na(s)}", ""]
    else:
        L += ["Stateful: a Hypothesis campaign (`fuzz.campaign.fuzz_target`) starting at window W, contents "
              "checked against pyspec after every op. Bulk: one C trace call per stream, checked against "
              "`pyspec.bulk`. " + (f"Bulk: {s['bulk']['status']}." if s['bulk']['status'] != 'ok' else ""), "",
              "| target | mode | W | steps/s (median) | min–max | examples/s (median) | steps measured |",
              "|---|---|---:|---:|---:|---:|---:|"]
        for r in s["rows"]:
            st_ = r["steps_per_s"]
            L.append(f"| {r['target']} | {r['mode']} | {r['window']} | {_fmt(st_['median'])} | "
                     f"{_fmt(st_['min'])}–{_fmt(st_['max'])} | {_fmt(r['examples_per_s']['median'])} | "
                     f"{_fmt(r['steps'])} |")
        L += ["", "| comparison | ratio |", "|---|---:|"]
        L += [f"| {r['label']} | {_fmt_ratio(r)} |" for r in s["ratios"]]
        if s.get("skipped"):
            L += ["", "Not measured: " + "; ".join(f"{k} ({v})" for k, v in s["skipped"].items()) + "."]
        L += ["", "![throughput](throughput.png)", ""]

    s = rep["sections"]["mutants"]
    L += ["## 2. Mutants: examples- and seconds-to-kill, boundary-biased vs uniform baseline", ""]
    if _na(s):
        L += [f"{_na(s)}", ""]
    else:
        L += [f"Budget per mutant, strategy and repeat: {s['budget_per_mutant_s']} s / "
              f"{s['max_examples']} examples. Ratio = uniform / biased (higher: the bias pays more); "
              "'≥' marks a lower bound where the baseline survived and is counted at its budget.", "",
              "| mutant | class | biased killed | biased examples | biased s | uniform killed | "
              "uniform examples | uniform s | examples ratio | seconds ratio |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in s["rows"]:
            bi, un = r["biased"], r["uniform"]
            L.append(f"| {r['mutant']} | {r['bug_class'] or ''} | {bi['killed']} | "
                     f"{_fmt(bi['examples']['median'])} | {_fmt(bi['seconds']['median'])} | {un['killed']} | "
                     f"{_fmt(un['examples']['median'])} | {_fmt(un['seconds']['median'])} | "
                     f"{_fmt_ratio(r.get('ratio_examples'))} | {_fmt_ratio(r.get('ratio_seconds'))} |")
        L += ["", "![mutants](mutants.png)", ""]

    s = rep["sections"]["decode"]
    L += ["## 3. Decode: per-token time vs t, KV bytes vs formula", ""]
    if _na(s):
        L += [f"{_na(s)}", ""]
    else:
        L += [f"Window W = {s['window']}; t = W, 4W, 16W; helper `{s['function']}`.", "",
              "| t | ring ms/token | full ms/token | KV bytes held | formula bytes |",
              "|---:|---:|---:|---:|---:|"]
        for r in s["rows"]:
            ms = lambda x: None if x is None else x * 1e3  # noqa: E731
            L.append(f"| {r['t']} | {_fmt(ms(r['ring_s']['median']))} | {_fmt(ms(r['full_s']['median']))} | "
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
