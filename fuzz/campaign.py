"""The campaign loop: Hypothesis drives one target at a time within a time budget.

Hypothesis stops after ``max_examples``, so a timed campaign runs it in
batches (each with its own derived seed) until the budget is spent; the
example database carries what earlier batches — and earlier campaigns —
found. On failure Hypothesis shrinks, replays the minimal case last, and that
case becomes a regression seed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings
from hypothesis.database import ExampleDatabase

from fuzz import seeds as seedstore
from fuzz.ops import PHASES, format_ops
from fuzz.strategies import cases
from fuzz.targets import Target

BATCH = 100


@dataclass
class TargetResult:
    name: str
    examples: int = 0
    steps: int = 0
    seconds: float = 0.0
    phases: dict[str, int] = field(default_factory=lambda: {p: 0 for p in PHASES})
    failure: str | None = None
    seed_id: str | None = None
    seed_path: str | None = None
    replay: str | None = None
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def examples_per_s(self) -> float:
        return self.examples / self.seconds if self.seconds else 0.0

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds if self.seconds else 0.0


def fuzz_target(
    target: Target,
    *,
    seconds: float,
    max_examples: int | None = None,
    window_max: int = 16,
    seed: int | None = None,
    database: ExampleDatabase | None = None,
    seed_dir=None,
    on_progress: Callable[[TargetResult], None] | None = None,
    strategy=None,
) -> TargetResult:
    """Fuzz ``target`` until ``seconds`` pass, ``max_examples`` run, or it fails."""
    res = TargetResult(target.name, versions=target.versions())
    wmax = min(window_max, target.max_window or window_max)
    strat = strategy if strategy is not None else cases(wmax, max_tokens=target.max_tokens)
    last: dict = {}
    start = time.monotonic()

    def check(case):
        window, ops = case
        last["case"] = case
        stats = target.run(window, ops)
        res.examples += 1
        res.steps += stats.steps
        for p in stats.phases:
            res.phases[p] += 1
        res.seconds = time.monotonic() - start
        if on_progress is not None:
            on_progress(res)

    batch = 0
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= seconds or (max_examples is not None and res.examples >= max_examples):
            break
        n = BATCH if max_examples is None else max(1, min(BATCH, max_examples - res.examples))
        run = settings(
            max_examples=n,
            deadline=None,
            database=database,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
            print_blob=False,
        )(given(strat)(check))
        if seed is not None:
            run = hyp_seed(seed * 1_000_003 + batch)(run)
        batch += 1
        try:
            run()
        except Exception as e:  # noqa: BLE001 - a crash in the target is a finding too
            window, ops = last["case"]
            res.failure = f"{type(e).__name__}: {e}"
            found = {"target": target.name, "error": res.failure[:500],
                     "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "campaign_seed": seed}
            s = seedstore.Seed(window, list(ops), found)
            path, _ = seedstore.save_seed(s, seed_dir if seed_dir is not None else seedstore.SEED_DIR)
            res.seed_id, res.seed_path = s.id, str(path)
            res.replay = f"kvwindow replay {path} --target {target.name}"
            res.failure += f"\n  case: window={window} ops: {format_ops(ops) or '(none)'}"
            break
    res.seconds = time.monotonic() - start
    return res
