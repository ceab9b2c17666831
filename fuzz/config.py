"""``CampaignConfig``: everything that decides what a campaign runs, in one frozen value.

The CLI builds it once from its flags; the campaign loop, the workers, the kill
table and the bench all take it, and a report carries it verbatim (``"config"``),
so a report says exactly how to run its campaign again. What cannot be written
into a report — an opened example database, a progress callback — is passed
beside it, never inside.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

#: The testers a campaign can draw its cases from (:mod:`fuzz.strategies`).
TESTERS = ("biased", "uniform")
#: The payload dtypes (``--dtype``): what a cache under test stores (:func:`fuzz.oracle.payloads` makes each exact).
DTYPES = ("float32", "float16", "bfloat16")

# ---------------------------------------------------------------------------
# The bounds: one set, checked on every way in (CLI flags, ``seeds add``, seed files, gate identities) before
# anything is allocated, so whatever a campaign may save, ``replay`` accepts (:func:`bounds_error`).

#: The widest window a campaign draws (``--window-max``) and a seed may hold (production windows: 65537 tokens).
WINDOW_BOUND = 65_537
#: The default ``--window-max``: past the uint16 edge (65 535 - 65 537 are drawn); each target caps it with its own
#: ``window_max`` and each case with its payload width (:data:`fuzz.strategies.FLOAT_BUDGET`).
DEFAULT_WINDOW_MAX = 65_537
#: The widest payload (floats per key and value) a seed or ``--width`` may name (the strategies draw up to 300).
WIDTH_BOUND = 4096
#: The longest chunk a seed may hold (the strategies draw up to ``3 W + 3``).
CHUNK_BOUND = 4 * WINDOW_BOUND
#: The most live instances one case drives (the instance phase draws 2 or 3).
INSTANCES_BOUND = 4
#: The most sequences a paged case names (ids 0 .. SEQUENCES_BOUND - 1).
SEQUENCES_BOUND = 64
#: The largest block size and block count of a paged pool.
BLOCK_BOUND = 4096
NUM_BLOCKS_BOUND = 4096
#: The most floats one payload array of a case may take: a window of a ring instance times its width, the
#: blocks of a paged pool times block size times width (2**27 float32 = 512 MiB, within --op-memory's 4 GiB
#: for the keys, the values and the oracle's copy). The product, not each factor, is what allocates.
PAYLOAD_FLOATS_BOUND = 1 << 27


def bounds_error(*, window: int | None = None, width: int | None = None, chunk: int | None = None,
                 block_size: int | None = None, num_blocks: int | None = None) -> str | None:
    """``None`` when the given dimensions are within the bounds above, else one line naming the first one beyond
    them (callers prefix the flag or file it came from)."""
    for name, value, bound in (("window", window, WINDOW_BOUND), ("payload width", width, WIDTH_BOUND),
                               ("chunk", chunk, CHUNK_BOUND), ("block size", block_size, BLOCK_BOUND),
                               ("block count", num_blocks, NUM_BLOCKS_BOUND)):
        if value is not None and not 1 <= value <= bound:
            return f"{name} {value} is beyond the bound 1 .. {bound}"
    if window is not None and width is not None and num_blocks is None and window * width > PAYLOAD_FLOATS_BOUND:
        return (f"window {window} x width {width} = {window * width} floats per payload array is beyond the bound "
                f"{PAYLOAD_FLOATS_BOUND}")
    if None not in (block_size, num_blocks, width) and block_size * num_blocks * width > PAYLOAD_FLOATS_BOUND:
        return (f"a pool of {num_blocks} blocks x {block_size} x width {width} = {block_size * num_blocks * width} "
                f"floats is beyond the bound {PAYLOAD_FLOATS_BOUND}")
    return None


#: How an isolated target's op limit follows the op's measured cost (``--op-timeout`` unset): the limit is
#: :data:`OP_TIMEOUT_FACTOR` times the slowest op the target has run so far, never under :data:`OP_TIMEOUT`
#: seconds. A busy machine slows every op alike, so a multiple of what was measured on it holds there too;
#: the floor leaves room for the first ops, measured before anything else. One-time setup (a model built,
#: converted or compiled, a first call per shape) is timed apart (:data:`SETUP_TIMEOUT`), never as an op.
OP_TIMEOUT = 30.0
OP_TIMEOUT_FACTOR = 10.0
#: A case that runs past its limit is run again alone (a fresh child) with this many times the limit before
#: it is a hang (a crash finding); one that ends then was slow, not hung: reported, never a seed.
CONFIRM_FACTOR = 4.0
#: Seconds one stretch of setup (what a target marks with ``Target.setting_up``) may run before it counts as
#: a hang (confirmed like an op's: re-run alone with :data:`CONFIRM_FACTOR` times as long).
SETUP_TIMEOUT = 300.0
#: Default address-space limit of an isolated child in MiB (``RLIMIT_AS``; not applied to CUDA targets).
OP_MEMORY_MB = 4096


@dataclass(frozen=True, kw_only=True)
class CampaignConfig:
    #: The ``--target`` values, in order (a worker process resolves them again from here).
    targets: tuple[str, ...] = ()
    #: Seconds of fuzzing in all (shared among the targets; each worker gets all of it).
    seconds: float = 60.0
    #: Stop each target after this many examples (per worker once split); ``None``: the time decides.
    max_examples: int | None = None
    #: Largest window a case (or a reset in it) draws.
    window_max: int = DEFAULT_WINDOW_MAX
    #: Every case starts at this window (resets still draw up to ``window_max``); ``None``: drawn.
    start_window: int | None = None
    #: The Hypothesis seed of the campaign (``--seed``); ``None``: drawn, then reported.
    campaign_seed: int | None = None
    #: ``"biased"`` (boundary tours, then the boundary-biased strategies) or ``"uniform"`` (the baseline).
    tester: str = "biased"
    workers: int = 1
    #: How many workers run each of ``targets`` (:func:`fuzz.schedule.assign`): the coverage goal and
    #: ``max_examples`` are shared among them.
    replicas: int = 1
    #: Example database: a directory, a ``redis://`` URL, or ``None`` for none.
    db: str | None = None
    #: Where failures are saved as seeds; ``None``: :func:`fuzz.seeds.default_seeds_dir` (the user's project).
    seeds_dir: str | None = None
    save_seeds: bool = True
    shrink: bool = True
    #: A known finding (``docs/findings/``) a case reproduced does not fail the campaign (``--accept-known``).
    accept_known: bool = False
    #: Leave out the cases that hit a known finding instead of running them (``--skip-known``).
    skip_known: bool = False
    #: Run targets in a supervised child process (:mod:`fuzz.targets.isolated`): ``None`` for the
    #: native ones only (``ring-c``, ``c:``, C mutants, CUDA), ``True`` for every target, ``False`` for none.
    isolate: bool | None = None
    #: Seconds one op of an isolated target may run (``--op-timeout``); ``None``: the limit follows the ops'
    #: measured cost (:data:`OP_TIMEOUT_FACTOR` x the slowest so far, at least :data:`OP_TIMEOUT` s).
    op_timeout: float | None = None
    #: Address-space limit of an isolated child in MiB (``--op-memory``); ``None``: no limit.
    op_memory: int | None = OP_MEMORY_MB
    #: Build the project's C libraries with ASan + UBSan and preload the runtime in the child (``--sanitize``).
    sanitize: bool = False
    #: Floats per key and value, and what they are exact in, for cache targets (``--width``, ``--dtype``):
    #: ``None`` draws them per case (widths from :data:`fuzz.strategies.WIDTHS`, dtypes among those the
    #: target declares); a value pins them.
    width: int | None = None
    dtype: str | None = None
    #: Reproductions of a known finding per target before the cases that would hit it are left out
    #: (``--known-repeats``; ``None``: every case runs).
    known_repeats: int | None = 3
    #: The bulk phase also crosses position 2**31 on targets with a trace (``--long``).
    long: bool = False
    #: End each target's campaign at its first finding (``--stop-on-first``); by default a campaign saves each
    #: distinct finding (one per signature, DESIGN §4) and explores on until its budget ends.
    stop_on_first: bool = False

    def __post_init__(self) -> None:
        if self.tester not in TESTERS:
            raise ValueError(f"tester must be one of {', '.join(TESTERS)}, got {self.tester!r}")
        if self.width is not None and (isinstance(self.width, bool) or not isinstance(self.width, int)
                                       or self.width < 1):
            raise ValueError(f"width must be an int >= 1 (or None: drawn per case), got {self.width!r}")
        if self.dtype is not None and self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)} (or None: drawn), got {self.dtype!r}")
        if self.known_repeats is not None and (isinstance(self.known_repeats, bool)
                                               or not isinstance(self.known_repeats, int) or self.known_repeats < 0):
            raise ValueError(f"known_repeats must be an int >= 0 (or None: never skip), got {self.known_repeats!r}")
        if not isinstance(self.targets, tuple):
            object.__setattr__(self, "targets", tuple(self.targets))

    def payload_flags(self) -> str:
        """``--width``/``--dtype`` as a command line needs them to pin this campaign's payloads again."""
        return "".join(f" --{k} {v}" for k, v in (("width", self.width), ("dtype", self.dtype)) if v is not None)

    def replace(self, **changes: Any) -> "CampaignConfig":
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in dataclasses.fields(self)}
