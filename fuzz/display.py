"""Campaign progress: a live rich table on a terminal, plain periodic lines in CI logs.

Both displays take the same calls — ``start(names)``, ``update(result)``,
``stop()`` — and :func:`summary` prints the closing table either way (rich
renders it without colour when stdout is not a terminal).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Iterable

from rich.console import Console
from rich.live import Live
from rich.table import Table

from fuzz.oracle import PHASES
from fuzz.results import TargetResult

#: Short column headers for the six phases.
PHASE_HEAD = {
    "not-yet-full": "<W",
    "exactly-full": "=W",
    "first-eviction": "W+1",
    "steady-state": "steady",
    "chunk>W": "chunk>W",
    "after-reset": "reset",
}


def _status(r: TargetResult | None) -> str:
    """``FAILED`` (a finding), ``FAULT`` (a harness fault stopped it), ``ok``, ``interrupted``, or what it
    is doing: ``running``, ``shrinking``/``reducing`` a failure."""
    if r is None:
        return "waiting"
    if r.failures:
        return "FAILED"
    if r.known_reproduced:
        return "KNOWN"
    if r.faults:
        return "FAULT"
    if r.done:
        return "interrupted" if r.interrupted else "ok"
    return r.phase if r.phase in ("shrinking", "reducing") else "running"


def _table(names: Iterable[str], results: dict[str, TargetResult], title: str | None = None) -> Table:
    t = Table(title=title, title_justify="left", show_lines=False)
    for col in ("target", "status", "phases", "examples", "ex/s", "tokens", "tokens/s", "fail", "known"):
        t.add_column(col, justify="left" if col in ("target", "status") else "right")
    for p in PHASES:
        t.add_column(PHASE_HEAD[p], justify="right")
    for n in names:
        r = results.get(n)
        st = _status(r)
        style = {"FAILED": "bold red", "KNOWN": "red", "FAULT": "bold magenta", "ok": "green",
                 "running": "yellow"}.get(st, "")
        if r is None:
            t.add_row(n, st, *[""] * (7 + len(PHASES)))
            continue
        t.add_row(n, f"[{style}]{st}[/]" if style else st, phases_cell(r), f"{r.examples:,}", f"{r.examples_per_s:,.0f}",
                  f"{r.tokens:,}", f"{r.tokens_per_s:,.0f}", str(len(r.failures)), known_cell(r),
                  *[_phase_cell(r.phases.get(p, 0)) for p in PHASES])
    return t


def phases_cell(r: TargetResult) -> str:
    """Campaign phases that ran / that apply to the target (``fuzz.phases.ORDER``), e.g. ``6/6``."""
    applies = [rec for rec in r.phases_run.values() if rec.get("status") != "n/a"]
    return f"{sum(rec.get('status') == 'ran' for rec in applies)}/{len(applies)}" if applies else ""


def known_cell(r: TargetResult) -> str:
    """Cases that hit a known finding: ``R`` reproduced, ``N`` not reproduced, ``S`` skipped (zeros left out)."""
    total = {k: sum(c.get(k, 0) for c in r.known.values()) for k in ("reproduced", "not_reproduced", "skipped")}
    return " ".join(f"{tag}{total[k]}" for tag, k in (("R", "reproduced"), ("N", "not_reproduced"), ("S", "skipped"))
                    if total[k])


def _cases(n: int) -> str:
    return f"{n} case" + ("" if n == 1 else "s")


def known_lines(results: list[TargetResult]) -> list[str]:
    """One line per known finding the campaign's cases hit: reproduced (by which targets, how many cases, how
    many more were left out before running once it had reproduced ``--known-repeats`` times), where it is
    written up and its upstream thread; one per finding that no target reproduced (like a strict xfail
    that passed); and one per target for ``--skip-known``."""
    out = []
    findings: dict[str, dict] = {}
    for r in results:
        for fid, c in r.known.items():
            f = findings.setdefault(fid, {"rep": [], "not": [], "cases": 0, "passed": 0, "left": 0, "link": {}})
            f["link"] = f["link"] or r.known_links.get(fid, {})
            if "release" not in f["link"]:
                f["link"] = dict(f["link"], release=f"transformers {r.versions.get('transformers', '?')}")
            if c.get("reproduced"):
                f["rep"].append(r.name)
                f["cases"] += c["reproduced"]
            elif c.get("not_reproduced"):
                f["not"].append(r.name)
            f["passed"] += c.get("not_reproduced", 0)
            f["left"] += c.get("skipped", 0)
    for fid, f in findings.items():
        link, release = f["link"], f["link"]["release"]
        doc, upstream = link.get("doc", f"docs/findings/{fid}.md"), link.get("upstream") or "none found"
        if f["rep"]:
            left = f", {f['left']:,} more left out before running" if f["left"] else ""
            out.append(f"known finding {fid} reproduced on {release} by {', '.join(f['rep'])} "
                       f"({_cases(f['cases'])}{left}): {doc}; upstream: {upstream}")
            if link.get("probe_replay"):  # one of the cases was the availability probe's (Campaign.probe_crashes)
                out.append(f"  died at the availability probe; to replay its case: {link['probe_replay']}")
        if f["not"]:
            out.append(f"finding {fid} not reproduced on {release} by {', '.join(f['not'])} "
                       f"({_cases(f['passed'])} that hit it passed): {doc}")
    for r in results:
        skipped = {fid: c.get("skipped", 0) for fid, c in r.known.items() if c.get("skipped")}
        if skipped and not any(c.get("reproduced") or c.get("not_reproduced") for c in r.known.values()):
            out.append(f"--skip-known: {r.name} skipped {_cases(sum(skipped.values()))} that hit known findings ("
                       + ", ".join(f"{fid}: {n}" for fid, n in skipped.items()) + ")")
    return out


def _phase_cell(count: int) -> str:
    return f"{count:,}" if count else "[red]-[/]"


class RichDisplay:
    """A live table, refreshed a few times a second."""

    def __init__(self, console: Console):
        self.console = console
        self.names: list[str] = []
        self.results: dict[str, TargetResult] = {}
        self.live: Live | None = None
        self.lock = threading.Lock()

    def start(self, names: list[str], header: str = "") -> None:
        self.names = list(names)
        if header:
            self.console.print(header)
        self.live = Live(get_renderable=self._render, console=self.console, refresh_per_second=4, transient=False)
        self.live.start()

    def _render(self) -> Table:
        with self.lock:
            return _table(self.names, dict(self.results), "kvwindow fuzz")

    def update(self, r: TargetResult) -> None:
        with self.lock:
            self.results[r.name] = r

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


class PlainDisplay:
    """One line per running target every ``interval`` seconds, and one when each finishes."""

    def __init__(self, out=None, interval: float | None = None):
        self.out = out or sys.stdout
        env = os.environ.get("KVWINDOW_PROGRESS_INTERVAL")
        self.interval = interval if interval is not None else float(env) if env else 10.0
        self.last: dict[str, float] = {}
        self.finished: set[str] = set()
        self.phase: dict[str, str] = {}
        self.start_time = time.monotonic()

    def start(self, names: list[str], header: str = "") -> None:
        if header:
            print(header, file=self.out, flush=True)

    def _line(self, r: TargetResult) -> str:
        cov = " ".join(f"{PHASE_HEAD[p]}={r.phases.get(p, 0)}" for p in PHASES)
        known = known_cell(r)
        return (f"[{time.monotonic() - self.start_time:6.1f}s] {r.name:16s} {_status(r):8s} "
                f"examples={r.examples} ({r.examples_per_s:.0f}/s) tokens={r.tokens} ({r.tokens_per_s:.0f}/s) "
                f"failures={len(r.failures)}{' known=' + known.replace(' ', ',') if known else ''} {cov}")

    def update(self, r: TargetResult) -> None:
        now = time.monotonic()
        if r.done:
            if r.name not in self.finished:
                self.finished.add(r.name)
                print(self._line(r), file=self.out, flush=True)
            return
        if r.phase != self.phase.get(r.name, "fuzzing"):  # a failure found: say so at once
            self.phase[r.name] = r.phase
            self.last[r.name] = now
            what = (f" (finding {len(r.failures)} saved; exploring on for other findings)" if r.phase == "fuzzing"
                    else f" ({r.phase} a failure; Ctrl-C keeps the smallest case so far)")
            print(self._line(r) + what, file=self.out, flush=True)
            return
        if now - self.last.get(r.name, self.start_time) >= self.interval:
            self.last[r.name] = now
            print(self._line(r), file=self.out, flush=True)

    def stop(self) -> None:
        pass


def make_display(console: Console | None = None, plain: bool | None = None):
    """Rich live table on a terminal, plain lines otherwise (or when ``plain``)."""
    console = console or Console()
    if plain is None:
        plain = not console.is_terminal
    return PlainDisplay(console.file) if plain else RichDisplay(console)


def phase_lines(results: list[TargetResult], goal: int | None = None) -> list[str]:
    """Which campaign phases did not apply, grouped by phase and reason (one line each), and for every target
    short of the coverage goal (``goal`` examples and every phase that applies) why (:func:`fuzz.schedule.goal_note`)."""
    from fuzz.phases import ORDER

    # (phases, reason) -> targets: one line per reason, however many phases share it (a paged target's six
    # ring phases say the same thing).
    groups: dict[tuple[tuple[str, ...], str], list[str]] = {}
    for r in results:
        by_why: dict[str, list[str]] = {}
        for name in ORDER:
            rec = r.phases_run.get(name)
            if rec is not None and rec.get("status") == "n/a":
                by_why.setdefault(rec.get("why", ""), []).append(name)
        for why, names in by_why.items():
            groups.setdefault((tuple(names), why), []).append(r.name)
    out = [f"phase{'s' if len(ph) > 1 else ''} {', '.join(ph)} {'do' if len(ph) > 1 else 'does'} not apply to "
           f"{', '.join(names)}: {why}" for (ph, why), names in groups.items()]
    if goal is not None:
        from fuzz.schedule import goal_note

        for r in results:
            note = goal_note(r, goal)
            if note:
                out.append(f"coverage: {r.name}: {note}")
    return out


#: What each paged efficiency observation means (reported, not failed).
EFFICIENCY_TEXT = {
    "blocks_beyond_rule": "checks in which a sequence held a block the freeing rule would have released",
    "hits_missed": "prefix hits shorter than the longest valid one (against a pool that kept every block)",
    "exhausted_early": "appends refused as pool-exhausted where the spec's sequential rule had a free block",
}


def efficiency_lines(results: list[TargetResult]) -> list[str]:
    """One line per paged target and efficiency observation, with the first case that made it."""
    out = []
    for r in results:
        for kind, n in sorted(r.efficiency.items()):
            sample = r.efficiency_samples.get(kind, {})
            at = f" at op #{sample['op']}" if sample.get("op") is not None else ""
            out.append(f"efficiency: {r.name}: {n:,} {EFFICIENCY_TEXT.get(kind, kind)} (reported, not failed); "
                       f"first{at} of: {sample.get('text', '?')[:300]}")
    return out


def summary(console: Console, results: list[TargetResult], title: str = "kvwindow fuzz: summary",
            names: Iterable[str] | None = None, goal: int | None = None) -> None:
    """The closing table (every name in ``names``, run or not), coverage notes (boundary phases never exercised,
    campaign phases that do not apply, targets short of ``goal``), what each bulk phase checked, and one line
    per harness fault and warning."""
    by_name = {r.name: r for r in results}
    names = list(dict.fromkeys([*(names or []), *by_name]))
    console.print(_table(names, by_name, title))
    missed = {r.name: [p for p in PHASES if not r.phases.get(p)] for r in results
              if not r.failures and not r.faults and "paged-tours" not in r.phases_run}
    for name, ps in missed.items():
        if ps and any(r.examples for r in results if r.name == name):
            console.print(f"note: {name} never exercised {', '.join(ps)}")
    for line in phase_lines(results, goal):
        console.print(line, markup=False)
    if any(r.known for r in results):
        console.print("known: cases that hit a known finding (docs/findings/): R reproduced, N not reproduced, "
                      "S skipped")
        for line in known_lines(results):
            console.print(line)
    for line in efficiency_lines(results):
        console.print(line, markup=False)
    for r in results:
        if r.bulk_tokens:
            console.print(f"bulk phase: {r.name}: {r.bulk_tokens:,} tokens through ringkv_trace, every step "
                          f"checked, in {r.bulk_seconds:.2f} s (not counted in tokens)", markup=False)
    for line in kernel_lines(results):
        console.print(line, markup=False)
    for r in results:
        for f in r.faults:
            console.print(f"HARNESS FAULT {r.name}: {f}", markup=False)
    for w in dict.fromkeys(w for r in results for w in r.warnings):
        console.print(f"warning: {w}", markup=False)
    for r in results:
        for x in r.slow:
            console.print(slow_line(x), markup=False)
    not_run = [n for n in names if n not in by_name]
    if not_run:
        console.print(f"not run: {', '.join(not_run)}", markup=False)


def kernel_lines(results: list[TargetResult]) -> list[str]:
    """One line per kernel target (``triton:*``, ``gpu:*``): its kernel launches and calls/s over the cases that ran
    to the end (a launch costs seconds under Triton's interpreter: what a campaign's budget buys)."""
    return [f"kernel calls: {r.name}: {r.kernel_calls:,} launches in {r.kernel_seconds:.1f} s of cases: "
            f"{r.kernel_calls_per_s:.2f} calls/s" for r in results if r.kernel_calls]


def slow_line(x: dict) -> str:
    """One line for a case that timed out once and ended when run again alone (``TargetResult.slow``)."""
    return (f"slow, not a finding: {x['target']}: {x['request']} {x['where']} ran past {x['limit']:g} s, then ended "
            f"in {x['rerun_seconds']:g} s when run again alone (a busy machine or a slow op; --op-timeout sets "
            "the limit)")
