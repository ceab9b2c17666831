"""The bench's PNG plots: throughput over W, the cost to kill each mutant, decode time and KV bytes over t."""

from __future__ import annotations

from pathlib import Path

from fuzz.bench.budgets import Budget


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
