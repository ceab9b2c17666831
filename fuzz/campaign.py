"""The campaign loop: Hypothesis drives one target at a time within a time budget.

Hypothesis stops after ``max_examples``, so a timed campaign runs it in
batches (each with its own derived seed) until the budget is spent; the
example database carries what earlier batches — and earlier campaigns, other
workers, other machines — found. On failure Hypothesis shrinks, replays the
minimal case last, and that case becomes a regression seed.

The budget is enforced inside the test function: once the time is spent (or a
stop is requested) the next example raises :class:`_Stop`, a
``KeyboardInterrupt`` subclass that Hypothesis passes straight through
without recording it as a failure. A failure being shrunk is never cut short
by the budget; a real Ctrl-C during shrinking keeps the smallest failing case
seen so far and saves it as the seed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import random

from hypothesis import HealthCheck, Phase, Verbosity, example, given, seed as hyp_seed, settings
from hypothesis.database import ExampleDatabase

from fuzz import seeds as seedstore
from fuzz.ops import PHASES, Chunk, Push, Reset, format_ops
from fuzz.strategies import boundary_tours, cases
from fuzz.targets.base import Target

BATCH = 100


class _Stop(KeyboardInterrupt):
    """Raised inside the test function to end a campaign: the budget is spent or a stop was requested."""


@dataclass
class Failure:
    """One bug a campaign found: the error, the shrunk case and where its seed lives."""

    target: str
    error: str
    window: int
    ops: str
    seed_id: str | None = None
    seed_path: str | None = None
    replay: str | None = None
    created: bool = True

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


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
    #: Examples (and seconds) until the first failing example, before shrinking.
    examples_to_fail: int | None = None
    seconds_to_fail: float | None = None
    steps_to_fail: int | None = None
    #: The shrunk failing case, as text (``push chunk:5 reset:3``) and its window.
    fail_window: int | None = None
    fail_ops: str | None = None
    failures: list[Failure] = field(default_factory=list)
    interrupted: bool = False
    done: bool = False
    workers: int = 1
    campaign_seed: int | None = None

    @property
    def examples_per_s(self) -> float:
        return self.examples / self.seconds if self.seconds else 0.0

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "examples": self.examples,
            "steps": self.steps,
            "seconds": round(self.seconds, 3),
            "examples_per_s": round(self.examples_per_s, 1),
            "steps_per_s": round(self.steps_per_s, 1),
            "phases": dict(self.phases),
            "failures": [f.to_json() for f in self.failures],
            "examples_to_fail": self.examples_to_fail,
            "seconds_to_fail": self.seconds_to_fail,
            "steps_to_fail": self.steps_to_fail,
            "versions": dict(self.versions),
            "interrupted": self.interrupted,
            "workers": self.workers,
            "campaign_seed": self.campaign_seed,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "TargetResult":
        r = cls(d["name"], examples=d["examples"], steps=d["steps"], seconds=d["seconds"],
                phases=dict(d["phases"]), versions=dict(d.get("versions", {})),
                examples_to_fail=d.get("examples_to_fail"), seconds_to_fail=d.get("seconds_to_fail"),
                steps_to_fail=d.get("steps_to_fail"),
                interrupted=d.get("interrupted", False), workers=d.get("workers", 1),
                campaign_seed=d.get("campaign_seed"))
        r.failures = [Failure(**f) for f in d.get("failures", [])]
        r.adopt_first_failure()
        return r

    def adopt_first_failure(self) -> None:
        """Fill the flat fields (``failure``, ``seed_id``, ... ``fail_ops``) from ``failures[0]``:
        what a result rebuilt from JSON or merged from workers shows as its failure."""
        if self.failures:
            f = self.failures[0]
            self.failure, self.seed_id, self.seed_path, self.replay = f.error, f.seed_id, f.seed_path, f.replay
            self.fail_window, self.fail_ops = f.window, f.ops


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
    stop: Callable[[], bool] | None = None,
    save_seed: bool = True,
    shrink: bool = True,
) -> TargetResult:
    """Fuzz ``target`` until ``seconds`` pass, ``max_examples`` run, it fails, or ``stop()`` is true.

    A ``KeyboardInterrupt`` ends the campaign cleanly: the result says
    ``interrupted`` and keeps whatever failure was found so far (saved as a seed).
    """
    res = TargetResult(target.name, versions=target.versions())
    if seed is None:  # a campaign is always reproducible: draw its seed and report it
        seed = random.SystemRandom().randrange(2**32)
    res.campaign_seed = seed
    wmax = min(window_max, target.max_window or window_max)
    strat = strategy if strategy is not None else cases(wmax, max_tokens=target.max_tokens)
    # The default strategy starts from the boundary tours (explicit examples, first batch only).
    tours = [] if strategy is not None else [
        c for c in boundary_tours(wmax, target.max_tokens) if target.accepts(*c) is None]
    last: dict = {}
    state = {"failing": False, "smallest": None}
    start = time.monotonic()

    def check(case):
        now = time.monotonic() - start
        if not state["failing"]:
            if now >= seconds or (max_examples is not None and res.examples >= max_examples) \
                    or (stop is not None and stop()):
                raise _Stop()
        window, ops = case
        last["case"] = case
        try:
            stats = target.run(window, ops)
        except Exception:
            res.examples += 1
            if not state["failing"]:
                state["failing"] = True
                res.examples_to_fail = res.examples
                res.seconds_to_fail = round(time.monotonic() - start, 4)
                res.steps_to_fail = res.steps + sum(op.tokens for op in ops)
            small = state["smallest"]
            if small is None or _size(case) <= _size(small):
                state["smallest"] = case
            raise
        res.examples += 1
        res.steps += stats.steps
        for p in stats.phases:
            res.phases[p] += 1
        res.seconds = time.monotonic() - start
        if on_progress is not None:
            on_progress(res)

    def batch_test(explicit):
        """A fresh test function per batch (``@example`` and ``@given`` attach state to it)."""
        def test(case):
            return check(case)
        # One database key per target: workers and machines fuzzing the same target share a corpus.
        test._hypothesis_internal_add_digest = f"kvwindow:{target.name}".encode()  # type: ignore[attr-defined]
        for case in reversed(explicit):
            test = example(case)(test)
        return given(strat)(test)

    batch = 0
    error: BaseException | None = None
    try:
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= seconds or (max_examples is not None and res.examples >= max_examples):
                break
            if stop is not None and stop():
                res.interrupted = True
                break
            n = BATCH if max_examples is None else max(1, min(BATCH, max_examples - res.examples))
            # @seed makes the run reproducible; settings applied on top keep the example
            # database (a bare @seed would switch it off), so seeded campaigns share too.
            run = settings(
                max_examples=n,
                deadline=None,
                database=database,
                derandomize=False,
                suppress_health_check=list(HealthCheck),
                phases=[Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if shrink else []),
                print_blob=False,
                report_multiple_bugs=False,
                verbosity=Verbosity.quiet,
            )(hyp_seed(seed * 1_000_003 + batch)(batch_test(tours if batch == 0 else [])))
            batch += 1
            try:
                run()
            except _Stop:
                if stop is not None and stop():
                    res.interrupted = True
                break
            except Exception as e:  # noqa: BLE001 - a crash in the target is a finding too
                error = e
                break
    except KeyboardInterrupt:
        res.interrupted = True
        if state["failing"]:
            error = KeyboardInterrupt("interrupted while shrinking")
            last["case"] = state["smallest"]
    if error is not None and last.get("case") is not None:
        if last["case"] in tours:  # explicit examples are not shrunk by Hypothesis: reduce them here
            last["case"] = reduce_case(target, last["case"], type(error))
            try:  # the reduced case's own message
                target.run(*last["case"])
            except Exception as e:  # noqa: BLE001
                error = e
        _record_failure(res, target, error, last["case"], seed, seed_dir, save_seed)
    res.seconds = time.monotonic() - start
    res.done = True
    return res


def reduce_case(target: Target, case, error_type: type, budget: int = 2000):
    """Greedy delta-debugging of a failing case: drop ops, shrink chunks, narrow windows.

    Hypothesis shrinks what it generated, but not explicit examples (the boundary
    tours); this gives their failures the same small, readable seeds. A candidate
    is kept only if it still fails with the same exception type.
    """
    def fails(c) -> bool:
        try:
            target.run(*c)
        except error_type:
            return True
        except Exception:  # noqa: BLE001 - another failure is another bug, not this one
            return False
        return False

    def candidates(c):
        window, ops = c
        if ops and isinstance(ops[0], Reset):
            yield ops[0].window, ops[1:]
        for i in range(len(ops)):
            yield window, ops[:i] + ops[i + 1:]
        for i, op in enumerate(ops):
            if isinstance(op, Chunk):
                for n in sorted({0, 1, op.n // 2, op.n - 1}):
                    if n < op.n:
                        yield window, ops[:i] + [Push() if n == 1 else Chunk(n)] + ops[i + 1:]
            elif isinstance(op, Reset) and op.window > 1:
                yield window, ops[:i] + [Reset(op.window - 1)] + ops[i + 1:]
        if window > 1:
            yield window - 1, ops

    best = (case[0], list(case[1]))
    improved = True
    while improved and budget > 0:
        improved = False
        for cand in candidates(best):
            budget -= 1
            if fails(cand):
                best, improved = cand, True
                break
            if budget <= 0:
                break
    return best


def _size(case) -> tuple[int, int]:
    window, ops = case
    return (len(ops), window)


def _record_failure(res: TargetResult, target: Target, error: BaseException, case, seed, seed_dir,
                    save: bool) -> None:
    window, ops = case
    msg = f"{type(error).__name__}: {error}"
    if isinstance(error, KeyboardInterrupt):
        # Interrupted mid-shrink: re-run the smallest failing case to get its own message.
        try:
            target.run(window, ops)
            msg = "failure found, but the smallest case no longer fails (flaky target?)"
        except Exception as e:  # noqa: BLE001
            msg = f"{type(e).__name__}: {e}"
    text = format_ops(ops)
    fail = Failure(target.name, msg[:2000], window, text)
    if save:
        found = {"target": target.name, "error": msg[:500],
                 "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "campaign_seed": seed}
        s = seedstore.Seed(window, list(ops), found)
        path, created = seedstore.save_seed(s, seed_dir if seed_dir is not None else seedstore.SEED_DIR)
        fail.seed_id, fail.seed_path, fail.created = s.id, str(path), created
        fail.replay = f"kvwindow replay {path} --target {target.name}"
    res.failures.append(fail)
    res.failure = msg + f"\n  case: window={window} ops: {text or '(none)'}"
    res.seed_id, res.seed_path, res.replay = fail.seed_id, fail.seed_path, fail.replay
    res.fail_window, res.fail_ops = window, text
