"""``kvwindow fuzz``: resolve the targets, run the campaign (in process or in workers), print the summary,
every finding with its seed and replay command, and write the report."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from fuzz import seeds as seedstore
from fuzz.cli.checks import UsageError, check_fuzz_flags, isolation, make_console, resolve_all, seed_dir, writable_dir, \
    writable_file
from fuzz.config import CampaignConfig
from fuzz.machine import machine_info
from fuzz.replay import replay_flags
from fuzz.targets import registry

EXIT_OK, EXIT_FINDING, EXIT_USAGE, EXIT_HARNESS, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def list_targets() -> int:
    for t in registry.list_targets():
        status = "available" if t.available else f"unavailable: {t.reason}"
        print(f"{t.name:16s} {'cpu' if t.cpu else 'gpu'}  {status}")
    for prefix, (_, what) in registry.FAMILIES.items():
        arg, _, doc = what.partition(", ")
        print(f"{prefix + arg:16s} cpu  {doc}")
    return 0


def print_failure(r, f, config: CampaignConfig) -> None:
    print(f"\nFAILED {r.name} ({f.kind}): {f.error.splitlines()[0]}")
    print(f"  shrunk case: {f.case}")
    if f.signature:
        print(f"  signature: {f.signature}")
    if f.repeats or f.left_out:
        print(f"  the same signature again: {f.repeats} later case(s) failed with it (not reported again), "
              f"{f.left_out} left out before they ran")
    if f.note:
        print(f"  note: {f.note}")
    if f.moved_aside:
        print(f"  a corrupt file held this seed's id; moved aside to {f.moved_aside}")
    if f.seed_path:
        print(f"  seed {'saved' if f.created else 'already stored'}: {f.seed_path}")
        print(f"  replay: {f.replay}")
    elif f.seed_error:
        doc = seedstore.Seed(f.case, {"target": r.name, "kind": f.kind, "error": f.error[:500]}).to_json()
        print(f"  seed NOT saved: {f.seed_error}; here it is in full:")
        print("    " + seedstore.format_seed(doc).replace("\n", "\n    "))
        print(f"  to keep and replay it: kvwindow seeds add {seeds_add_flags(f.case)} "
              f"--seeds-dir DIR && kvwindow replay DIR/{f.case.id}.json --target {r.name}"
              f"{replay_flags(config, r.name)}")


def seeds_add_flags(case) -> str:
    """The ``kvwindow seeds add`` flags that store ``case`` as it is (its id included)."""
    if getattr(case, "paged", False):
        return f"--paged {case.window},{case.block_size},{case.num_blocks},{case.width} --ops '{case.text}'"
    flags = f"--window {case.window} --ops '{case.text}'"
    if case.width is not None:
        flags += f" --width {case.width}"
    if case.dtype is not None:
        flags += f" --dtype {case.dtype}"
    return flags + "".join(f" --instance {inst.text}" for inst in case.instances)


def cmd_fuzz(args) -> int:
    if args.list_targets:
        return list_targets()
    from fuzz import workers
    from fuzz.display import make_display
    from fuzz.targets import isolated

    check_fuzz_flags(args)
    listed: dict = {}  # the default campaign's targets, built once while listing them
    names = tuple(dict.fromkeys(args.target or registry.default_targets(listed)))
    if not names:
        raise UsageError("no target is available here (see kvwindow fuzz --list-targets)")
    seeds_dir = seed_dir(args)
    writable_dir(seeds_dir, "--seeds-dir", "" if args.seeds_dir else " (the default; choose one with --seeds-dir)")
    if args.report:
        writable_file(args.report, "--report")
    db = args.db or workers.DEFAULT_DB
    if "://" not in db:
        writable_dir(db, "--db")
    config = CampaignConfig(targets=names, seconds=args.time, max_examples=args.max_examples,
                            window_max=args.window_max, campaign_seed=args.seed, workers=args.workers,
                            db=db, seeds_dir=str(seeds_dir), width=args.width, dtype=args.dtype, long=args.long,
                            accept_known=args.accept_known, skip_known=args.skip_known,
                            stop_on_first=args.stop_on_first,
                            known_repeats=None if args.known_repeats < 0 else args.known_repeats, **isolation(args))
    try:
        database = workers.open_database(config.db)  # a bad --db fails here, before anything runs
    except workers.DatabaseError as e:
        raise UsageError(str(e)) from e
    for d in {seeds_dir, Path(args.report).parent if args.report else seeds_dir}:
        seedstore.clean_stale_temps(d)
    if config.workers > 1 and not args.target:
        targets = []  # listed and probed just now; every worker builds its own (nothing to check twice)
    else:
        targets = resolve_all(names, config, listed)  # bad targets fail here, before anything runs
    shown = [t.name for t in targets] or list(names)
    console = make_console()
    display = make_display(console, plain=True if args.plain else None)
    started = time.time()
    header = (f"kvwindow fuzz: {len(shown)} target(s) for {config.seconds:g}s, {config.workers} worker(s), "
              f"db {config.db}, seed {config.campaign_seed}")
    pids, errors = [os.getpid()], []
    stop = workers.StopRequest()
    with stop:  # from here on a signal only asks to stop: the summary, the seeds and the report still get written
        try:
            display.start(shown, header)
            if config.workers == 1:
                results, interrupted = workers.run_in_process(config, targets, database=database,
                                                              on_update=display.update, stop=stop)
            else:
                for t in targets:  # every worker builds its own
                    isolated.close(t)
                results, interrupted, pids, errors = workers.run_workers(config, on_update=display.update,
                                                                         stop=stop)
        finally:
            display.stop()
            for t in targets:
                isolated.close(t)
        return finish(args, config, console, results, interrupted, pids, errors, started, shown, stop.signum)


def finish(args, config: CampaignConfig, console, results, interrupted: bool, pids: list[int], errors: list[str],
            started: float, shown: list[str], signum: int | None) -> int:
    """The summary, every finding with its seed and replay command, the report; returns the exit code."""
    from fuzz.display import summary

    failed = [r for r in results if r.failures]
    faults = [(r.name, f) for r in results for f in r.faults]
    faults += [("(workers)", e) for e in errors if not any(e in f for _, f in faults)]
    known = [r for r in results if r.known_reproduced]
    finding = failed or (known and not config.accept_known)
    rc = EXIT_FINDING if finding else EXIT_HARNESS if faults else EXIT_INTERRUPTED if interrupted else EXIT_OK
    from fuzz.schedule import GOAL_EXAMPLES

    summary(console, results, names=shown, goal=GOAL_EXAMPLES if len(config.targets) > 1 else None)
    if known and not config.accept_known:
        print("kvwindow: known findings reproduced: exit 1 (this is the strict mode CI gates use; --accept-known "
              "reports them and exits 0 unless something new is found)")
    elif known:
        print("kvwindow: known findings reproduced and accepted (--accept-known): nothing new was found"
              if not failed else "kvwindow: known findings accepted (--accept-known); the failures below are new")
    for e in errors:
        print(f"worker error: {e}")
    if interrupted:
        why = {2: "Ctrl-C", 15: "SIGTERM"}.get(signum or 2, "a signal")
        print(f"kvwindow: interrupted ({why}); results so far are kept"
              + (f" (report: {args.report})" if args.report else ""))
    for r in failed:
        if len(r.failures) > 1:
            print(f"\n{r.name}: {len(r.failures)} distinct findings (one per signature, each with its own seed)")
        for f in r.failures:
            print_failure(r, f, config)
    if args.report:
        warnings = list(dict.fromkeys(w for r in results for w in r.warnings))
        report = {
            "kvwindow": "fuzz report",
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "seconds": round(time.time() - started, 3),
            "exit_code": rc,
            "interrupted": interrupted,
            "config": config.to_json(),
            "machine": machine_info(),
            "worker_pids": pids,
            "targets": [r.to_json() for r in results],
            "not_run": [n for n in shown if n not in {r.name for r in results}],
            "totals": {"examples": sum(r.examples for r in results), "tokens": sum(r.tokens for r in results),
                       "failures": sum(len(r.failures) for r in results), "harness_faults": len(faults)},
            "failures": [f.to_json() for r in results for f in r.failures],
            "harness_faults": [{"target": n, "reason": f} for n, f in faults],
            "worker_errors": errors,
            "warnings": warnings,
            "slow": [x for r in results for x in r.slow],  # timed out once, ended alone: not findings
        }
        try:
            Path(args.report).parent.mkdir(parents=True, exist_ok=True)
            seedstore.atomic_write_json(Path(args.report), report)
        except OSError as e:
            print(f"kvwindow: error: cannot write the report {args.report}: {e.strerror or e}", file=sys.stderr)
            rc = EXIT_FINDING if failed else EXIT_HARNESS
    return rc


