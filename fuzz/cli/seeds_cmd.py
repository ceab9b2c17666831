"""``kvwindow replay`` and ``kvwindow seeds``: run regression seeds again, and add, list and show them."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from fuzz import seeds as seedstore
from fuzz.cli.checks import UsageError, check_isolation_flags, check_payload_flags, isolation, resolve_all, seed_dir
from fuzz.cli.fuzz_cmd import EXIT_FINDING, EXIT_HARNESS, EXIT_OK, EXIT_USAGE
from fuzz.config import WINDOW_BOUND, CampaignConfig
from fuzz.ops import Case, Instance, OpError
from fuzz.replay import replay_hint
from fuzz.targets import registry
from fuzz.targets.base import HARNESS


def seed_files(paths: list[str], default_dir: Path) -> list[Path]:
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


def cmd_replay(args) -> int:
    from fuzz.replay import replay_outcome
    from fuzz.targets import isolated

    check_payload_flags(args)
    check_isolation_flags(args)
    files = seed_files(args.paths, seed_dir(args))
    loaded, malformed = [], 0
    for p in files:
        try:
            loaded.append((p, seedstore.load_seed(p)))
        except seedstore.SeedError as e:  # named in one line; every other seed still runs
            print(f"kvwindow: error: {e}", file=sys.stderr)
            malformed += 1
    if not loaded:
        print(f"no usable seeds in {', '.join(args.paths) or seed_dir(args)}")
        return EXIT_USAGE if malformed else EXIT_OK
    explicit = bool(args.target)
    names = list(dict.fromkeys(args.target or registry.default_targets()))
    config = CampaignConfig(width=args.width, dtype=args.dtype, **isolation(args))
    targets = [t.configured(config) for t in resolve_all(names, config)]
    found = faults = ran = 0
    try:
        for path, seed in loaded:
            for t in targets:
                why = t.accepts(seed.run_case)
                if why is not None:
                    other_kind = getattr(seed.case, "paged", False) != (getattr(t, "kind", "") == "paged")
                    if explicit and not other_kind:  # a seed of the other kind is skipped even on a named target
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




def paged_case(args):
    """``seeds add --paged W,B,N,D --ops '...'``: the paged case they name (a usage error names what is wrong)."""
    from fuzz.paged.ops import PagedCase, PagedOpError

    if args.ops is None or args.window is not None or args.instance or args.dtype is not None:
        raise UsageError("seeds add --paged W,B,N,D takes --ops in the paged op language, and no --window, "
                         "--instance or --dtype")
    parts = args.paged.split(",")
    if len(parts) != 4 or not all(p.strip().isdigit() for p in parts):
        raise UsageError(f"--paged: expected W,B,N,D (window, block size, blocks, width), got {args.paged!r}")
    W, B, N, D = (int(p) for p in parts)
    try:
        case = PagedCase.parse(args.ops, window=W, block_size=B, num_blocks=N, width=D)
    except PagedOpError as e:
        raise UsageError(f"--paged/--ops: {e}") from e
    seedstore.check_bounds(case, "--paged/--ops")
    return case


def cmd_seeds(args) -> int:
    d = seed_dir(args)
    if args.seeds_cmd == "add":
        if args.file and args.ops is not None:
            raise UsageError("seeds add takes a FILE or --ops/--window, not both")
        if args.file:
            seed = seedstore.load_seed(args.file)
            if args.note:
                seed.found = dict(seed.found, note=args.note)
        elif getattr(args, "paged", None) is not None:
            seed = seedstore.Seed(paged_case(args), {"added": "by hand",
                                                     "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
            if args.note:
                seed.found["note"] = args.note
        else:
            if args.ops is None or args.window is None:
                raise UsageError("seeds add needs a FILE, or --ops '...' and --window W")
            if not 1 <= args.window <= WINDOW_BOUND:
                raise UsageError(f"--window must be between 1 and {WINDOW_BOUND}, got {args.window}")
            try:
                instances = [Instance.parse(text, k) for k, text in enumerate(args.instance, 1)]
                case = Case.parse(args.window, args.ops, width=args.width, dtype=args.dtype, instances=instances)
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
                if getattr(s.case, "paged", False):
                    c = s.case
                    rows.append(f"{s.id}  paged W={c.window} B={c.block_size} N={c.num_blocks} ops={len(c.ops):<3d} "
                                f"{s.found.get('target', s.found.get('added', '')):14s} "
                                f"{s.found.get('note', '')}".rstrip())
                    continue
                rows.append(f"{s.id}  W={s.case.window:<3d} ops={len(s.case.ops):<3d} "
                            f"{'x' + str(s.case.instance_count) + ' ' if s.case.instances else ''}"
                            f"{s.found.get('target', s.found.get('added', '')):14s} "
                            f"{s.found.get('note', '')}".rstrip())
            except seedstore.SeedError as e:
                rows.append(f"{p.stem}  MALFORMED: {e}")
        print("\n".join(rows) if rows else f"no seeds in {d}")
        return EXIT_USAGE if any("MALFORMED" in r for r in rows) else EXIT_OK  # a bad file is bad input, not a finding
    if args.seeds_cmd == "show":
        if not args.id.strip():
            raise UsageError("seeds show: give a seed id (kvwindow seeds list) or the path of a seed file")
        if Path(args.id).is_dir():
            raise UsageError(f"seeds show takes one seed (an id or a file), not the directory {args.id}; "
                             f"to see every seed in it: kvwindow seeds --seeds-dir {args.id} list")
        (path,) = seed_files([args.id], d)
        s = seedstore.load_seed(path)
        print(json.dumps(s.to_json(), indent=2))
        print(f"ops: {s.case.text or '(none)'}")
        if s.run_case != s.case:
            print(f"replays as: {s.run_case} (the payload its campaign pinned, from 'found')")
        print(f"replay: {replay_hint(path)}")
        return 0
    raise UsageError("seeds: expected add, list or show")


