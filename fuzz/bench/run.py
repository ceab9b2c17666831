"""``kvwindow bench`` — measured throughput, the campaign beside a hand-written state machine,
time-to-kill and decode curves, with plots.

One command measures what a harness costs and what it finds, and draws it
(:mod:`fuzz.bench.sections`):

1. **throughput** — spec-checked tokens/s and examples/s per target, in stateful
   mode (a campaign through :func:`fuzz.campaign.fuzz_target`, one start window
   ``W`` per cell) and in bulk mode (the C ring's trace call), over ``W``;
2. **peer** — the ``ring-c`` campaign's tokens/s over the tokens/s of a plain
   Hypothesis state machine over the same C ring written as a user would
   (:mod:`fuzz.bench.peer`), at ``W`` in {8, 16, 64};
2b. **isolation** — the ``ring-c`` campaign's tokens/s in this process over its tokens/s in an
   isolated child (:mod:`fuzz.targets.isolated`, the default for native targets), at ``W`` = 16;
3. **mutants** — examples- and seconds-to-kill per mutant, boundary-biased
   strategies versus the uniform-random baseline;
4. **decode** — per-token decode time versus ``t`` for the ring-buffer cache and
   for full recompute, and KV bytes held versus the formula
   ``2 · layers · kv_heads · head_dim · W · bytes`` (:mod:`fuzz.bench.decode`);
5. **gpu** — the CUDA decode-attention kernel (:mod:`fuzz.bench.gpu`), or one line
   saying why it was skipped;
6. **long** — the bulk phase's share of a default ``ring-c`` campaign's time and tokens, and
   what the long tour (past 2**15, 2**16 and 70 000) costs a campaign.

Every comparison is measured side by side in the same run, repeat by repeat
(interleaved, so a noisy neighbour slows both sides of a ratio alike), and
reported as a ratio with min / median / max over the repeats. A section whose
implementation is missing on this machine is reported as ``not available:
<reason>`` instead of failing the run.

``kvwindow bench [--quick] [--only SECTION] [--out DIR]`` writes ``report.json``,
``report.md`` and PNG plots into ``DIR`` (default ``bench-out/``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from fuzz.bench import sections
from fuzz.bench.budgets import BUDGETS, Budget
from fuzz.bench.plots import plot_decode, plot_mutants, plot_throughput
from fuzz.bench.report import render_markdown
from fuzz.bench.summary import plain
from fuzz.machine import machine_info
from impl.errors import Unavailable

DEFAULT_OUT = "bench-out"
REPORT_VERSION = 2


def run_bench(budget: Budget, out: Path, *, command: str, log: Callable[[str], None] = print,
              only: tuple[str, ...] | None = None) -> dict:
    """Run every section of :data:`fuzz.bench.sections.SECTIONS` (or those in ``only``) under ``budget``;
    write ``report.json``, ``report.md`` and the plots into ``out``; return the report."""
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    rep: dict[str, Any] = {"version": REPORT_VERSION, "command": command, "budget": asdict(budget),
                           "machine": machine_info(), "sections": {}, "plots": {}, "errors": []}
    for name, fn in sections.SECTIONS.items():
        if only is not None and name not in only:
            rep["sections"][name] = {"status": "skipped: not selected (--only)", "seconds": 0.0}
            continue
        log(f"[{time.monotonic() - t0:6.1f}s] {name} ...")
        t1 = time.monotonic()
        try:
            sec = fn(budget, log)
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
             ("decode", "decode.png", plot_decode),
             ("bugs", "bugs.png", lambda s, p: __import__("fuzz.bench.bugs", fromlist=["plot_bugs"]).plot_bugs(s, p)))
    for name, fname, fn in plots:
        sec = rep["sections"].get(name, {})
        if sec.get("status") != "ok" or not sec.get("rows"):
            continue
        try:
            fn(sec, out / fname)
            rep["plots"][name] = fname
        except Exception as e:  # noqa: BLE001
            rep["errors"].append(f"plot {name}: {type(e).__name__}: {e}")
            log(traceback.format_exc())
    rep["wall_s"] = time.monotonic() - t0
    rep = plain(rep)
    (out / "report.json").write_text(json.dumps(rep, indent=1) + "\n")
    (out / "report.md").write_text(render_markdown(rep) + "\n")
    return rep


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kvwindow bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a short run (about 30 s on 2 cores)")
    p.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)  # test suite only: seconds
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT}/)")
    p.add_argument("--only", action="append", choices=list(sections.SECTIONS), metavar="SECTION",
                   help=f"run only this section (repeatable): {', '.join(sections.SECTIONS)}")
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
    rep = run_bench(budget, out, command=command.strip(), log=log, only=tuple(args.only) if args.only else None)
    print(f"kvwindow bench: {budget.name} run in {rep['wall_s']:.1f} s -> {out / 'report.md'}, "
          f"{out / 'report.json'}" + "".join(f", {out / p}" for p in rep["plots"].values()))
    for name, sec in rep["sections"].items():
        if sec.get("status") != "ok":
            print(f"  {name}: {sec['status']}")
    for name in ("peer", "isolation"):
        for r in rep["sections"].get(name, {}).get("ratios", []):
            print(f"  {r['label']}: median {r['median']:.2f} (min {r['min']:.2f}, max {r['max']:.2f}, n={r['n']})")
    for r in rep["sections"].get("long", {}).get("rows", []):
        share = r["bulk_time_share"]["median"], r["bulk_token_share"]["median"]
        bulk = (f"bulk phase {100 * share[0]:.1f}% of the time, {100 * share[1]:.1f}% of the tokens; "
                if share[0] is not None and r["bulk_tokens"]["median"] else "no bulk phase; ")
        print(f"  {r['target']} default campaign: {bulk}long tour {r['long_tour_s']['median']:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
