"""How much each ``kvwindow bench`` section measures: the ``smoke`` (test suite), ``quick`` and ``full`` budgets."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """How much each section measures. ``quick`` takes about half a minute on 2 cores, ``full`` about 15."""

    name: str
    repeats: int
    windows: tuple[int, ...]
    #: seconds of stateful campaign per (target, W, repeat)
    stateful_s: float
    #: pushes per bulk stream (the C trace call)
    bulk_n: int
    bulk_width: int
    #: the stateful targets to measure besides ``ring-c`` and ``pyring`` (empty: every CPU target)
    extra_targets: tuple[str, ...] | None
    #: per-mutant time budget per strategy and repeat
    mutant_s: float
    mutant_max_examples: int
    #: mutants to run (``None``: the whole catalogue) and how many repeats of the kill table
    mutant_only: tuple[str, ...] | None
    mutant_repeats: int
    #: decoder benchmark: window, and single-token decodes timed per t
    decode_window: int
    decode_tokens: int
    gpu_iters: int
    #: the peer comparison: windows, and seconds per side, window and repeat
    peer_windows: tuple[int, ...] = (8, 16, 64)
    peer_s: float = 1.0
    #: crash isolation: ring-c in process vs in an isolated child, windows and seconds per side
    isolation_windows: tuple[int, ...] = (16,)
    isolation_s: float = 1.0
    #: the long section: seconds of each default ring-c campaign whose bulk phase and long tour are timed
    long_s: float = 5.0
    #: time to bug: seconds per run for a mutant and for an HF finding, seeds per tester, the mutants
    #: (``None``: every mutant and every finding; a tuple: those mutants only, no findings)
    bug_s: float = 10.0
    bug_finding_s: float = 30.0
    bug_repeats: int = 5
    #: the paged section: seconds of each paged-c campaign (``repeats`` of them)
    paged_s: float = 10.0
    bug_only: tuple[str, ...] | None = None


BUDGETS = {
    # A few seconds: only for the test suite (hidden flag --smoke).
    "smoke": Budget("smoke", repeats=2, windows=(8, 64), stateful_s=0.25, bulk_n=2_000, bulk_width=16,
                    extra_targets=(), mutant_s=0.5, mutant_max_examples=200,
                    mutant_only=("ring-keeps-W+1", "ring-position-is-slot", "c-len-W+1"), mutant_repeats=2,
                    decode_window=8, decode_tokens=2, gpu_iters=2, peer_windows=(8,), peer_s=0.25,
                    isolation_s=0.25, long_s=0.5, bug_s=1.0, bug_finding_s=1.0, bug_repeats=1,
                    bug_only=("ring-keeps-W+1", "ring-copies-4-floats"), paged_s=0.5),
    "quick": Budget("quick", repeats=3, windows=(8, 64, 512, 4096), stateful_s=0.7, bulk_n=20_000, bulk_width=16,
                    extra_targets=("decoder",), mutant_s=1.5, mutant_max_examples=2_000,
                    mutant_only=None, mutant_repeats=3,
                    decode_window=32, decode_tokens=16, gpu_iters=10, peer_s=0.5, isolation_s=0.5, long_s=2.0,
                    bug_s=3.0, bug_finding_s=10.0, bug_repeats=3, paged_s=5.0),
    "full": Budget("full", repeats=5, windows=(8, 16, 64, 512, 4096), stateful_s=2.0, bulk_n=200_000,
                   bulk_width=16, extra_targets=None, mutant_s=8.0, mutant_max_examples=20_000,
                   mutant_only=None, mutant_repeats=5,
                   decode_window=64, decode_tokens=32, gpu_iters=50, peer_s=3.0,
                   isolation_windows=(8, 16, 64), isolation_s=3.0, long_s=10.0, paged_s=20.0),
}
