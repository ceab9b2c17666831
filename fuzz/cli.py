"""``kvwindow`` — the command line: fuzz | replay | seeds | mutants | bench | prove.

Exit codes: 0 nothing failed, 1 a bug was found, 2 a usage error (bad
target, bad seed file, bad flag).
"""

from __future__ import annotations

import argparse
import json
import sys

from fuzz import registry
from fuzz import seeds as seedstore


class UsageError(Exception):
    pass


def _cmd_fuzz(args) -> int:
    if args.list_targets:
        for t in registry.list_targets():
            status = "available" if t.available else f"unavailable: {t.reason}"
            print(f"{t.name:14s} {'cpu' if t.cpu else 'gpu'}  {status}")
        return 0
    from fuzz.campaign import fuzz_target

    names = args.target or registry.default_targets()
    targets = [registry.resolve(n) for n in names]
    per = args.time / max(1, len(targets))
    results = []
    for t in targets:
        r = fuzz_target(t, seconds=per, max_examples=args.max_examples, window_max=args.window_max,
                        seed=args.seed)
        results.append(r)
        verdict = "FAILED" if r.failure else "ok"
        print(f"{r.name:14s} {verdict:6s} examples={r.examples} steps={r.steps} "
              f"({r.examples_per_s:.0f} ex/s, {r.steps_per_s:.0f} steps/s)")
        if r.failure:
            print(f"  {r.failure}\n  seed saved: {r.seed_path}\n  replay: {r.replay}")
    if args.report:
        with open(args.report, "w") as f:
            json.dump([r.__dict__ for r in results], f, indent=2, default=str)
    return 1 if any(r.failure for r in results) else 0


def _cmd_replay(args) -> int:
    from fuzz.replay import replay_seed

    paths = args.paths or [str(p) for p in seedstore.seed_paths()]
    failed = 0
    for p in paths:
        seed = seedstore.load_seed(p)
        for name in args.target or registry.default_targets():
            err = replay_seed(seed, registry.resolve(name))
            print(f"{seed.id} {name}: {'ok' if err is None else 'FAILED: ' + err}")
            failed += err is not None
    return 1 if failed else 0


def _cmd_prove(args) -> int:
    from fuzz.prove import main as prove_main

    return prove_main(args.rest)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kvwindow", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    f = sub.add_parser("fuzz", help="run a fuzz campaign")
    f.add_argument("--target", action="append", help="target name, c:PATH.so or py:module:Class (repeatable)")
    f.add_argument("--time", type=float, default=60.0, help="total seconds (default 60)")
    f.add_argument("--max-examples", type=int, default=None)
    f.add_argument("--window-max", type=int, default=16)
    f.add_argument("--seed", type=int, default=None)
    f.add_argument("--report", default=None, help="write a JSON report here")
    f.add_argument("--list-targets", action="store_true")
    f.set_defaults(func=_cmd_fuzz)

    r = sub.add_parser("replay", help="replay regression seeds")
    r.add_argument("paths", nargs="*")
    r.add_argument("--target", action="append")
    r.set_defaults(func=_cmd_replay)

    pr = sub.add_parser("prove", help="build the Lean proofs and print the theorem inventory")
    pr.add_argument("rest", nargs=argparse.REMAINDER)
    pr.set_defaults(func=_cmd_prove)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on usage errors already
        return int(e.code or 0)
    try:
        return args.func(args)
    except (registry.TargetError, seedstore.SeedError, UsageError) as e:
        print(f"kvwindow: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kvwindow: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
