"""Step 6's plots as PNG bytes (written beside report.md, inlined into report.html): the candidate/baseline
ratio of each clock with its min–max over repeats, and per-token decode latency of both subjects."""

from __future__ import annotations

import io
from typing import Any


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    _plt().close(fig)
    return buf.getvalue()


def plot_ratios(data: dict[str, Any], base: str, cand: str) -> bytes:
    plt = _plt()
    rows = [(r["label"], r) for r in data["ratios"].values() if r["median"] is not None]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.6))
    y = list(range(len(rows)))
    med = [r["median"] for _, r in rows]
    err = [[m - r["min"] for m, (_, r) in zip(med, rows)], [r["max"] - m for m, (_, r) in zip(med, rows)]]
    colors = ["tab:green" if (r["higher_is_better"] and r["median"] >= 1) or (not r["higher_is_better"] and r["median"] <= 1)
              else "tab:red" for _, r in rows]
    ax.barh(y, med, xerr=err, color=colors, alpha=0.8, capsize=3)
    ax.axvline(1.0, color="black", lw=1)
    ax.set_yticks(y)
    ax.set_yticklabels([f"{label} ({'higher' if r['higher_is_better'] else 'lower'} is better)" for label, r in rows],
                       fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"candidate / baseline (median of {data['repeats']} interleaved repeats; bars: min–max)", fontsize=8)
    ax.set_title(f"{cand}\nagainst {base}", fontsize=9)
    ax.grid(True, axis="x", alpha=0.4)
    fig.tight_layout()
    return _png(fig)


def plot_latency(data: dict[str, Any], base: str, cand: str) -> bytes:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 3.4))
    p = data["prompt"]
    for spec, style in ((base, "-o"), (cand, "--s")):
        lat = data["per_subject"][spec]["latency_by_step_s"]
        ax.plot([p + i for i in range(len(lat))], [v * 1e3 for v in lat], style, ms=3, label=spec)
    ax.set_xlabel("position of the decoded token")
    ax.set_ylabel("ms per decode (median)")
    ax.set_title(f"Per-token decode latency after a {p}-token prompt (W = {data['window']})", fontsize=9)
    ax.grid(True, alpha=0.4)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)
