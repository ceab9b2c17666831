"""Benchmark of the fused ring decode-attention kernel (``csrc/ringkv_cuda.cu``).

:func:`measure_decode_attention` fills a ``CudaRing`` (every sequence wrapped past its
window, the steady state of long decoding), times one decode step of the fused kernel
with CUDA events, and in the same run times torch's ``scaled_dot_product_attention``
over the window gathered into ``[B, Hkv, W, D]`` (attention alone, and gather +
attention, the path a ring cache needs without the fused kernel). Achieved bandwidth is
the K/V bytes the step must read (``2 * B * Hkv * W * D * elem``, plus q and out) over
the median time, reported as a fraction of the device's peak.

Peak bandwidth, in order: ``$KVWINDOW_PEAK_BW`` (bytes/s, or with a TB/s suffix),
torch's device properties (memory clock x bus width), a table by device name
(:data:`PEAK_BW_TABLE`), else the CUDA runtime's memory clock x bus width. Goal (issue 7): >= 70 % of peak and faster than
the SDPA path. ``python -m fuzz.bench.gpu`` prints the table; the ``kvwindow bench``
command calls :func:`measure_decode_attention` when a GPU is present.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any

#: Peak HBM bandwidth by device-name fragment (bytes/s); the first match wins.
PEAK_BW_TABLE: list[tuple[tuple[str, ...], float]] = [
    (("H200",), 4.8e12),
    (("H100", "SXM"), 3.35e12),
    (("H100", "HBM3"), 3.35e12),
    (("H100", "NVL"), 3.9e12),
    (("H100", "PCIe"), 2.0e12),
    (("H100",), 3.35e12),
    (("GH200",), 4.0e12),
    (("A100", "80GB"), 2.0e12),
    (("A100",), 1.555e12),
    (("L40S",), 0.864e12),
    (("A10",), 0.6e12),
]
ENV_PEAK = "KVWINDOW_PEAK_BW"
GOAL_FRACTION = 0.70


def parse_bandwidth(text: str) -> float:
    """``"4.8e12"``, ``"4.8TB/s"``, ``"4800GB/s"`` -> bytes/s."""
    t = text.strip().lower().replace(" ", "")
    for suffix, mult in (("tb/s", 1e12), ("gb/s", 1e9), ("tbs", 1e12), ("gbs", 1e9), ("tb", 1e12), ("gb", 1e9)):
        if t.endswith(suffix):
            return float(t[: -len(suffix)]) * mult
    return float(t)


def table_peak(name: str) -> float | None:
    for frags, bw in PEAK_BW_TABLE:
        if all(f.lower() in name.lower() for f in frags):
            return bw
    return None


def peak_bandwidth(device: int = 0) -> tuple[float | None, str]:
    """``(bytes/s, where it came from)`` for ``device``."""
    env = os.environ.get(ENV_PEAK)
    if env:
        return parse_bandwidth(env), f"${ENV_PEAK}"
    import torch

    props = torch.cuda.get_device_properties(device)
    clock = getattr(props, "memory_clock_rate", None)  # kHz, in some torch versions
    width = getattr(props, "memory_bus_width", None)  # bits
    if clock and width:
        return 2.0 * clock * 1e3 * width / 8, "torch device properties (2 x memory clock x bus width)"
    name = props.name
    bw = table_peak(name)
    if bw is not None:
        return bw, f"table entry for {name!r}"
    try:
        from impl import cuda_ring

        clock, width = cuda_ring.device_memory_info(device)
        if clock and width:
            return 2.0 * clock * 1e3 * width / 8, "CUDA runtime (2 x memory clock x bus width)"
    except Exception:  # noqa: BLE001 - fall through to "unknown"
        pass
    return None, f"unknown for {name!r}: set ${ENV_PEAK}"


def _time_ms(fn, iters: int, warmup: int) -> float:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def measure_decode_attention(batch: int = 64, window: int = 4096, kv_heads: int = 8, q_heads: int = 32,
                             head_dim: int = 128, dtype: str = "bf16", *, iters: int = 30, warmup: int = 5,
                             num_splits: int = 0, sweep_splits: tuple[int, ...] = (1, 2, 4, 8, 16),
                             sdpa: bool = True, fill_extra: int = 17, seed: int = 0) -> dict[str, Any]:
    """Time the fused ring decode-attention kernel and torch SDPA over the gathered window.

    Returns a dict of plain numbers/strings (JSON-ready): times (ms, median of ``iters``),
    bytes moved, achieved bandwidth (bytes/s), fraction of peak, SDPA times, speedups,
    the max abs difference between the two outputs, and a split-K sweep.
    """
    import torch
    import torch.nn.functional as F

    from impl import cuda_ring

    if not torch.cuda.is_available():
        raise cuda_ring.CudaUnavailable(f"no CUDA device: torch {torch.__version__} sees none")
    dev = torch.cuda.current_device()
    tdt = cuda_ring.torch_dtype(dtype)
    esize = cuda_ring.DTYPES[dtype][2]
    g = torch.Generator(device="cuda").manual_seed(seed)
    ring = cuda_ring.CudaRing(batch, 1, kv_heads, window, head_dim, dtype)
    n = window + fill_extra  # wrapped: the oldest entry is not in slot 0
    for b in range(batch):
        kk = torch.randn((n, kv_heads, head_dim), generator=g, device="cuda", dtype=torch.float32).to(tdt)
        vv = torch.randn((n, kv_heads, head_dim), generator=g, device="cuda", dtype=torch.float32).to(tdt)
        ring.append(0, b, 0, kk, vv)
    del kk, vv
    q = torch.randn((batch, q_heads, head_dim), generator=g, device="cuda", dtype=torch.float32).to(tdt)
    out = torch.empty_like(q)
    scale = head_dim ** -0.5
    length = min(n, window)
    kv_bytes = 2 * batch * kv_heads * length * head_dim * esize
    io_bytes = 2 * batch * q_heads * head_dim * esize
    total_bytes = kv_bytes + io_bytes
    # The K/V working set (1 GiB at the default shape) dwarfs L2 (50-60 MB), so every timed
    # call reads HBM; at small shapes the figures include L2 hits.
    peak, peak_src = peak_bandwidth(dev)

    def fused(splits=num_splits):
        ring.decode(0, q, scale=scale, num_splits=splits, out=out)

    kernel_ms = _time_ms(fused, iters, warmup)
    res: dict[str, Any] = {
        "device": torch.cuda.get_device_name(dev),
        "shape": {"batch": batch, "window": window, "kv_heads": kv_heads, "q_heads": q_heads,
                  "head_dim": head_dim, "dtype": dtype, "tokens_seen": n},
        "bytes": total_bytes,
        "kernel_ms": kernel_ms,
        "kernel_bw": total_bytes / (kernel_ms * 1e-3),
        "splits": num_splits or ring.auto_splits(q_heads),
        "peak_bw": peak,
        "peak_source": peak_src,
    }
    res["kernel_frac_peak"] = res["kernel_bw"] / peak if peak else None
    res["split_sweep"] = {str(s): _time_ms(lambda s=s: fused(s), max(iters // 2, 5), 2) for s in sweep_splits}

    if sdpa:
        kg, vg = ring.gather(0)  # [B, Hkv, W, D], logical order, every row filled
        qs = q.view(batch, q_heads, 1, head_dim)
        rep = q_heads // kv_heads

        def sdpa(k, v):
            try:
                return F.scaled_dot_product_attention(qs, k, v, scale=scale, enable_gqa=True)
            except TypeError:  # torch without enable_gqa
                return F.scaled_dot_product_attention(qs, k.repeat_interleave(rep, 1),
                                                      v.repeat_interleave(rep, 1), scale=scale)

        def attn():
            return sdpa(kg, vg)

        def gather_attn():
            return sdpa(*ring.gather(0))

        sdpa_ms = _time_ms(attn, iters, warmup)
        gather_sdpa_ms = _time_ms(gather_attn, max(iters // 2, 5), 2)
        fused()
        ref = attn()
        torch.cuda.synchronize()
        res.update({
            "sdpa_ms": sdpa_ms,
            "sdpa_bw": total_bytes / (sdpa_ms * 1e-3),
            "gather_sdpa_ms": gather_sdpa_ms,
            "speedup_vs_sdpa": sdpa_ms / kernel_ms,
            "speedup_vs_gather_sdpa": gather_sdpa_ms / kernel_ms,
            "max_abs_diff_vs_sdpa": float((out.float() - ref.view_as(out).float()).abs().max()),
        })
        res["sdpa_frac_peak"] = res["sdpa_bw"] / peak if peak else None
        del kg, vg
    res["goal_met"] = bool(res["kernel_frac_peak"] is not None and res["kernel_frac_peak"] >= GOAL_FRACTION
                           and res.get("speedup_vs_sdpa", 0.0) > 1.0)
    ring.close()
    return res


def format_report(r: dict[str, Any]) -> str:
    tb = lambda x: f"{x / 1e12:.3f} TB/s" if x else "n/a"  # noqa: E731
    pct = lambda x: f"{100 * x:.1f} %" if x is not None else "n/a"  # noqa: E731
    s = r["shape"]
    lines = [
        f"decode attention, {r['device']}: B={s['batch']} W={s['window']} Hkv={s['kv_heads']} "
        f"Hq={s['q_heads']} D={s['head_dim']} {s['dtype']} (n={s['tokens_seen']}), "
        f"{r['bytes'] / 2**20:.1f} MiB per step",
        f"  peak bandwidth         {tb(r['peak_bw'])}  ({r['peak_source']})",
        f"  fused ring kernel      {r['kernel_ms'] * 1e3:9.1f} us  {tb(r['kernel_bw'])}  {pct(r['kernel_frac_peak'])} of peak"
        f"  (splits {r['splits']})",
    ]
    if "sdpa_ms" in r:
        lines += [
            f"  torch SDPA (gathered)  {r['sdpa_ms'] * 1e3:9.1f} us  {tb(r['sdpa_bw'])}  {pct(r['sdpa_frac_peak'])} of peak",
            f"  gather + SDPA          {r['gather_sdpa_ms'] * 1e3:9.1f} us",
            f"  ratios: fused/SDPA speedup {r['speedup_vs_sdpa']:.2f}x, vs gather+SDPA "
            f"{r['speedup_vs_gather_sdpa']:.2f}x; max |fused - SDPA| = {r['max_abs_diff_vs_sdpa']:.3g}",
        ]
    lines.append("  split sweep (us): " + ", ".join(f"{k}: {v * 1e3:.1f}" for k, v in r["split_sweep"].items()))
    lines.append(f"  goal (>= {GOAL_FRACTION:.0%} of peak and faster than SDPA): "
                 + ("MET" if r["goal_met"] else "NOT MET"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--window", type=int, default=4096)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--q-heads", type=int, default=32)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--splits", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the result dict here")
    p.add_argument("--require-goal", action="store_true", help="exit 1 unless the bandwidth goal is met")
    p.add_argument("--max-diff", type=float, default=0.05, help="exit 1 if |fused - SDPA| exceeds this")
    a = p.parse_args(argv)
    r = measure_decode_attention(a.batch, a.window, a.kv_heads, a.q_heads, a.head_dim, a.dtype,
                                 iters=a.iters, num_splits=a.splits)
    print(format_report(r))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=2)
    if r.get("max_abs_diff_vs_sdpa", 0.0) > a.max_diff:
        print(f"FAIL: fused kernel and SDPA disagree by {r['max_abs_diff_vs_sdpa']:.3g} > {a.max_diff}")
        return 1
    if a.require_goal and not r["goal_met"]:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
