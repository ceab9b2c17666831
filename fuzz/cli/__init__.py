"""``kvwindow`` — the command line: fuzz | replay | seeds | mutants | bench | gate | prove.

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
import sys

from fuzz import seeds as seedstore
from fuzz.cli.checks import UsageError
from fuzz.cli.fuzz_cmd import EXIT_FINDING, EXIT_HARNESS, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE  # noqa: F401
from fuzz.config import (
    CONFIRM_FACTOR, DEFAULT_WINDOW_MAX, DTYPES, OP_MEMORY_MB, OP_TIMEOUT, OP_TIMEOUT_FACTOR, SETUP_TIMEOUT, WINDOW_BOUND,
)
from fuzz.ops import OpError
from fuzz.targets.base import TargetError, TargetFault, interrupt_handlers

EPILOG = __doc__.split("\n\n", 1)[1]


def _cmd_fuzz(args) -> int:
    from fuzz.cli.fuzz_cmd import cmd_fuzz

    return cmd_fuzz(args)


def _cmd_replay(args) -> int:
    from fuzz.cli.seeds_cmd import cmd_replay

    return cmd_replay(args)


def _cmd_seeds(args) -> int:
    from fuzz.cli.seeds_cmd import cmd_seeds

    return cmd_seeds(args)


def _cmd_mutants(args) -> int:
    from fuzz.cli.mutants_cmd import cmd_mutants

    return cmd_mutants(args)


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


def workers_arg(text: str) -> int | str:
    """``--workers``: a count, or ``auto`` (one per usable core, :func:`fuzz.workers.auto_workers`)."""
    if text == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of workers or 'auto', got {text!r}") from None


def _isolation_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("crash isolation (native targets run in a supervised child by default)")
    g.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=None,
                   help="run every target (--isolate) or none (--no-isolate) in a child process; default: "
                        "ring-c, cuda-*, c: libraries, the C mutants and the user's py:, paged-py: and "
                        "py-decoder: classes")
    g.add_argument("--op-timeout", type=float, default=None, metavar="S",
                   help=f"seconds an op of an isolated target may run; default: {OP_TIMEOUT_FACTOR:g} x the "
                        f"slowest op it has run so far, at least {OP_TIMEOUT:g} s. One-time setup (a model "
                        f"built or converted) is not an op (its own limit: {SETUP_TIMEOUT:g} s). A case past "
                        f"the limit runs again alone with {CONFIRM_FACTOR:g} x the limit: only if it times out "
                        "again is it a hang (a crash finding); otherwise it is reported as slow, not a finding")
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
    parser.add_argument("--width", type=int, default=None,
                        help="pin the floats per key and value pushed into cache targets (default: drawn per case, "
                             "1 .. 300, biased to 1-5, 8, 16, 64, 128, 256; a seed's own width wins)")
    parser.add_argument("--dtype", default=None, choices=DTYPES,
                        help="pin what the payloads are exact in: a float16/bfloat16 cache stores them bit for bit "
                             "(default: drawn among the dtypes the target declares)")


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
    f.add_argument("--window-max", type=int, default=DEFAULT_WINDOW_MAX,
                   help=f"largest window drawn, 1..{WINDOW_BOUND} (default {DEFAULT_WINDOW_MAX}; windows 1..16 "
                        "most often, then 31-33 ... 65535-65537 as the target and the payload width allow)")
    f.add_argument("--seed", type=int, default=None, help="the campaign's Hypothesis seed (reproducible campaigns)")
    f.add_argument("--workers", type=workers_arg, default=1,
                   help="processes sharing the example database, or 'auto': one per usable core (at most 4 per "
                        "core, one per 256 MiB free)")
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
                   help="leave out every case that hits a known finding (exploration) and say how many")
    f.add_argument("--known-repeats", type=int, default=3, metavar="K",
                   help="after a known finding reproduced K times on a target, leave out the cases that would hit "
                        "it before they run (default 3; -1: run them all)")
    f.add_argument("--stop-on-first", action="store_true",
                   help="end each target's campaign at its first finding (default: save each distinct finding, "
                        "one per signature, and explore on until the time is spent)")
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
    a.add_argument("--ops", default=None, help="e.g. 'push chunk:5 reset:3', or '@0 push @1 chunk:5' with --instance")
    a.add_argument("--window", type=int, default=None, help=f"1..{WINDOW_BOUND}")
    a.add_argument("--width", type=int, default=None, help="the case's payload width (default: the target's, 4)")
    a.add_argument("--dtype", default=None, choices=DTYPES, help="the case's payload dtype (default float32)")
    a.add_argument("--instance", action="append", default=[], metavar="W[xWIDTH]",
                   help="declare live instance @1, @2, ... (its window, and width if not instance 0's); repeatable")
    a.add_argument("--paged", default=None, metavar="W,B,N,D",
                   help="a paged case: window, block size, blocks and width of the pool; --ops in the paged op "
                        "language ('+s0 s0 chunk:5 fork:s0>s1 ...')")
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
    m.add_argument("--window-max", type=int, default=DEFAULT_WINDOW_MAX)
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
        with interrupt_handlers():  # a real Ctrl-C / SIGTERM raises HarnessInterrupt; a subject's own is its outcome
            return run()
    except TargetFault as e:  # the adapter cannot drive the installed release: a harness fault, not usage
        print(f"kvwindow: error: {e}", file=sys.stderr)
        return EXIT_HARNESS
    except (TargetError, seedstore.SeedError, UsageError, OpError) as e:
        print(f"kvwindow: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("kvwindow: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())

