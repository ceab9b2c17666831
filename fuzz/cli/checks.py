"""What every ``kvwindow`` subcommand checks before any work: flags in range, outputs writable, targets
resolvable (each failure is a :class:`UsageError`, exit 2, naming the flag and the fix)."""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

from fuzz import seeds as seedstore
from fuzz.config import WIDTH_BOUND, WINDOW_BOUND, CampaignConfig, bounds_error

#: Below this an op limit is no limit at all (the child itself needs the memory).
OP_MEMORY_MIN = 64


class UsageError(Exception):
    pass


def seed_dir(args) -> Path:
    return Path(args.seeds_dir) if getattr(args, "seeds_dir", None) else seedstore.default_seeds_dir()


def make_console():
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:  # CI logs: wide enough that no column is truncated
        console = Console(highlight=False, width=max(console.width, 180))
    return console


# ---------------------------------------------------------------------------
# checks of the input, before any work


def positive_seconds(flag: str, value: float) -> None:
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{flag} must be a finite number of seconds > 0, got {value}")


def writable_dir(path: str | Path, flag: str, note: str = "") -> None:
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


def writable_file(path: str, flag: str) -> None:
    p = Path(path)
    if p.is_dir() or path.endswith(os.sep):
        raise UsageError(f"{flag} {path}: is a directory; give a file name, e.g. {p / 'report.json'}")
    writable_dir(p.parent, flag, f" (the folder of {path})")


def check_isolation_flags(args) -> None:
    if args.op_timeout is not None:  # unset: the limit follows the measured cost of the ops
        positive_seconds("--op-timeout", args.op_timeout)
    if args.op_memory is not None and args.op_memory != 0 and args.op_memory < OP_MEMORY_MIN:
        raise UsageError(f"--op-memory must be 0 (no limit) or at least {OP_MEMORY_MIN} MiB, got {args.op_memory}")
    if args.sanitize and args.isolate is False:
        raise UsageError("--sanitize runs the targets in a child with the ASan runtime preloaded: "
                         "it cannot be combined with --no-isolate")


def check_payload_flags(args) -> None:
    """``--width`` within the bounds seeds obey (:data:`fuzz.config.WIDTH_BOUND`): what a campaign saves, replay takes."""
    if args.width is not None and not 1 <= args.width <= WIDTH_BOUND:
        raise UsageError(f"--width must be between 1 and {WIDTH_BOUND} (the bound seeds obey), got {args.width}")


def check_fuzz_flags(args) -> None:
    from fuzz.workers import max_workers

    positive_seconds("--time", args.time)
    if args.known_repeats < -1:
        raise UsageError(f"--known-repeats must be >= 0, or -1 to run every case, got {args.known_repeats}")
    if args.max_examples is not None and args.max_examples < 1:
        raise UsageError(f"--max-examples must be >= 1, got {args.max_examples}")
    if not 1 <= args.window_max <= WINDOW_BOUND:
        raise UsageError(f"--window-max must be between 1 and {WINDOW_BOUND}, got {args.window_max}")
    bound = max_workers()
    if args.workers == "auto":
        from fuzz.workers import auto_workers

        args.workers = auto_workers()
    if not 1 <= args.workers <= bound:
        raise UsageError(f"--workers must be between 1 and {bound} on this machine (4 per usable core, one per "
                         f"256 MiB of available memory), got {args.workers}")
    check_payload_flags(args)
    if args.width is not None:
        why = bounds_error(window=args.window_max, width=args.width)
        if why is not None:
            raise UsageError(f"--window-max/--width: {why}; lower one of them")
    check_isolation_flags(args)


def isolation(args) -> dict:
    """The isolation fields of :class:`CampaignConfig` from the flags."""
    return {"isolate": args.isolate, "op_timeout": args.op_timeout,
            "op_memory": None if not args.op_memory else args.op_memory, "sanitize": args.sanitize}


def resolve_all(names, config: CampaignConfig, prebuilt: dict | None = None) -> list:
    """Every target (isolated as ``config`` says), or :class:`TargetError` with none left running; a target
    in ``prebuilt`` (built already, e.g. by the default campaign's listing) is used as it is unless isolated."""
    from fuzz.targets import isolated

    built = []
    prebuilt = prebuilt or {}
    try:
        for n in names:
            ready = prebuilt.get(n)
            built.append(ready if ready is not None and not isolated.should_isolate(n, config)
                         else isolated.resolve(n, config))
    except BaseException:
        for t in built:
            isolated.close(t)
        raise
    return built


