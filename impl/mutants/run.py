"""Run campaigns against the mutant catalogue: the kill table (and the uniform-random baseline).

``run_mutants`` is what ``kvwindow mutants`` prints and what ``kvwindow bench``
reuses. Mutant kills write no seeds unless ``seeds_dir`` is given, and use no
example database, so every kill is found afresh and the counts are comparable.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from fuzz.campaign import fuzz_target
from fuzz.strategies import uniform_cases
from fuzz.targets import TargetUnavailable
from impl.mutants.catalogue import Mutant, MutantError, select


@dataclass
class KillResult:
    name: str
    bug_class: str
    kind: str
    reference: str
    available: bool = True
    reason: str = ""
    killed: bool = False
    examples: int | None = None  #: examples until the first failing one (before shrinking)
    steps: int | None = None  #: tokens pushed until then
    seconds: float | None = None
    examples_run: int = 0
    window: int | None = None  #: the shrunk seed
    ops: str | None = None
    error: str | None = None
    seed_path: str | None = None
    baseline_killed: bool | None = None
    baseline_examples: int | None = None
    baseline_steps: int | None = None
    baseline_seconds: float | None = None
    baseline_examples_run: int = 0

    @property
    def ratio(self) -> float | None:
        """Baseline examples-to-kill over biased examples-to-kill (``None`` when either did not kill)."""
        if not (self.killed and self.baseline_killed) or not self.examples:
            return None
        return self.baseline_examples / self.examples

    @property
    def steps_ratio(self) -> float | None:
        """Baseline tokens-to-kill over biased tokens-to-kill: the work each tester spent."""
        if not (self.killed and self.baseline_killed) or not self.steps or self.baseline_steps is None:
            return None
        return self.baseline_steps / self.steps

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["ratio"] = self.ratio
        d["steps_ratio"] = self.steps_ratio
        return d


def run_mutants(
    *,
    time_per: float = 10.0,
    max_examples: int | None = None,
    baseline: bool = False,
    only: list[str] | None = None,
    seed: int | None = 0,
    window_max: int = 16,
    seeds_dir=None,
    seed_dir=None,
    mode: str | None = None,
    mutants: list[Mutant] | None = None,
    on_result: Callable[[KillResult], None] | None = None,
) -> list[KillResult]:
    """A campaign of ``time_per`` seconds (or ``max_examples``) against each mutant.

    With ``baseline`` the same mutant is also run against :func:`fuzz.strategies.uniform_cases`
    under the same budget. ``mode`` picks what runs: ``"biased"`` (the harness's
    strategies; the default), ``"uniform"`` (only the naive baseline, reported
    in the main fields ``killed``/``examples``/``seconds``) or ``"both"`` (what
    ``baseline=True`` means: biased in the main fields, the baseline in
    ``baseline_*``). ``seed_dir`` is an alias of ``seeds_dir``. Unavailable mutants (no C ring, no torch) are
    reported with the reason, not skipped silently.
    """
    seeds_dir = seeds_dir if seeds_dir is not None else seed_dir
    mode = mode or ("both" if baseline else "biased")
    if mode not in ("biased", "uniform", "both"):
        raise ValueError(f"mode must be biased, uniform or both, got {mode!r}")
    out = []
    for m in (mutants if mutants is not None else select(only)):
        kr = KillResult(m.name, m.bug_class, m.kind, m.reference)
        try:
            target = m.make_target()
        except (TargetUnavailable, MutantError) as e:
            kr.available, kr.reason = False, f"{type(e).__name__}: {e}"
            out.append(kr)
            if on_result:
                on_result(kr)
            continue
        wmax = min(window_max, target.max_window or window_max)
        uniform = uniform_cases(wmax, max_tokens=target.max_tokens)
        res = fuzz_target(target, seconds=time_per, max_examples=max_examples, window_max=window_max,
                          seed=seed, database=None, seed_dir=seeds_dir, save_seed=seeds_dir is not None,
                          strategy=uniform if mode == "uniform" else None)
        kr.examples_run = res.examples
        if res.failures:
            kr.killed = True
            kr.examples, kr.steps, kr.seconds = res.examples_to_fail, res.steps_to_fail, res.seconds_to_fail
            kr.window, kr.ops, kr.error = res.fail_window, res.fail_ops, res.failures[0].error.splitlines()[0][:300]
            kr.seed_path = res.seed_path
        if mode == "both":
            t0 = time.monotonic()
            b = fuzz_target(m.make_target(), seconds=time_per, max_examples=max_examples, window_max=window_max,
                            seed=seed, database=None, save_seed=False, shrink=False,
                            strategy=uniform)
            kr.baseline_examples_run = b.examples
            kr.baseline_killed = bool(b.failures)
            if b.failures:
                kr.baseline_examples, kr.baseline_steps = b.examples_to_fail, b.steps_to_fail
                kr.baseline_seconds = b.seconds_to_fail
            else:
                kr.baseline_seconds = round(time.monotonic() - t0, 3)
        out.append(kr)
        if on_result:
            on_result(kr)
    return out
