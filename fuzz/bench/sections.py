"""The bench's sections: each measures one thing side by side, repeat by repeat, and returns a dict
(``status`` ``"ok"``, or :class:`~impl.errors.Unavailable` with the reason).

The measuring helpers are named ``"module:function"`` and imported when the section
runs, so a helper that is missing here disables its own section only.
"""

from __future__ import annotations

import importlib
import math
from typing import Any, Callable

from fuzz.bench.budgets import Budget
from fuzz.bench.summary import plain, ratio, stats
from impl.errors import Unavailable

#: The helpers each section measures with.
CAMPAIGN_FN = "fuzz.bench.throughput:measure_campaign"
BULK_FN = "fuzz.bench.throughput:measure_bulk"
PEER_FN = "fuzz.bench.peer:measure_peer"
MUTANTS_FN = "fuzz.killtable:run_mutants"
DECODE_FN = "fuzz.bench.decode:measure_decode"
ISOLATED_FN = "fuzz.targets.isolated:IsolatedTarget"
GPU_FN = "fuzz.bench.gpu:measure_decode_attention"
LONG_FN = "fuzz.bench.throughput:measure_long"


def helper(path: str) -> Any:
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


# ---------------------------------------------------------------------------
# throughput


def section_throughput(b: Budget, log: Callable[[str], None]) -> dict[str, Any]:
    from fuzz.targets import registry

    measure_campaign = helper(CAMPAIGN_FN)
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
        bulk_path, bulk, bulk_reason = BULK_FN, helper(BULK_FN), None
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
                    r = plain(bulk(w=w, n=b.bulk_n, width=b.bulk_width))  # deterministic: repeats vary only in time
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
            "stateful": {"function": CAMPAIGN_FN, "seconds_per_cell": cell_s,
                         "strategy": "boundary tours, then fuzz.strategies.cases from start window W, resets <= W"},
            "skipped": skipped}


# ---------------------------------------------------------------------------
# peer: the campaign beside a hand-written state machine


def section_peer(b: Budget, log: Callable[[str], None]) -> dict[str, Any]:
    """The ``ring-c`` campaign (:data:`CAMPAIGN_FN`) and the hand-written state machine over the
    same C ring (:data:`PEER_FN`), interleaved at each ``W``: campaign tokens/s over peer tokens/s."""
    from fuzz.targets import registry

    measure_campaign, measure_peer = helper(CAMPAIGN_FN), helper(PEER_FN)
    target, why = registry.probe("ring-c")
    if target is None:
        raise Unavailable(f"ring-c: {why}")
    for w in b.peer_windows[:1]:  # warm-up, not recorded: first Hypothesis calls, library loading
        measure_campaign(target, w, 0.2, campaign_seed=0)
        measure_peer(w, 0.2)
    raw: dict[int, dict[str, list[dict]]] = {w: {"campaign": [], "peer": []} for w in b.peer_windows}
    for rep in range(b.repeats):
        for w in b.peer_windows:
            raw[w]["campaign"].append(measure_campaign(target, w, b.peer_s, campaign_seed=rep * 1000 + w))
            raw[w]["peer"].append(measure_peer(w, b.peer_s))
        log(f"  peer repeat {rep + 1}/{b.repeats} done")
    rows, ratios = [], []
    for w, sides in raw.items():
        camp, peer = sides["campaign"], sides["peer"]
        phases = {p: sum(r["phases"][p] for r in camp) for p in camp[0]["phases"]} if camp else {}
        rows.append({"window": w, "campaign_tokens_per_s": stats([r["tokens_per_s"] for r in camp]),
                     "peer_tokens_per_s": stats([r["tokens_per_s"] for r in peer]),
                     "campaign_examples": sum(r["examples"] for r in camp),
                     "peer_examples": sum(r["examples"] for r in peer), "campaign_phases": phases,
                     "repeats": {"campaign": camp, "peer": peer}})
        vals = [c["tokens_per_s"] / p["tokens_per_s"] for c, p in zip(camp, peer) if p["tokens_per_s"]]
        if vals:
            ratios.append(ratio(vals, f"ring-c campaign / hand-written state machine, tokens/s, W={w}",
                                "campaign tokens/s", "peer tokens/s", window=w, goal=">= 1"))
    return {"status": "ok", "campaign": CAMPAIGN_FN, "peer": PEER_FN, "seconds_per_cell": b.peer_s,
            "rows": rows, "ratios": ratios}


# ---------------------------------------------------------------------------
# mutants


#: What a kill costs, three ways: test cases run, tokens pushed, wall seconds (until the first failure).
KILL_METRICS = ("examples", "tokens", "seconds")


def section_mutants(b: Budget, log: Callable[[str], None]) -> dict[str, Any]:
    """``run_mutants(baseline=True)``: per mutant, the boundary-biased campaign and then the uniform
    baseline under the same budget, side by side; repeated with a different campaign seed each time."""
    run_mutants = helper(MUTANTS_FN)
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
# decode curves


def section_decode(b: Budget, log: Callable[[str], None]) -> dict[str, Any]:
    measure = helper(DECODE_FN)
    w = b.decode_window
    ts = [max(1, w // 2), w, 4 * w, 16 * w]  # W/2: the cache is still filling
    reps, reps_c, c_status = [], [], "ok"
    for rep in range(b.repeats):
        r = plain(measure(window=w, ts=ts, tokens=b.decode_tokens, seed=rep, repeats=3, backend="torch"))
        reps.append(r)
        if c_status == "ok":  # the same decode with the cache stored in the C ring (impl.ring.CRing)
            try:
                reps_c.append(plain(measure(window=w, ts=ts, tokens=b.decode_tokens, seed=rep, repeats=3,
                                             backend="c", full=False)))
            except Exception as e:  # noqa: BLE001
                c_status, reps_c = f"not available: {type(e).__name__}: {e}", []
        log(f"  decode repeat {rep + 1}/{b.repeats} done")
    return {"status": "ok", "function": DECODE_FN, "window": w, "ts": ts, "repeats": reps, "repeats_c_backend": reps_c,
            "c_backend": c_status,
            "config": reps[0].get("config") if reps else None, "tokens": b.decode_tokens,
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
# GPU


def section_gpu(b: Budget, log: Callable[[str], None]) -> dict[str, Any]:
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        raise Unavailable(f"torch does not import ({e})") from e
    if not torch.cuda.is_available():
        why = "no CUDA device" if torch.version.cuda else f"torch {torch.__version__} is a CPU-only build"
        raise Unavailable(f"skipped: {why} on this machine (torch.cuda.is_available() is False)")
    measure = helper(GPU_FN)
    reps = []
    for rep in range(b.repeats):
        reps.append(plain(measure(iters=b.gpu_iters, seed=rep)))
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
# isolation: what running a native target in a supervised child costs


def section_isolation(b: Budget, log: Callable[[str], None]) -> dict[str, Any]:
    """The ``ring-c`` campaign (:data:`CAMPAIGN_FN`) in this process and in an isolated child
    (:data:`ISOLATED_FN`, what ``kvwindow fuzz`` runs by default), interleaved at each ``W``:
    in-process tokens/s over child tokens/s. Goal: at most 1.5."""
    from fuzz.targets import registry

    measure_campaign, isolated = helper(CAMPAIGN_FN), helper(ISOLATED_FN)
    target, why = registry.probe("ring-c")
    if target is None:
        raise Unavailable(f"ring-c: {why}")
    child = isolated("ring-c")
    try:
        for w in b.isolation_windows[:1]:  # warm-up, not recorded
            measure_campaign(target, w, 0.2, campaign_seed=0)
            measure_campaign(child, w, 0.2, campaign_seed=0)
        raw: dict[int, dict[str, list[dict]]] = {w: {"in_process": [], "child": []} for w in b.isolation_windows}
        for rep in range(b.repeats):
            for w in b.isolation_windows:
                raw[w]["in_process"].append(measure_campaign(target, w, b.isolation_s, campaign_seed=rep * 1000 + w))
                raw[w]["child"].append(measure_campaign(child, w, b.isolation_s, campaign_seed=rep * 1000 + w))
            log(f"  isolation repeat {rep + 1}/{b.repeats} done")
    finally:
        child.close()
    rows, ratios = [], []
    for w, sides in raw.items():
        here, there = sides["in_process"], sides["child"]
        rows.append({"window": w, "in_process_tokens_per_s": stats([r["tokens_per_s"] for r in here]),
                     "child_tokens_per_s": stats([r["tokens_per_s"] for r in there]),
                     "in_process_examples_per_s": stats([r["examples_per_s"] for r in here]),
                     "child_examples_per_s": stats([r["examples_per_s"] for r in there]),
                     "in_process_examples": sum(r["examples"] for r in here),
                     "child_examples": sum(r["examples"] for r in there)})
        vals = [x["tokens_per_s"] / y["tokens_per_s"] for x, y in zip(here, there)
                if x["tokens_per_s"] and y["tokens_per_s"]]
        if vals:
            ratios.append(ratio(vals, f"ring-c in process / in an isolated child, tokens/s, W={w}",
                                "in-process tokens/s", "child tokens/s", window=w, goal="<= 1.5"))
    return {"status": "ok", "campaign": CAMPAIGN_FN, "isolated": ISOLATED_FN, "seconds_per_cell": b.isolation_s,
            "rows": rows, "ratios": ratios}


# ---------------------------------------------------------------------------
# long: the bulk phase and the long tour inside a default campaign


def section_long(b: Budget, log: Callable[[str], None]) -> dict[str, Any]:
    """Default campaigns of ``ring-c`` (bulk phase and long tour) in this process and in an isolated child
    (:data:`ISOLATED_FN`, as ``kvwindow fuzz`` runs it: the bulk phase is a request to the child) and of
    ``pyring`` (long tour only): the bulk phase's share of each campaign's time and tokens, and the long
    tour's seconds (:data:`LONG_FN`)."""
    from fuzz.targets import registry

    measure, isolated = helper(LONG_FN), helper(ISOLATED_FN)
    targets = {}
    for name in ("ring-c", "pyring"):
        t, why = registry.probe(name)
        if t is None:
            raise Unavailable(f"{name}: {why}")
        targets[name] = t
    targets["ring-c (isolated)"] = isolated("ring-c")
    try:
        raw: dict[str, list[dict]] = {name: [] for name in targets}
        for rep in range(b.repeats):
            for name, t in targets.items():
                raw[name].append(plain(measure(t, b.long_s, campaign_seed=rep)))
            log(f"  long repeat {rep + 1}/{b.repeats} done")
    finally:
        targets["ring-c (isolated)"].close()
    rows = []
    for name, reps in raw.items():
        rows.append({"target": name, **{k: stats([r[k] for r in reps if r.get(k) is not None])
                                        for k in ("bulk_time_share", "bulk_token_share", "bulk_tokens",
                                                  "bulk_seconds", "bulk_tokens_per_s", "tokens", "long_tour_s",
                                                  "scale_time_share", "leaks_time_share", "threads_time_share",
                                                  "scale_window")},
                     "long_tour_tokens": reps[0]["long_tour_tokens"], "repeats": reps})
    return {"status": "ok", "function": LONG_FN, "isolated": ISOLATED_FN, "seconds_per_campaign": b.long_s,
            "rows": rows}


#: Every section, in report order.
SECTIONS: dict[str, Callable[[Budget, Callable[[str], None]], dict[str, Any]]] = {
    "throughput": section_throughput,
    "peer": section_peer,
    "isolation": section_isolation,
    "mutants": section_mutants,
    "decode": section_decode,
    "gpu": section_gpu,
    "long": section_long,
    "engines": lambda b, log: helper("fuzz.bench.engines:section_engines")(b, log),
    "bugs": lambda b, log: helper("fuzz.bench.bugs:section_bugs")(b, log),
    "paged": lambda b, log: helper("fuzz.bench.paged:section_paged")(b, log),
}
