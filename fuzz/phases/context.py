"""``Campaign``: the state one target's campaign shares among its phases, and the one place a case runs.

What used to be closures over mutable cells inside the campaign loop (the smallest failure so far,
the fastest rate seen, whether the bulk phase ran) is this object's state; every phase calls
:meth:`Campaign.execute` for each case, which

* ends the campaign when the budget is spent or a stop was requested (raising :class:`Stop`, a
  ``KeyboardInterrupt`` subclass that Hypothesis passes straight through without recording it);
* rejects a case that would hit a known finding already reproduced enough times, before it runs
  (:class:`fuzz.phases.known.KnownBudget`);
* runs it, counts it (examples, tokens, coverage, known findings, per-phase counters);
* keeps the smallest failing case seen so far from the first failure on (published as ``pending``
  so a parent can save it if this process dies), and stops the target at a harness fault.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, Optional

from hypothesis.database import ExampleDatabase
from hypothesis.errors import UnsatisfiedAssumption

from fuzz.config import CampaignConfig
from fuzz.ops import Case
from fuzz.phases import ORDER
from fuzz.phases.known import KnownBudget
from fuzz.results import Failure, TargetResult
from fuzz.targets.base import HARNESS, Target, failure_kind
from fuzz.targets.known import release_warnings


def slack(seconds: float) -> float:
    """How long shrinking and reduction may run past a budget of ``seconds``: 10 %, at least 2 s."""
    return max(2.0, 0.1 * seconds)


class Stop(KeyboardInterrupt):
    """Raised inside a phase to end the campaign: the budget is spent or a stop was requested."""


@dataclass
class Found:
    """The smallest failing case seen so far, and what it raised."""

    case: Case
    error: BaseException


def size(case: Case) -> tuple[int, int, int, int]:
    return (case.instance_count, len(case.ops), case.tokens, case.window)


def message(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:2000]


def set_fresh(target: Target, fresh: bool) -> None:
    """Every case in a fresh process while a failure is shrunk (an isolated target's ``fresh``)."""
    if hasattr(target, "fresh"):
        target.fresh = fresh  # type: ignore[attr-defined]


class Campaign:
    """One target's campaign: its configured target, budget, result and the failure it is settling."""

    def __init__(self, target: Target, config: CampaignConfig, *, seconds: float,
                 database: ExampleDatabase | None = None,
                 on_progress: Callable[[TargetResult], None] | None = None,
                 stop: Callable[[], bool] | None = None, deadline: float | None = None,
                 enough: Callable[[TargetResult], bool] | None = None):
        self.config = config
        self.target = target.configured(config)  # the campaign's pinned width and dtype, --skip-known
        self.seconds = seconds
        self.max_examples = config.max_examples
        self.database = database
        self._on_progress = on_progress
        self._stop = stop
        self._enough = enough
        res = TargetResult(self.target.name, versions=self.target.versions(), tolerances=self.target.tolerances(),
                           known_links=self.target.finding_links())
        res.warnings += release_warnings(res.versions)  # a library newer than docs/compat.md: one line per campaign
        self.res = res
        seed = config.campaign_seed
        if seed is None:  # a campaign is always reproducible: draw its seed and report it
            seed = random.SystemRandom().randrange(2**32)
        res.campaign_seed = self.campaign_seed = seed
        self.window_max = min(config.window_max, self.target.window_max or config.window_max)
        self.start = time.monotonic()
        self.hard = self.start + seconds + slack(seconds) if deadline is None else deadline
        self.best: Optional[Found] = None
        self.fault: Optional[BaseException] = None
        #: What Hypothesis raised at the end of a batch that found something (its shrunk case, replayed last).
        self.error: Optional[BaseException] = None
        #: The bulk phase's failure, reduced already to an op list.
        self.bulk_found: Optional[Found] = None
        #: Cases run as explicit examples (tours): a failure among them is reduced here, not by Hypothesis.
        self.explicit: set[str] = set()
        self.fastest = 0.0  # tokens/s of the fastest example so far
        self.done = False
        self.known = KnownBudget(config.known_repeats, res)

    # -- time and stopping -------------------------------------------------
    def stopping(self) -> bool:
        return self._stop is not None and self._stop()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def out_of_budget(self) -> bool:
        """The time is spent, ``max_examples`` ran, or the caller's coverage goal is met (``enough``)."""
        return self.elapsed() >= self.seconds or (self.max_examples is not None
                                                  and self.res.examples >= self.max_examples) \
            or (self._enough is not None and self._enough(self.res))

    def publish(self) -> None:
        if self._on_progress is not None:
            self._on_progress(self.res)

    # -- the phase table ------------------------------------------------------
    def phase_record(self, name: str) -> dict:
        if name not in ORDER:
            raise ValueError(f"unknown phase {name!r}; phases: {', '.join(ORDER)}")
        return self.res.phases_run.setdefault(name, {"status": "not reached", "examples": 0, "seconds": 0.0})

    def mark(self, name: str, status: str, why: str = "") -> None:
        rec = self.phase_record(name)
        rec["status"] = status
        if why:
            rec["why"] = why
        elif status == "ran":
            rec.pop("why", None)

    # -- failures -------------------------------------------------------------
    def found(self, case: Case, e: BaseException) -> None:
        """Keep ``case`` if it is the smallest failing the way the first failure did."""
        res = self.res
        if self.best is None:
            res.examples_to_fail = res.examples
            res.seconds_to_fail = round(self.elapsed(), 4)
            res.tokens_to_fail = res.tokens + case.tokens
            res.phase = "reducing" if case.id in self.explicit else "shrinking"
            set_fresh(self.target, True)
        elif type(e) is not type(self.best.error) or size(case) > size(self.best.case):
            return
        self.best = Found(case, e)
        res.pending = Failure(self.target.name, message(e), case, kind=failure_kind(e))
        self.publish()

    # -- one case ---------------------------------------------------------------
    def execute(self, case: Case, phase: str, *, in_hypothesis: bool = False):
        """Run ``case`` for ``phase``: ``None`` when it was left out (a known finding reproduced often
        enough; inside Hypothesis it is rejected instead), else its :class:`~fuzz.targets.base.RunStats`.
        A failure is recorded and re-raised; :class:`Stop` ends the campaign. ``max_examples`` counts
        the cases Hypothesis draws; the explicit ones of the one-off phases run whatever it says."""
        now = time.monotonic()
        if self.best is not None:
            if now >= self.hard or self.stopping():
                raise Stop()
        elif now - self.start >= self.seconds or now >= self.hard or self.stopping() or \
                (in_hypothesis and self.max_examples is not None and self.res.examples >= self.max_examples) or \
                (in_hypothesis and self._enough is not None and self._enough(self.res)):
            raise Stop()
        if self.known.saturated(self.target, case):
            if in_hypothesis:
                from hypothesis import reject

                reject()
            return None
        rec = self.phase_record(phase)
        began = time.perf_counter()
        try:
            stats = self.target.run(case)
        except UnsatisfiedAssumption:  # the target left the case out (Hypothesis's reject()): not a failure
            raise
        except Exception as e:
            self.res.examples += 1
            rec["examples"] += 1
            rec["seconds"] += time.perf_counter() - began
            if failure_kind(e) == HARNESS:
                self.fault = e
                raise Stop() from e
            self.found(case, e)
            try:  # what Hypothesis raises at the end is recognised by this mark, with the case that raised it
                e._kvwindow_case = case  # type: ignore[attr-defined]
            except AttributeError:
                pass
            raise
        took = time.perf_counter() - began
        if stats.tokens and took > 0:
            self.fastest = max(self.fastest, stats.tokens / took)
        res = self.res
        res.examples += 1
        res.tokens += stats.tokens
        res.count_known(stats.known)
        if stats.efficiency:
            res.count_efficiency(stats, case)
        self.known.count(stats.known)
        for fid, outcome in stats.known.items():
            if outcome and fid not in res.known_first:
                res.known_first[fid] = {"examples": res.examples, "seconds": round(self.elapsed(), 4)}
        for p in stats.phases:
            res.phases[p] += 1
        rec["examples"] += 1
        rec["seconds"] += took
        res.seconds = time.monotonic() - self.start
        self.publish()
        return stats
