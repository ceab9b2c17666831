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
    for col in ("target", "status", "examples", "ex/s", "tokens", "tokens/s", "fail", "known"):
        t.add_column(col, justify="left" if col in ("target", "status") else "right")
    for p in PHASES:
        t.add_column(PHASE_HEAD[p], justify="right")
    for n in names:
        r = results.get(n)
        st = _status(r)
        style = {"FAILED": "bold red", "KNOWN": "red", "FAULT": "bold magenta", "ok": "green",
                 "running": "yellow"}.get(st, "")
        if r is None:
            t.add_row(n, st, *[""] * (6 + len(PHASES)))
            continue
        t.add_row(n, f"[{style}]{st}[/]" if style else st, f"{r.examples:,}", f"{r.examples_per_s:,.0f}",
                  f"{r.tokens:,}", f"{r.tokens_per_s:,.0f}", str(len(r.failures)), known_cell(r),
                  *[_phase_cell(r.phases.get(p, 0)) for p in PHASES])
    return t


def known_cell(r: TargetResult) -> str:
    """Cases that hit a known finding: ``R`` reproduced, ``N`` not reproduced, ``S`` skipped (zeros left out)."""
    total = {k: sum(c.get(k, 0) for c in r.known.values()) for k in ("reproduced", "not_reproduced", "skipped")}
    return " ".join(f"{tag}{total[k]}" for tag, k in (("R", "reproduced"), ("N", "not_reproduced"), ("S", "skipped"))
                    if total[k])


def _cases(n: int) -> str:
    return f"{n} case" + ("" if n == 1 else "s")


def known_lines(results: list[TargetResult]) -> list[str]:
    """One line per target and known finding its cases hit: reproduced (a finding the campaign reports),
    not reproduced (like a strict xfail that passed), or skipped (``--skip-known``)."""
    out = []
    for r in results:
        release = r.versions.get("transformers", "?")
        for fid, c in r.known.items():
            doc = f"docs/findings/{fid}.md"
            if c.get("reproduced"):
                out.append(f"known finding {fid} reproduced on transformers {release} by {r.name} "
                           f"({_cases(c['reproduced'])}): {doc}")
            if c.get("not_reproduced"):
                out.append(f"finding {fid} not reproduced on transformers {release} by {r.name} "
                           f"({_cases(c['not_reproduced'])} that hit it passed)")
        skipped = {fid: c.get("skipped", 0) for fid, c in r.known.items() if c.get("skipped")}
        if skipped:
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
            print(self._line(r) + f" ({r.phase} a failure; Ctrl-C keeps the smallest case so far)",
                  file=self.out, flush=True)
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


def summary(console: Console, results: list[TargetResult], title: str = "kvwindow fuzz: summary",
            names: Iterable[str] | None = None) -> None:
    """The closing table (every name in ``names``, run or not), coverage notes, what each bulk phase checked,
    and one line per harness fault and warning."""
    by_name = {r.name: r for r in results}
    names = list(dict.fromkeys([*(names or []), *by_name]))
    console.print(_table(names, by_name, title))
    missed = {r.name: [p for p in PHASES if not r.phases.get(p)] for r in results if not r.failures and not r.faults}
    for name, ps in missed.items():
        if ps and any(r.examples for r in results if r.name == name):
            console.print(f"note: {name} never exercised {', '.join(ps)}")
    if any(r.known for r in results):
        console.print("known: cases that hit a known finding (docs/findings/): R reproduced, N not reproduced, "
                      "S skipped")
        for line in known_lines(results):
            console.print(line)
    for r in results:
        if r.bulk_tokens:
            console.print(f"bulk phase: {r.name}: {r.bulk_tokens:,} tokens through ringkv_trace, every step "
                          f"checked, in {r.bulk_seconds:.2f} s (not counted in tokens)", markup=False)
    for r in results:
        for f in r.faults:
            console.print(f"HARNESS FAULT {r.name}: {f}", markup=False)
    for w in dict.fromkeys(w for r in results for w in r.warnings):
        console.print(f"warning: {w}", markup=False)
    not_run = [n for n in names if n not in by_name]
    if not_run:
        console.print(f"not run: {', '.join(not_run)}", markup=False)
