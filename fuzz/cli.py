"""``kvwindow`` — the command line: fuzz | replay | seeds | mutants | bench | prove.

Exit codes: 0 nothing failed, 1 a bug was found (or a mutant survived),
2 a usage error (bad target, bad seed file, bad flag), 130 a campaign
interrupted with Ctrl-C before it found anything (its report is still written).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path

from fuzz import seeds as seedstore
from fuzz.machine import machine_info
from fuzz.targets import registry
from fuzz.targets.base import TargetError
from fuzz.config import DTYPES, CampaignConfig
from fuzz.ops import Case, OpError
from fuzz.replay import replay_hint


class UsageError(Exception):
    pass


def _seed_dir(args) -> Path:
    return Path(args.seeds_dir) if getattr(args, "seeds_dir", None) else seedstore.default_seeds_dir()


def _console():
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:  # CI logs: wide enough that no column is truncated
        console = Console(highlight=False, width=max(console.width, 180))
    return console


# ---------------------------------------------------------------------------
# fuzz


def _list_targets() -> int:
    for t in registry.list_targets():
        status = "available" if t.available else f"unavailable: {t.reason}"
        print(f"{t.name:16s} {'cpu' if t.cpu else 'gpu'}  {status}")
    for prefix, (_, what) in registry.FAMILIES.items():
        arg, _, doc = what.partition(", ")
        print(f"{prefix + arg:16s} cpu  {doc}")
    return 0


def _cmd_fuzz(args) -> int:
    if args.list_targets:
        return _list_targets()
    from fuzz import workers
    from fuzz.display import make_display, summary

    if args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    if args.time <= 0:
        raise UsageError(f"--time must be > 0, got {args.time}")
    if args.window_max < 1:
        raise UsageError(f"--window-max must be >= 1, got {args.window_max}")
    names = tuple(dict.fromkeys(args.target or registry.default_targets()))
    if not names:
        raise UsageError("no target is available here (see kvwindow fuzz --list-targets)")
    targets = [registry.resolve(n) for n in names]  # bad targets fail here, before anything runs
    if args.width < 1:
        raise UsageError(f"--width must be >= 1, got {args.width}")
    config = CampaignConfig(targets=names, seconds=args.time, max_examples=args.max_examples,
                            window_max=args.window_max, campaign_seed=args.seed, workers=args.workers,
                            db=args.db or workers.DEFAULT_DB, seeds_dir=str(_seed_dir(args)),
                            width=args.width, dtype=args.dtype, long=args.long)
    try:
        database = workers.open_database(config.db)  # a bad --db fails here, before anything runs
    except workers.DatabaseError as e:
        raise UsageError(str(e)) from e
    console = _console()
    display = make_display(console, plain=True if args.plain else None)
    started = time.time()
    header = (f"kvwindow fuzz: {len(targets)} target(s) for {config.seconds:g}s, {config.workers} worker(s), "
              f"db {config.db}, seed {config.campaign_seed}")
    display.start([t.name for t in targets], header)
    pids = [os.getpid()]
    try:
        if config.workers == 1:
            results, interrupted = workers.run_in_process(config, targets, database=database,
                                                          on_update=display.update)
        else:
            results, interrupted, pids = workers.run_workers(config, on_update=display.update)
    finally:
        display.stop()
    failed = [r for r in results if r.failures]
    rc = 1 if failed else (130 if interrupted else 0)
    summary(console, results)
    if interrupted:
        print("kvwindow: interrupted; results so far are kept" + (f" (report: {args.report})" if args.report else ""))
    for r in failed:
        for f in r.failures:
            print(f"\nFAILED {r.name}: {f.error.splitlines()[0]}")
            print(f"  shrunk case: {f.case}")
            if f.seed_path:
                print(f"  seed {'saved' if f.created else 'already stored'}: {f.seed_path}")
                print(f"  replay: {f.replay}")
    if args.report:
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
            "totals": {"examples": sum(r.examples for r in results), "tokens": sum(r.tokens for r in results),
                       "failures": sum(len(r.failures) for r in results)},
            "failures": [f.to_json() for r in results for f in r.failures],
        }
        path = Path(args.report)
        path.parent.mkdir(parents=True, exist_ok=True)
        seedstore.atomic_write_json(path, report)
    return rc


# ---------------------------------------------------------------------------
# replay


def _seed_files(paths: list[str], default_dir: Path) -> list[Path]:
    if not paths:
        return seedstore.seed_paths(default_dir)
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(seedstore.seed_paths(p))
        elif p.exists():
            out.append(p)
        else:
            # An id (or id prefix) of a stored seed.
            hits = [q for q in seedstore.seed_paths(default_dir) if q.stem.startswith(str(p))]
            if len(hits) != 1:
                raise UsageError(f"{p}: no such seed file" + (f" (ambiguous id: {len(hits)} seeds match)" if hits else ""))
            out.append(hits[0])
    return out


def _cmd_replay(args) -> int:
    from fuzz.replay import replay_seed

    files = _seed_files(args.paths, _seed_dir(args))
    loaded = [(p, seedstore.load_seed(p)) for p in files]  # a malformed file stops here, exit 2
    if not loaded:
        print(f"no seeds in {_seed_dir(args)}")
        return 0
    explicit = bool(args.target)
    names = list(dict.fromkeys(args.target or registry.default_targets()))
    if args.width < 1:
        raise UsageError(f"--width must be >= 1, got {args.width}")
    payload = CampaignConfig(width=args.width, dtype=args.dtype)
    targets = [registry.resolve(n).configured(payload) for n in names]
    failed = ran = 0
    for path, seed in loaded:
        for t in targets:
            why = t.accepts(seed.case)
            if why is not None:
                if explicit:
                    raise UsageError(f"seed {seed.id} ({path}) cannot run on {t.name}: {why}")
                print(f"{seed.id} {t.name}: skipped: {why}")
                continue
            err = replay_seed(seed, t)
            ran += 1
            print(f"{seed.id} {t.name}: {'ok' if err is None else 'FAILED: ' + err.splitlines()[0]}")
            failed += err is not None
    print(f"replayed {len(loaded)} seed(s) on {len(targets)} target(s): {ran} run(s), {failed} failed")
    return 1 if failed else 0


# ---------------------------------------------------------------------------
# seeds


def _cmd_seeds(args) -> int:
    d = _seed_dir(args)
    if args.seeds_cmd == "add":
        if args.file and args.ops is not None:
            raise UsageError("seeds add takes a FILE or --ops/--window, not both")
        if args.file:
            seed = seedstore.load_seed(args.file)
            if args.note:
                seed.found = dict(seed.found, note=args.note)
        else:
            if args.ops is None or args.window is None:
                raise UsageError("seeds add needs a FILE, or --ops '...' and --window W")
            if args.window < 1:
                raise UsageError(f"--window must be >= 1, got {args.window}")
            try:
                case = Case.parse(args.window, args.ops)
            except OpError as e:
                raise UsageError(f"--ops: {e}") from e
            found = {"added": "by hand", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            if args.note:
                found["note"] = args.note
            seed = seedstore.Seed(case, found)
        path, created = seedstore.save_seed(seed, d)
        print(f"{'added' if created else 'already stored'} {seed.id}: {path}")
        return 0
    if args.seeds_cmd == "list":
        rows = []
        for p in seedstore.seed_paths(d):
            try:
                s = seedstore.load_seed(p)
                rows.append(f"{s.id}  W={s.case.window:<3d} ops={len(s.case.ops):<3d} "
                            f"{s.found.get('target', s.found.get('added', '')):14s} "
                            f"{s.found.get('note', '')}".rstrip())
            except seedstore.SeedError as e:
                rows.append(f"{p.stem}  MALFORMED: {e}")
        print("\n".join(rows) if rows else f"no seeds in {d}")
        return 1 if any("MALFORMED" in r for r in rows) else 0
    if args.seeds_cmd == "show":
        (path,) = _seed_files([args.id], d)
        s = seedstore.load_seed(path)
        print(json.dumps(s.to_json(), indent=2))
        print(f"ops: {s.case.text or '(none)'}")
        print(f"replay: {replay_hint(path)}")
        return 0
    raise UsageError("seeds: expected add, list or show")


# ---------------------------------------------------------------------------
# mutants


def _cmd_mutants(args) -> int:
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
    console = _console()
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


# ---------------------------------------------------------------------------
# bench / prove: other modules, imported lazily


#: Subcommands whose options belong to another module's own parser: everything after
#: the name is passed through untouched (``kvwindow bench --quick``).
DELEGATED = {"bench": ("fuzz.bench.run", "benchmarks and plots"),
             "prove": ("fuzz.prove", "build the Lean proofs and print the theorem inventory")}


def _delegate(module: str, what: str):
    def run(rest: list[str]) -> int:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name and module.startswith(e.name):
                raise UsageError(f"kvwindow {what} is not available: module {module} is not installed") from e
            raise
        main = getattr(mod, "main", None)
        if main is None:
            raise UsageError(f"kvwindow {what} is not available: {module} has no main(argv)")
        if rest[:1] == ["--"]:
            rest = rest[1:]
        return int(main(rest) or 0)

    return run


#: What --long costs, measured: ``kvwindow fuzz --target ring-c --long --time 1`` took 113 s (2**31 + 100 k
#: tokens through ringkv_trace at ~19 M tokens/s) on a shared 2-core machine.
LONG_COST = "about 2 minutes per such target, 2**31 tokens at ~19 M tokens/s on one core"


def _payload_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--width", type=int, default=4, help="floats per key and value pushed into cache targets "
                        "(default 4)")
    parser.add_argument("--dtype", default="float32", choices=DTYPES,
                        help="what the payloads are exact in: a float16/bfloat16 cache stores them bit for bit "
                             "(default float32)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kvwindow", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    f = sub.add_parser("fuzz", help="run a fuzz campaign")
    f.add_argument("--target", action="append", help="target name, c:PATH.so or py:module:Class (repeatable)")
    f.add_argument("--time", type=float, default=60.0, help="total seconds (default 60)")
    f.add_argument("--max-examples", type=int, default=None, help="stop each target after N examples")
    f.add_argument("--window-max", type=int, default=16)
    f.add_argument("--seed", type=int, default=None, help="the campaign's Hypothesis seed (reproducible campaigns)")
    f.add_argument("--workers", type=int, default=1, help="processes sharing the example database")
    f.add_argument("--db", default=None, help="example database: a directory (default .hypothesis/kvwindow) "
                   "or redis://host:port/n")
    f.add_argument("--report", default=None, help="write a JSON report here")
    f.add_argument("--seeds-dir", default=None, help="where failures are saved (default: $KVWINDOW_SEEDS, else "
                   "[tool.kvwindow] seeds-dir in ./pyproject.toml, else ./kvwindow-seeds)")
    _payload_flags(f)
    f.add_argument("--long", action="store_true",
                   help="the bulk phase also crosses position 2**31 on targets with ringkv_trace "
                        f"(every step checked: {LONG_COST})")
    f.add_argument("--plain", action="store_true", help="plain progress lines even on a terminal")
    f.add_argument("--list-targets", action="store_true", help="say which targets run here and why not")
    f.set_defaults(func=_cmd_fuzz)

    r = sub.add_parser("replay", help="replay regression seeds (files, directories or ids)")
    r.add_argument("paths", nargs="*")
    r.add_argument("--target", action="append")
    r.add_argument("--seeds-dir", default=None)
    _payload_flags(r)
    r.set_defaults(func=_cmd_replay)

    s = sub.add_parser("seeds", help="add, list and show regression seeds")
    s.add_argument("--seeds-dir", default=None)
    ss = s.add_subparsers(dest="seeds_cmd", required=True)
    a = ss.add_parser("add", help="add a seed from a FILE or from --ops/--window")
    a.add_argument("file", nargs="?")
    a.add_argument("--ops", default=None, help="e.g. 'push chunk:5 reset:3'")
    a.add_argument("--window", type=int, default=None)
    a.add_argument("--note", default=None)
    a.add_argument("--seeds-dir", default=argparse.SUPPRESS)
    ls = ss.add_parser("list")
    ls.add_argument("--seeds-dir", default=argparse.SUPPRESS)
    sh = ss.add_parser("show")
    sh.add_argument("id")
    sh.add_argument("--seeds-dir", default=argparse.SUPPRESS)
    s.set_defaults(func=_cmd_seeds)

    m = sub.add_parser("mutants", help="run a campaign against every mutant and print the kill table")
    m.add_argument("--time-per", type=float, default=10.0, help="seconds per mutant (default 10)")
    m.add_argument("--max-examples", type=int, default=None)
    m.add_argument("--baseline", action="store_true", help="also run the naive uniform-random tester")
    m.add_argument("--repeats", type=int, default=None, metavar="N",
                   help="campaign seeds per mutant and tester: seed, seed+1, ... (default 5 with --baseline, else 1)")
    m.add_argument("--only", action="append", help="mutant name or prefix (repeatable)")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--window-max", type=int, default=16)
    m.add_argument("--save-seeds", default=None, metavar="DIR", help="save each kill as a seed in DIR")
    m.add_argument("--json", default=None, metavar="FILE", help="write the kill table as JSON")
    m.add_argument("--list", action="store_true", help="list the catalogue and exit")
    m.set_defaults(func=_cmd_mutants)

    for name, (_, help_) in DELEGATED.items():  # listed in --help; main() hands them their argv
        sub.add_parser(name, help=help_ + " (options: kvwindow " + name + " --help)", add_help=False)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in DELEGATED:
        module, _ = DELEGATED[argv[0]]
        run = lambda: _delegate(module, argv[0])(argv[1:])  # noqa: E731
    else:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as e:  # argparse exits 2 on usage errors already
            return int(e.code or 0)
        run = lambda: args.func(args)  # noqa: E731
    try:
        return run()
    except (TargetError, seedstore.SeedError, UsageError, OpError) as e:
        print(f"kvwindow: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kvwindow: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
