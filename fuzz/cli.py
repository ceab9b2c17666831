"""``kvwindow`` — the command line: fuzz | replay | seeds | mutants | bench | prove.

Exit codes (DESIGN §4):
  0    nothing failed
  1    a finding: a mismatch or a crash of the implementation (saved as a seed), a known finding
       (docs/findings/) reproduced (unless --accept-known), or a mutant survived
  2    a usage error: a bad target, flag, output path or seed file (checked before any work)
  3    a harness fault: the harness itself failed (database, filesystem, adapter setup, a worker that
       died); never saved as a seed
  130  interrupted (Ctrl-C or SIGTERM) before anything was found; the report is still written

A finding outranks a harness fault, which outranks an interruption. The first Ctrl-C (or SIGTERM)
stops the campaign at its next example and keeps everything found so far — a failure being shrunk
is cut short and its smallest case so far saved; a second Ctrl-C stops at once.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

from fuzz import seeds as seedstore
from fuzz.machine import machine_info
from fuzz.targets import registry
from fuzz.targets.base import HARNESS, TargetError
from fuzz.config import DTYPES, OP_MEMORY_MB, OP_TIMEOUT, WINDOW_BOUND, CampaignConfig
from fuzz.ops import Case, OpError
from fuzz.replay import replay_hint

EXIT_OK, EXIT_FINDING, EXIT_USAGE, EXIT_HARNESS, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: Below this an op limit is no limit at all (the child itself needs the memory).
OP_MEMORY_MIN = 64

EPILOG = __doc__.split("\n\n", 1)[1]


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
# checks of the input, before any work


def _positive_seconds(flag: str, value: float) -> None:
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{flag} must be a finite number of seconds > 0, got {value}")


def _writable_dir(path: str | Path, flag: str, note: str = "") -> None:
    """:class:`UsageError` unless files can be created in ``path``: a probe file is created and removed
    in it or, while it does not exist yet, in its nearest existing ancestor (nothing is left behind)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{flag} {path}: exists and is not a directory{note}")
    where = p.absolute()
    while not where.exists() and where.parent != where:
        where = where.parent
    if not where.is_dir():
        raise UsageError(f"{flag} {path}: cannot create it: {where} is not a directory{note}")
    try:
        fd, probe = tempfile.mkstemp(dir=where, prefix=".kvwindow-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UsageError(f"{flag} {path}: cannot write there: {e.strerror or e}{note}") from None


def _writable_file(path: str, flag: str) -> None:
    p = Path(path)
    if p.is_dir() or path.endswith(os.sep):
        raise UsageError(f"{flag} {path}: is a directory; give a file name, e.g. {p / 'report.json'}")
    _writable_dir(p.parent, flag, f" (the folder of {path})")


def _check_isolation_flags(args) -> None:
    _positive_seconds("--op-timeout", args.op_timeout)
    if args.op_memory is not None and args.op_memory != 0 and args.op_memory < OP_MEMORY_MIN:
        raise UsageError(f"--op-memory must be 0 (no limit) or at least {OP_MEMORY_MIN} MiB, got {args.op_memory}")
    if args.sanitize and args.isolate is False:
        raise UsageError("--sanitize runs the targets in a child with the ASan runtime preloaded: "
                         "it cannot be combined with --no-isolate")


def _check_payload_flags(args) -> None:
    if args.width < 1:
        raise UsageError(f"--width must be >= 1, got {args.width}")


def _check_fuzz_flags(args) -> None:
    from fuzz.workers import max_workers

    _positive_seconds("--time", args.time)
    if args.max_examples is not None and args.max_examples < 1:
        raise UsageError(f"--max-examples must be >= 1, got {args.max_examples}")
    if not 1 <= args.window_max <= WINDOW_BOUND:
        raise UsageError(f"--window-max must be between 1 and {WINDOW_BOUND}, got {args.window_max}")
    bound = max_workers()
    if not 1 <= args.workers <= bound:
        raise UsageError(f"--workers must be between 1 and {bound} on this machine (4 per usable core, one per "
                         f"256 MiB of available memory), got {args.workers}")
    _check_payload_flags(args)
    _check_isolation_flags(args)


def _isolation(args) -> dict:
    """The isolation fields of :class:`CampaignConfig` from the flags."""
    return {"isolate": args.isolate, "op_timeout": args.op_timeout,
            "op_memory": None if not args.op_memory else args.op_memory, "sanitize": args.sanitize}


def _resolve_all(names, config: CampaignConfig) -> list:
    """Every target (isolated as ``config`` says), or :class:`TargetError` with none left running."""
    from fuzz.targets import isolated

    built = []
    try:
        for n in names:
            built.append(isolated.resolve(n, config))
    except BaseException:
        for t in built:
            isolated.close(t)
        raise
    return built


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


def _print_failure(r, f, config: CampaignConfig) -> None:
    print(f"\nFAILED {r.name} ({f.kind}): {f.error.splitlines()[0]}")
    print(f"  shrunk case: {f.case}")
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
        print(f"  to keep and replay it: kvwindow seeds add --window {f.case.window} --ops '{f.case.text}' "
              f"--seeds-dir DIR && kvwindow replay DIR/{f.case.id}.json --target {r.name}"
              f"{config.payload_flags()}")


def _cmd_fuzz(args) -> int:
    if args.list_targets:
        return _list_targets()
    from fuzz import workers
    from fuzz.display import make_display
    from fuzz.targets import isolated

    _check_fuzz_flags(args)
    names = tuple(dict.fromkeys(args.target or registry.default_targets()))
    if not names:
        raise UsageError("no target is available here (see kvwindow fuzz --list-targets)")
    seeds_dir = _seed_dir(args)
    _writable_dir(seeds_dir, "--seeds-dir", "" if args.seeds_dir else " (the default; choose one with --seeds-dir)")
    if args.report:
        _writable_file(args.report, "--report")
    db = args.db or workers.DEFAULT_DB
    if "://" not in db:
        _writable_dir(db, "--db")
    config = CampaignConfig(targets=names, seconds=args.time, max_examples=args.max_examples,
                            window_max=args.window_max, campaign_seed=args.seed, workers=args.workers,
                            db=db, seeds_dir=str(seeds_dir), width=args.width, dtype=args.dtype, long=args.long,
                            accept_known=args.accept_known, skip_known=args.skip_known, **_isolation(args))
    try:
        database = workers.open_database(config.db)  # a bad --db fails here, before anything runs
    except workers.DatabaseError as e:
        raise UsageError(str(e)) from e
    for d in {seeds_dir, Path(args.report).parent if args.report else seeds_dir}:
        seedstore.clean_stale_temps(d)
    targets = _resolve_all(names, config)  # bad targets fail here, before anything runs
    console = _console()
    display = make_display(console, plain=True if args.plain else None)
    started = time.time()
    header = (f"kvwindow fuzz: {len(targets)} target(s) for {config.seconds:g}s, {config.workers} worker(s), "
              f"db {config.db}, seed {config.campaign_seed}")
    pids, errors = [os.getpid()], []
    stop = workers.StopRequest()
    with stop:  # from here on a signal only asks to stop: the summary, the seeds and the report still get written
        try:
            display.start([t.name for t in targets], header)
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
        return _finish(args, config, console, results, interrupted, pids, errors, started,
                       [t.name for t in targets], stop.signum)


def _finish(args, config: CampaignConfig, console, results, interrupted: bool, pids: list[int], errors: list[str],
            started: float, shown: list[str], signum: int | None) -> int:
    """The summary, every finding with its seed and replay command, the report; returns the exit code."""
    from fuzz.display import summary

    failed = [r for r in results if r.failures]
    faults = [(r.name, f) for r in results for f in r.faults]
    faults += [("(workers)", e) for e in errors if not any(e in f for _, f in faults)]
    known = [r for r in results if r.known_reproduced]
    finding = failed or (known and not config.accept_known)
    rc = EXIT_FINDING if finding else EXIT_HARNESS if faults else EXIT_INTERRUPTED if interrupted else EXIT_OK
    summary(console, results, names=shown)
    if known and not config.accept_known:
        print("kvwindow: known findings reproduced (exit 1; --accept-known accepts them, --skip-known leaves "
              "their cases out)")
    for e in errors:
        print(f"worker error: {e}")
    if interrupted:
        why = {2: "Ctrl-C", 15: "SIGTERM"}.get(signum or 2, "a signal")
        print(f"kvwindow: interrupted ({why}); results so far are kept"
              + (f" (report: {args.report})" if args.report else ""))
    for r in failed:
        for f in r.failures:
            _print_failure(r, f, config)
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
        }
        try:
            Path(args.report).parent.mkdir(parents=True, exist_ok=True)
            seedstore.atomic_write_json(Path(args.report), report)
        except OSError as e:
            print(f"kvwindow: error: cannot write the report {args.report}: {e.strerror or e}", file=sys.stderr)
            rc = EXIT_FINDING if failed else EXIT_HARNESS
    return rc


# ---------------------------------------------------------------------------
# replay


def _seed_files(paths: list[str], default_dir: Path) -> list[Path]:
    if not paths:
        return seedstore.seed_paths(default_dir)
    out: list[Path] = []
    for raw in paths:
        if not raw.strip():
            raise UsageError("an empty seed name: give a seed id, a seed file or a directory of seeds")
        p = Path(raw)
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
    from fuzz.replay import replay_outcome
    from fuzz.targets import isolated

    _check_payload_flags(args)
    _check_isolation_flags(args)
    files = _seed_files(args.paths, _seed_dir(args))
    loaded, malformed = [], 0
    for p in files:
        try:
            loaded.append((p, seedstore.load_seed(p)))
        except seedstore.SeedError as e:  # named in one line; every other seed still runs
            print(f"kvwindow: error: {e}", file=sys.stderr)
            malformed += 1
    if not loaded:
        print(f"no usable seeds in {', '.join(args.paths) or _seed_dir(args)}")
        return EXIT_USAGE if malformed else EXIT_OK
    explicit = bool(args.target)
    names = list(dict.fromkeys(args.target or registry.default_targets()))
    config = CampaignConfig(width=args.width, dtype=args.dtype, **_isolation(args))
    targets = [t.configured(config) for t in _resolve_all(names, config)]
    found = faults = ran = 0
    try:
        for path, seed in loaded:
            for t in targets:
                why = t.accepts(seed.case)
                if why is not None:
                    if explicit:
                        raise UsageError(f"seed {seed.id} ({path}) cannot run on {t.name}: {why}")
                    print(f"{seed.id} {t.name}: skipped: {why}")
                    continue
                out = replay_outcome(seed, t)
                ran += 1
                if out is None:
                    print(f"{seed.id} {t.name}: ok")
                elif out.kind == HARNESS:
                    faults += 1
                    print(f"{seed.id} {t.name}: HARNESS FAULT: {out.message.splitlines()[0]}")
                else:
                    found += 1
                    print(f"{seed.id} {t.name}: FAILED ({out.kind}): {out.message.splitlines()[0]}")
    finally:
        for t in targets:
            isolated.close(t)
    print(f"replayed {len(loaded)} seed(s) on {len(targets)} target(s): {ran} run(s), {found} failed"
          + (f", {faults} harness fault(s)" if faults else "") + (f", {malformed} malformed" if malformed else ""))
    return EXIT_FINDING if found else EXIT_HARNESS if faults else EXIT_USAGE if malformed else EXIT_OK


# ---------------------------------------------------------------------------
# seeds


def _found_payload_flags(seed) -> str:
    """The ``--width``/``--dtype`` flags of the campaign that found ``seed`` (recorded when not the default)."""
    try:
        return CampaignConfig(width=seed.found.get("width", CampaignConfig.width),
                              dtype=seed.found.get("dtype", CampaignConfig.dtype)).payload_flags()
    except (TypeError, ValueError):  # a hand-edited "found": the seed itself is still shown
        return ""


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
            if not 1 <= args.window <= WINDOW_BOUND:
                raise UsageError(f"--window must be between 1 and {WINDOW_BOUND}, got {args.window}")
            try:
                case = Case.parse(args.window, args.ops)
            except OpError as e:
                raise UsageError(f"--ops: {e}") from e
            seedstore.check_bounds(case, "--window/--ops")
            found = {"added": "by hand", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            if args.note:
                found["note"] = args.note
            seed = seedstore.Seed(case, found)
        seedstore.clean_stale_temps(d)
        try:
            saved = seedstore.store_seed(seed, d, move_corrupt=False)  # by hand: the user decides
        except OSError as e:
            raise UsageError(f"--seeds-dir {d}: cannot write the seed there: {e.strerror or e}") from None
        print(f"{'added' if saved.created else 'already stored'} {seed.id}: {saved.path}")
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
        if not args.id.strip():
            raise UsageError("seeds show: give a seed id (kvwindow seeds list) or the path of a seed file")
        if Path(args.id).is_dir():
            raise UsageError(f"seeds show takes one seed (an id or a file), not the directory {args.id}; "
                             f"to see every seed in it: kvwindow seeds --seeds-dir {args.id} list")
        (path,) = _seed_files([args.id], d)
        s = seedstore.load_seed(path)
        print(json.dumps(s.to_json(), indent=2))
        print(f"ops: {s.case.text or '(none)'}")
        print(f"replay: {replay_hint(path)}{_found_payload_flags(s)}")
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
             "gate": ("fuzz.gate.run", "the release gate for a cache or decoding change (seed 000's eight steps)"),
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


def _isolation_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("crash isolation (native targets run in a supervised child by default)")
    g.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=None,
                   help="run every target (--isolate) or none (--no-isolate) in a child process; default: "
                        "ring-c, cuda-*, c: libraries and the C mutants")
    g.add_argument("--op-timeout", type=float, default=OP_TIMEOUT, metavar="S",
                   help=f"an op of an isolated target running longer is a crash (default {OP_TIMEOUT:g} s)")
    g.add_argument("--op-memory", type=int, default=OP_MEMORY_MB, metavar="MIB",
                   help=f"address-space limit of the child, a breach is a crash (default {OP_MEMORY_MB}; "
                        "0: none; not applied to CUDA targets)")
    g.add_argument("--sanitize", action="store_true",
                   help="build the project's C libraries with ASan + UBSan and preload the runtime in the "
                        "child: a sanitizer report is a crash")


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
    p = argparse.ArgumentParser(prog="kvwindow", description=__doc__.splitlines()[0], epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    f = sub.add_parser("fuzz", help="run a fuzz campaign", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    f.add_argument("--target", action="append", help="target name, c:PATH.so or py:module:Class (repeatable)")
    f.add_argument("--time", type=float, default=60.0,
                   help="total seconds (default 60); shrinking may run 10%% (at least 2 s) longer")
    f.add_argument("--max-examples", type=int, default=None, help="stop each target after N examples (N >= 1)")
    f.add_argument("--window-max", type=int, default=16, help=f"largest window drawn, 1..{WINDOW_BOUND} (default 16)")
    f.add_argument("--seed", type=int, default=None, help="the campaign's Hypothesis seed (reproducible campaigns)")
    f.add_argument("--workers", type=int, default=1,
                   help="processes sharing the example database (at most 4 per core, one per 256 MiB free)")
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
    f.add_argument("--accept-known", action="store_true",
                   help="a known finding (docs/findings/) that reproduces does not fail the campaign")
    f.add_argument("--skip-known", action="store_true",
                   help="leave out the cases that hit a known finding (exploration) and say how many")
    _isolation_flags(f)
    f.set_defaults(func=_cmd_fuzz)

    r = sub.add_parser("replay", help="replay regression seeds (files, directories or ids)", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("paths", nargs="*")
    r.add_argument("--target", action="append")
    r.add_argument("--seeds-dir", default=None)
    _payload_flags(r)
    _isolation_flags(r)
    r.set_defaults(func=_cmd_replay)

    s = sub.add_parser("seeds", help="add, list and show regression seeds")
    s.add_argument("--seeds-dir", default=None)
    ss = s.add_subparsers(dest="seeds_cmd", required=True)
    a = ss.add_parser("add", help="add a seed from a FILE or from --ops/--window")
    a.add_argument("file", nargs="?")
    a.add_argument("--ops", default=None, help="e.g. 'push chunk:5 reset:3'")
    a.add_argument("--window", type=int, default=None, help=f"1..{WINDOW_BOUND}")
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
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("kvwindow: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
