"""``kvwindow mutants``: a campaign against every mutant of the catalogue, and the kill table."""

from __future__ import annotations

from pathlib import Path

from fuzz import seeds as seedstore
from fuzz.cli.checks import UsageError, make_console
from fuzz.config import WINDOW_BOUND, CampaignConfig


def cmd_mutants(args) -> int:
    from fuzz.killtable import print_kill_table, run_mutants, select

    try:
        chosen = select(args.only)
    except KeyError as e:
        raise UsageError(str(e.args[0])) from e
    if args.list:
        for m in chosen:
            print(f"{m.name:30s} {m.kind:8s} {m.bug_class}\n{'':30s} {m.description}\n{'':30s} {m.reference}")
        return 0
    repeats = args.repeats if args.repeats is not None else (5 if args.baseline else 1)
    if repeats < 1:
        raise UsageError(f"--repeats must be >= 1, got {repeats}")
    if not 1 <= args.window_max <= WINDOW_BOUND:
        raise UsageError(f"--window-max must be between 1 and {WINDOW_BOUND}, got {args.window_max}")
    console = make_console()
    budget = f"{args.time_per:g}s" + (f" / {args.max_examples} examples" if args.max_examples else "")
    console.print(f"kvwindow mutants: {len(chosen)} mutant(s), budget {budget} per run"
                  + (f", {repeats} campaign seeds ({args.seed}..{args.seed + repeats - 1})" if repeats > 1 else "")
                  + (", with the uniform-random baseline" if args.baseline else ""))

    def cost(r) -> str:
        return f"{r['examples']}" if r["killed"] else f">{r['examples_run']}"

    def progress(k) -> None:
        if not k.available:
            console.print(f"  {k.name}: unavailable ({k.reason})")
            return
        line = f"  {k.name}: biased " + " ".join(cost(r) for r in k.biased_runs)
        if args.baseline:
            line += "; uniform " + " ".join(cost(r) for r in k.baseline_runs)
        console.print(line + " examples")

    config = CampaignConfig(seconds=args.time_per, max_examples=args.max_examples, window_max=args.window_max,
                            campaign_seed=args.seed, seeds_dir=args.save_seeds, save_seeds=args.save_seeds is not None)
    results = run_mutants(config, mode="both" if args.baseline else "biased", repeats=repeats, mutants=chosen,
                          on_result=progress)
    print_kill_table(console, results, args.baseline)
    if args.json:
        seedstore.atomic_write_json(Path(args.json), [k.to_json() for k in results])
    available = [k for k in results if k.available]
    return 0 if available and all(k.killed_every_repeat for k in available) else 1


