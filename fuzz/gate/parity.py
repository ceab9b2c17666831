"""Step 4, positive parity: cached against uncached on each subject, and candidate against baseline, over
the cells where cache bugs live. The same cells are what step 5's negative controls must fail.

Cells (every one a fresh instance, tokens from the run's seed):

* **length L** — a prompt of ``L`` tokens, then ``W + 2`` decodes (more in a full run), for ``L`` around
  the window: 1, W-1, W, W+1, 2W+1 (and 2, 2W, 3W+2 in a full run; B-1, B, B+1, 2B+1 for a subject
  reporting ``block_size`` B): not yet full, exactly full, the first eviction, steady state;
* **chunks** — chunked prefill: a prompt fed in chunks shorter than, equal to and longer than W;
* **interleaved** — two instances of the subject stepped alternately (instances must be independent);
* **prefix hit** — ``snapshot()`` after a prompt, then two continuations from ``restore()``, one on the
  same instance after ``reset()`` and one on a fresh instance (where the subject has snapshots);
* **batch** — a ragged batch padded on the subject's padding side (where the subject has ``batch``);
* **layers** — after the longest stream, each layer's cache holds every entry the next query needs and
  nothing outside ``lastWindow W``, oldest first, each row equal to the full forward's (where the
  subject exposes ``kv_layers`` / ``full_kv``).

Each cell's cached rows are judged against ``full()`` of the same history by the subject's
:class:`~fuzz.gate.context.Judge`; the candidate's rows against the baseline's at the claim's level
(cached and uncached alike). A subject that raises on a valid call fails the cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import pyspec
from fuzz.gate.compare import agrees, within
from fuzz.gate.context import Context, Judge
from fuzz.gate.protocol import OPTIONAL, Handle, Subject, SubjectError
from fuzz.gate.verdict import FAIL, NA, PASS, Step


@dataclass
class Stream:
    history: list[int]
    rows: np.ndarray
    full: np.ndarray | None = None


@dataclass
class CellRun:
    """One cell on one subject: the streams it produced, or the error that stopped it."""

    cell: str
    what: str
    streams: list[Stream] = field(default_factory=list)
    error: str | None = None
    #: failures beyond the logits (the layer check): one line each
    extra: list[str] = field(default_factory=list)
    layers_checked: bool = False
    #: why the layers were not checked in a cell that checks them, else ""
    layers_missing: str = ""


@dataclass(frozen=True)
class Cell:
    name: str
    what: str
    run: Callable[[Subject, CellRun], None]
    #: optional protocol methods the cell needs
    needs: tuple[str, ...] = ()


def feed(h: Handle, calls: list[list[int]]) -> np.ndarray:
    """The calls of one stream: the first a prefill, then a single token a decode, several a chunk."""
    rows = [h.prefill(calls[0])]
    for c in calls[1:]:
        rows.append(h.decode(c[0])[None, :] if len(c) == 1 else h.prefill(c))
    return np.concatenate(rows)


def _flat(calls: list[list[int]]) -> list[int]:
    return [t for c in calls for t in c]


def calls_cell(name: str, what: str, calls: list[list[int]], layers: bool = False) -> Cell:
    def run(subject: Subject, out: CellRun) -> None:
        h = subject.new()
        rows = feed(h, calls)
        hist = _flat(calls)
        out.streams.append(Stream(hist, rows, h.full(hist)))
        if layers and h.has("kv_layers") and h.has("full_kv"):
            out.extra += layer_check(h, hist, subject.tolerance)
            out.layers_checked = True
        elif layers:
            out.layers_missing = "; each layer's cache is not observable (the subject has no kv_layers()/full_kv())"
    return Cell(name, what, run)


def layer_check(h: Handle, hist: list[int], tol: tuple[float, float]) -> list[str]:
    """Each layer holds every position the next query needs, nothing outside ``lastWindow W``, oldest first,
    and each held row equals the full forward's; one line per layer that does not."""
    n = len(hist)
    held, ref = h.kv_layers(), h.full_kv(hist)
    if len(held) != len(ref):
        return [f"kv_layers() lists {len(held)} layers, full_kv() {len(ref)}"]
    bad = []
    for i, (lay, r) in enumerate(zip(held, ref)):
        w = lay.get("window")
        pos = [int(p) for p in lay["positions"]]
        allowed = pyspec.last_window(n if w is None else int(w), list(range(n)))
        needed = list(range(n)) if w is None else list(range(max(0, n - int(w) + 1), n))
        if pos != sorted(set(pos)) or not set(needed) <= set(pos) or not set(pos) <= set(allowed):
            bad.append(f"layer {i} (window {w}) after {n} tokens holds positions {pos}; it must hold {needed} "
                       f"and nothing outside lastWindow {allowed}")
            continue
        for label in ("k", "v"):
            got = np.asarray(lay[label], dtype=np.float64).reshape(len(pos), -1)
            want = np.asarray(r[label], dtype=np.float64).reshape(n, -1)[pos]
            d = within(got, want, tol, pos, what=f"layer {i} cached {label.upper()}")
            if d:
                bad.append(d + " (against the full forward)")
                break
    return bad


def _interleaved(ctx: Context, tag: str, sfx: str) -> Cell:
    W = ctx.window
    a, b = ctx.tokens(tag + "/a", 2 * W + 1), ctx.tokens(tag + "/b", 2 * W - 1)

    def run(subject: Subject, out: CellRun) -> None:
        ha, hb = subject.new(), subject.new()
        ra, rb = [ha.prefill(a[:W + 1])], [hb.prefill(b[:W - 1])]
        for i in range(W):
            ra.append(ha.decode(a[W + 1 + i])[None, :])
            rb.append(hb.decode(b[W - 1 + i])[None, :])
        out.streams += [Stream(a, np.concatenate(ra), ha.full(a)), Stream(b, np.concatenate(rb), hb.full(b))]
    return Cell("interleaved" + sfx, f"two instances stepped alternately (prompts {W + 1} and {W - 1}, {W} decodes each)",
                run)


def _prefix(ctx: Context, tag: str, sfx: str) -> Cell:
    W = ctx.window
    p = ctx.tokens(tag + "/prefix", W + 2)
    s = [ctx.tokens(f"{tag}/suffix{i}", W // 2 + 2) for i in range(3)]

    def run(subject: Subject, out: CellRun) -> None:
        h = subject.new()
        prow = h.prefill(p)
        state = h.snapshot()
        for i, h2 in enumerate((h, h, None)):
            if i == 1:
                h.reset()
                h.restore(state)
            elif i == 2:
                h2 = subject.new()
                h2.restore(state)
            rows = [prow] + [h2.decode(t)[None, :] for t in s[i]]
            hist = p + s[i]
            out.streams.append(Stream(hist, np.concatenate(rows), h2.full(hist)))
    return Cell("prefix hit" + sfx, f"snapshot after a {W + 2}-token prompt; continue; reset + restore and continue; "
                              f"restore into a fresh instance and continue", run, ("snapshot", "restore"))


def _batch(ctx: Context, tag: str, sfx: str) -> Cell:
    W = ctx.window
    lens = [W + 3, W - 1, 2 * W + 1, 3]
    rows = [ctx.tokens(f"{tag}/row{i}", n) for i, n in enumerate(lens)]
    T = max(lens)
    chunks = [T - 2, 1, 1]

    def run(subject: Subject, out: CellRun) -> None:
        h = subject.new()
        got = h.batch(rows, chunks)
        for r, g in zip(rows, got):
            out.streams.append(Stream(r, g, h.full(r)))
    return Cell("batch" + sfx, f"a ragged batch of {len(rows)} rows (lengths {lens}) padded to {T}, fed in calls of "
                         f"{chunks} columns", run, ("batch",))


def lengths(ctx: Context) -> list[int]:
    W = ctx.window
    ls = {1, max(1, W - 1), W, W + 1, 2 * W + 1}
    if ctx.budget.extra_lengths:
        ls |= {2, 2 * W, 3 * W + 2}
    block = ctx.identities.get(ctx.baseline.spec, {}).get("block_size")
    if isinstance(block, int) and block > 1:
        ls |= {block - 1, block, block + 1, 2 * block + 1}
    return sorted(ls)


def cells(ctx: Context) -> list[Cell]:
    """Every cell of this run, in report order."""
    W, out = ctx.window, []
    D = W + 2 + ctx.budget.extra_decode
    for seed in range(ctx.budget.seeds):
        tag = f"parity/{seed}"
        sfx = f" (stream {seed + 1})" if ctx.budget.seeds > 1 else ""
        ls = lengths(ctx)
        for L in ls:
            t = ctx.tokens(f"{tag}/len{L}", L + D)
            calls = [t[:L]] + [[x] for x in t[L:]]
            out.append(calls_cell(f"length {L}{sfx}", f"a {L}-token prompt, then {D} decodes", calls,
                                  layers=(L == ls[-1])))
        schedules = [[W - 1, 2, W + 1], [W, W, 1], [2 * W + 3]]
        if ctx.budget.extra_lengths:
            schedules += [[1, W, 1, W + 1], [3] * (W // 3 + 3)]
        for sch in schedules:
            t = ctx.tokens(f"{tag}/chunks{sch}", sum(sch) + 2)
            calls, i = [], 0
            for k in sch:
                calls.append(t[i:i + k])
                i += k
            calls += [[x] for x in t[i:]]
            out.append(calls_cell(f"chunks {sch}{sfx}", f"prefill in chunks of {sch}, then 2 decodes", calls))
        out += [_interleaved(ctx, tag, sfx), _prefix(ctx, tag, sfx), _batch(ctx, tag, sfx)]
    return out


def run_cell(cell: Cell, subject: Subject) -> CellRun:
    out = CellRun(cell.name, cell.what)
    try:
        cell.run(subject, out)
    except SubjectError as e:
        out.error = f"{e.method} raised {e.what}"
    return out


def methods(subject: Subject) -> set[str]:
    """The optional protocol methods ``subject`` has (one instance is asked)."""
    h = subject.new()
    return {m for m in OPTIONAL if h.has(m)}


def self_diff(run: CellRun, judge: Judge) -> str | None:
    """The first way ``run`` disagrees with its own ``full()`` under ``judge`` (or raised), else ``None``."""
    if run.error:
        return run.error
    for s in run.streams:
        d = judge(s.rows, s.full, list(range(len(s.history))))
        if d:
            return d
    if run.extra and judge.layers:
        return run.extra[0]
    return None


def pair_diff(cand: CellRun, base: CellRun, ctx: Context, uncached: bool = False) -> str | None:
    if cand.error or base.error:
        return None  # judged on the subject that raised
    for c, b in zip(cand.streams, base.streams):
        got, ref = (c.full, b.full) if uncached else (c.rows, b.rows)
        d = agrees(got, ref, ctx.claim, ctx.baseline.tolerance, list(range(len(c.history))))
        if d:
            return d
    return None


def run_all(ctx: Context) -> dict[str, dict[str, CellRun | str]]:
    """Every cell on both subjects: spec -> cell name -> its run, or why it is not applicable."""
    out: dict[str, dict[str, Any]] = {}
    for _, subject in ctx.roles():
        if subject.spec in out:
            continue
        res: dict[str, Any] = {}
        has = methods(subject)
        for cell in cells(ctx):
            lack = [m for m in cell.needs if m not in has]
            res[cell.name] = (f"not applicable: the subject has no {', '.join(m + '()' for m in lack)}" if lack
                              else run_cell(cell, subject))
        out[subject.spec] = res
    return out


def step4(ctx: Context) -> Step:
    step = Step(4)
    ctx.cells = run_all(ctx)
    claim = ctx.claim
    for role, subject in ctx.roles():
        judge = ctx.judge(role, subject)
        for name, run in ctx.cells[subject.spec].items():
            who = f"{role} {subject.spec}"
            if isinstance(run, str):
                step.add(f"cached vs uncached · {name}", who, NA, run)
                continue
            d = self_diff(run, judge)
            if not judge.checked:
                step.add(f"cached vs uncached · {name}", who, NA, f"{judge.label}; {run.what}")
            elif d:
                step.add(f"cached vs uncached · {name}", who, FAIL, f"{run.what}: {d}")
            else:
                layer = ("; each layer's cache checked against the full forward" if judge.layers else
                         "; each layer's cache read but not judged (an approximate candidate)") if run.layers_checked \
                    else run.layers_missing
                step.add(f"cached vs uncached · {name}", who, PASS, f"{run.what}: {judge.label}{layer}")
    base_runs, cand_runs = ctx.cells[ctx.baseline.spec], ctx.cells[ctx.candidate.spec]
    for name, crun in cand_runs.items():
        brun = base_runs.get(name)
        who = f"candidate {ctx.candidate.spec}"
        for uncached in (False, True):
            label = f"candidate vs baseline ({'uncached' if uncached else 'cached'}) · {name}"
            if isinstance(crun, str) or isinstance(brun, str) or brun is None:
                step.add(label, who, NA, crun if isinstance(crun, str) else str(brun))
            elif not claim.checked:
                step.add(label, who, NA, "a task claim needs the user's own evaluation")
            elif crun.error or brun.error:
                step.add(label, who, NA, "a subject raised in this cell (judged above)")
            else:
                d = pair_diff(crun, brun, ctx, uncached)
                step.add(label, who, FAIL if d else PASS, d or f"{crun.what}: agree at {claim.text}")
    return step.settle(f"cached = uncached on both subjects and candidate = baseline at {claim.text}, "
                       f"in every cell", "nothing could be compared")
