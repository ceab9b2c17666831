"""Step 6, phase-specific performance: baseline and candidate measured side by side in one run.

Seed 000's four clocks, each per subject and as a candidate/baseline ratio:

* **time to first token** — ``prefill`` of a prompt of ``perf_prompt_w · W`` tokens on a fresh instance;
* **decode latency** — each of ``perf_decode`` single-token ``decode`` calls after it: p50 and p95;
* **tokens/s at batch 1 and 8** — decode tokens over decode time for one stream, and for eight
  concurrent streams (eight instances stepped round-robin: the protocol has no batch dimension, so
  this is what a scheduler over single-sequence workers sees);
* **live KV bytes** — ``kv_bytes()`` after the run, against the formula
  ``sum over layers of 2 · kv_heads · head_dim · min(t, W_layer) · bytes`` from the identity.

Repeats are interleaved (baseline, candidate, then candidate, baseline, ...) after one untimed warm-up
each, so a noisy neighbour slows both sides of a ratio alike; each ratio is taken repeat by repeat and
summarised min / median / max. No speed threshold is asserted: the step passes when both subjects
were measured, and the report carries the numbers and plots for a reviewer to judge.
"""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

from fuzz.bench.summary import stats
from fuzz.gate.context import Context
from fuzz.gate.protocol import Subject, SubjectError
from fuzz.gate.verdict import FAIL, PASS, Step

ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}
BATCH = 8
METRICS = (("ttft_s", "time to first token", "s", False), ("decode_p50_s", "decode latency p50", "s", False),
           ("decode_p95_s", "decode latency p95", "s", False), ("tokens_per_s_b1", "tokens/s, batch 1", "tok/s", True),
           ("tokens_per_s_b8", f"tokens/s, batch {BATCH}", "tok/s", True), ("kv_bytes", "live KV bytes", "B", False))


def kv_formula(identity: dict[str, Any], t: int) -> tuple[int | None, str]:
    """Bytes of K and V over all layers after ``t`` tokens, from the identity (``None`` and why not)."""
    windows, hmap = identity.get("window"), identity.get("kv_head_map")
    hd, dtype = identity.get("head_dim"), identity.get("dtype")
    if not isinstance(windows, (list, tuple)) or not isinstance(hmap, (list, tuple)) or not isinstance(hd, int) \
            or dtype not in ITEMSIZE:
        return None, "the identity lacks window (per layer), kv_head_map, head_dim or a known dtype"
    kvh = len(set(int(x) for x in hmap))
    total = sum(2 * kvh * hd * min(t, w if isinstance(w, int) and w > 0 else t) * ITEMSIZE[dtype] for w in windows)
    return total, (f"2 · {kvh} kv_heads · {hd} head_dim · min(t={t}, W) per layer (windows {list(windows)}) · "
                   f"{ITEMSIZE[dtype]} bytes")


def measure_once(ctx: Context, subject: Subject, prompt: list[int], steps: list[int]) -> dict[str, Any]:
    # Every time is Handle.seconds: the subject's own call, measured where it runs (an isolated subject's child),
    # so the pipe to that child is not timed.
    h = subject.new()
    h.prefill(prompt)
    ttft = h.seconds
    lat = []
    for tok in steps:
        h.decode(tok)
        lat.append(h.seconds)
    kv = h.kv_bytes() if h.has("kv_bytes") else None
    hs = [subject.new() for _ in range(BATCH)]
    short = prompt[:ctx.window]
    for x in hs:
        x.prefill(short)
    n8 = max(2, len(steps) // 2)
    b8 = 0.0
    for tok in steps[:n8]:
        for x in hs:
            x.decode(tok)
            b8 += x.seconds
    return {"ttft_s": ttft, "decode_p50_s": float(np.percentile(lat, 50)), "decode_p95_s": float(np.percentile(lat, 95)),
            "tokens_per_s_b1": len(lat) / max(sum(lat), 1e-12), "tokens_per_s_b8": BATCH * n8 / max(b8, 1e-12), "kv_bytes": kv,
            "latencies_s": lat}


def step6(ctx: Context) -> Step:
    step = Step(6)
    b = ctx.budget
    prompt = ctx.tokens("perf/prompt", b.perf_prompt_w * ctx.window)
    steps = ctx.tokens("perf/decode", b.perf_decode)
    subjects = [ctx.baseline, ctx.candidate]
    runs: dict[str, list[dict[str, Any]]] = {s.spec: [] for s in subjects}
    try:
        for s in subjects:  # warm-up: allocator, kernels, caches of the adapters
            measure_once(ctx, s, prompt, steps[:4])
        for r in range(b.perf_repeats):
            for s in (subjects if r % 2 == 0 else subjects[::-1]):
                runs[s.spec].append(measure_once(ctx, s, prompt, steps))
    except SubjectError as e:
        step.add("measurement", e.spec, FAIL, f"{e.method} raised {e.what} while being timed")
        return step.settle("", "")
    t_end = len(prompt) + len(steps)
    per: dict[str, Any] = {}
    for role, s in ctx.roles():
        rs = runs[s.spec]
        summary = {m: stats([r[m] for r in rs if r[m] is not None]) for m, *_ in METRICS}
        formula, how = kv_formula(ctx.identities[s.spec], t_end)
        summary["kv_formula_bytes"] = formula
        summary["kv_formula"] = how
        summary["latency_by_step_s"] = [statistics.median(r["latencies_s"][i] for r in rs) for i in range(len(steps))]
        per[s.spec] = summary
        kv = summary["kv_bytes"]["median"]
        kvtxt = (f"; live KV {kv:.0f} B = {kv / formula:.2f}× the formula" if kv is not None and formula
                 else "; live KV bytes not reported" if kv is None else "")
        step.add("measured", f"{role} {s.spec}", PASS,
                 f"TTFT {summary['ttft_s']['median'] * 1e3:.2f} ms (prompt {len(prompt)}), decode p50 "
                 f"{summary['decode_p50_s']['median'] * 1e3:.2f} ms / p95 {summary['decode_p95_s']['median'] * 1e3:.2f} ms, "
                 f"{summary['tokens_per_s_b1']['median']:.0f} tok/s at batch 1, "
                 f"{summary['tokens_per_s_b8']['median']:.0f} at batch {BATCH}{kvtxt}")
    ratios = {}
    base, cand = runs[ctx.baseline.spec], runs[ctx.candidate.spec]
    for m, label, _, higher in METRICS:
        vals = [c[m] / bb[m] for c, bb in zip(cand, base) if c[m] is not None and bb[m]]
        ratios[m] = dict(stats(vals), label=label, higher_is_better=higher)
    step.data = {"per_subject": per, "ratios": ratios, "prompt": len(prompt), "decode_steps": len(steps),
                 "repeats": b.perf_repeats, "batch": BATCH, "window": ctx.window}
    parts = [f"{ratios[m]['label']} ×{ratios[m]['median']:.2f}" for m, *_ in METRICS if ratios[m]["median"] is not None]
    return step.settle("candidate/baseline (median of interleaved repeats): " + ", ".join(parts), "")
