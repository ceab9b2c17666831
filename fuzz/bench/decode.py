"""Decode benchmark: per-token time with the ring-buffer cache vs full recompute, and KV bytes.

Not a timed test: numbers depend on the machine. ``kvwindow bench`` calls
:func:`measure_decode`; ``tests/bench/bench_decoder.py`` wraps it for
pytest-benchmark. The goal (issue 5): cached per-token time at ``t = 16W``
within 1.3x of that at ``t = W`` while full recompute grows with ``t``, and KV
bytes equal ``2 * layers * kv_heads * head_dim * W * bytes`` once ``t >= W``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict
from typing import Any, Sequence

import torch

from impl.decoder import Decoder, DecoderConfig, torch_threads

#: The benchmark model: every layer slides with window W (set per call).
BENCH_CONFIG = DecoderConfig(vocab=256, d_model=64, layers=2, n_heads=4, n_kv_heads=2, head_dim=16,
                             window=64, dtype="float32", seed=0)

#: Goal from the issue: cached per-token time at t = 16W over that at t = W.
RING_GROWTH_GOAL = 1.3


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def kv_formula_bytes(config: DecoderConfig, window: int) -> int:
    """``2 · layers · kv_heads · head_dim · W · bytes`` (K and V of every layer, W slots)."""
    return 2 * config.layers * config.n_kv_heads * config.head_dim * window * config.torch_dtype.itemsize


def measure_decode(window: int = 64, ts: Sequence[int] | None = None, tokens: int = 16, seed: int = 0,
                   repeats: int = 3, device: str = "cpu", dtype: str = "float32",
                   config: DecoderConfig | None = None, full: bool = True,
                   backend: str = "torch", threads: int | None = 1) -> dict[str, Any]:
    """Per-token decode time at each ``t`` in ``ts`` (default ``W, 4W, 16W``).

    For each ``t``: prefill ``t`` tokens into a fresh ring cache, then time
    ``tokens`` single-token decodes (``ring_s``: median seconds per token over
    ``repeats`` rounds); time a full forward over ``t + 1`` tokens, which is
    what recomputing without a cache costs per token (``full_s``, median over
    ``repeats``). ``kv_bytes`` is the K/V storage the cache holds at ``t``;
    ``kv_formula_bytes`` the formula for a full window. ``threads``: torch
    intra-op threads during the measurement (default 1: the model is small, and
    extra threads only add jitter on a shared machine; ``None`` leaves it alone).

    Returns ``{"config", "window", "device", "points": [{"t", "ring_s", "full_s",
    "kv_bytes", "kv_formula_bytes"}...], "ring_ratio_last_over_first",
    "full_ratio_last_over_first", "ring_goal", "ring_goal_met", "kv_matches_formula"}``.
    """
    with torch_threads(threads):
        return _measure(window, ts, tokens, seed, repeats, device, dtype, config, full, backend)


def _measure(window, ts, tokens, seed, repeats, device, dtype, config, full, backend) -> dict[str, Any]:
    base = config if config is not None else BENCH_CONFIG
    from dataclasses import replace

    cfg = replace(base, window=window, dtype=dtype, device=device, seed=seed)
    model = Decoder(cfg)
    dev = model.device
    ts = list(ts) if ts is not None else [window, 4 * window, 16 * window]
    g = torch.Generator().manual_seed(seed)
    longest = max(ts) + tokens + 1
    stream = torch.randint(0, cfg.vocab, (longest,), generator=g).tolist()
    formula = kv_formula_bytes(cfg, window)

    # warm-up (allocator, kernels)
    c = model.new_cache(backend=backend)
    model.forward_cached(c, stream[:window + 2])
    for i in range(3):
        model.decode(c, stream[window + 2 + i])
    if full:
        model.full_forward(stream[:window])

    points = []
    for t in ts:
        rounds = []
        kv = None
        for _ in range(max(1, repeats)):
            cache = model.new_cache(backend=backend)
            for i in range(0, t, 4 * window):  # prefill in chunks longer than W
                model.forward_cached(cache, stream[i:min(t, i + 4 * window)])
            kv = cache.kv_bytes()
            _sync(dev)
            t0 = time.perf_counter()
            for i in range(tokens):
                model.decode(cache, stream[t + i])
            _sync(dev)
            rounds.append((time.perf_counter() - t0) / tokens)
        full_s = None
        if full:
            fr = []
            for _ in range(max(1, repeats)):
                _sync(dev)
                t0 = time.perf_counter()
                model.full_forward(stream[:t + 1])
                _sync(dev)
                fr.append(time.perf_counter() - t0)
            full_s = statistics.median(fr)
        points.append({"t": t, "ring_s": statistics.median(rounds), "ring_rounds_s": rounds,
                       "full_s": full_s, "kv_bytes": kv, "kv_formula_bytes": formula})
    first, last = points[0], points[-1]
    ring_ratio = last["ring_s"] / first["ring_s"]
    full_ratio = (last["full_s"] / first["full_s"]) if full else None
    return {
        "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(cfg).items()},
        "window": window,
        "device": str(dev),
        "backend": backend,
        "threads": torch.get_num_threads(),
        "tokens": tokens,
        "repeats": repeats,
        "points": points,
        "ring_ratio_last_over_first": ring_ratio,
        "full_ratio_last_over_first": full_ratio,
        "ring_goal": RING_GROWTH_GOAL,
        "ring_goal_met": ring_ratio <= RING_GROWTH_GOAL,
        "kv_matches_formula": all(p["kv_bytes"] == p["kv_formula_bytes"] for p in points if p["t"] >= window),
    }


def format_report(r: dict[str, Any]) -> str:
    """A small text table of :func:`measure_decode`'s result."""
    lines = [f"decode benchmark: W={r['window']} device={r['device']} backend={r['backend']} threads={r['threads']} "
             f"config d_model={r['config']['d_model']} layers={r['config']['layers']} "
             f"heads={r['config']['n_heads']}/{r['config']['n_kv_heads']} head_dim={r['config']['head_dim']} "
             f"{r['config']['dtype']}",
             f"{'t':>6} {'ring ms/tok':>12} {'full ms/tok':>12} {'KV bytes':>10} {'formula':>10}"]
    for p in r["points"]:
        full = "-" if p["full_s"] is None else f"{p['full_s'] * 1e3:.3f}"
        lines.append(f"{p['t']:>6} {p['ring_s'] * 1e3:>12.3f} {full:>12} {p['kv_bytes']:>10} {p['kv_formula_bytes']:>10}")
    lines.append(f"ring t_last/t_first = {r['ring_ratio_last_over_first']:.3f} (goal <= {r['ring_goal']}: "
                 f"{'met' if r['ring_goal_met'] else 'NOT met'}); full t_last/t_first = "
                 f"{r['full_ratio_last_over_first'] if r['full_ratio_last_over_first'] is None else round(r['full_ratio_last_over_first'], 2)}; "
                 f"KV bytes == formula for t >= W: {r['kv_matches_formula']}")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m fuzz.bench.decode
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--backend", default="torch")
    a = ap.parse_args()
    print(format_report(measure_decode(window=a.window, tokens=a.tokens, repeats=a.repeats, device=a.device,
                                       dtype=a.dtype, backend=a.backend)))
