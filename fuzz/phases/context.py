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

Distinct findings (DESIGN §4): every failure has a signature (:func:`fuzz.results.signature`). A failure
whose signature this campaign already reported is not reported again (it counts as a repeat of that
finding, and to Hypothesis the case passes); while one finding is shrunk, a failure with another new
signature never replaces it (a shrink that changes the signature is rejected) but is kept aside
(:attr:`Campaign.deferred`) and settled — reduced, saved — once the first one is. :meth:`Campaign.settle`
saves a finding and lets the campaign go on exploring (``--stop-on-first``: it ends there).
"""

from __future__ import annotations

import random
import time
from typing import Callable, Optional

from hypothesis.database import ExampleDatabase
from hypothesis.errors import UnsatisfiedAssumption

from fuzz.config import CampaignConfig
from fuzz.ops import Case
from fuzz.phases import ORDER
from fuzz.phases.known import KnownBudget
from fuzz.phases.reduce import CONFIRM_RUNS, Found, confirm, reduce_failure, set_fresh  # noqa: F401 - Found, set_fresh: re-exported
from fuzz.results import Failure, TargetResult, signature
from fuzz.saving import save_failure
from fuzz.targets.base import HARNESS, Target, failure_kind
from fuzz.targets.known import release_warnings


def slack(seconds: float) -> float:
    """How long shrinking and reduction may run past a budget of ``seconds``: 10 %, at least 2 s."""
    return max(2.0, 0.1 * seconds)


class Stop(KeyboardInterrupt):
    """Raised inside a phase to end the campaign: the budget is spent or a stop was requested."""


def size(case: Case) -> tuple[int, int, int, int]:
    return (case.instance_count, len(case.ops), case.tokens, case.window)


def message(error: BaseException) -> str:
    """The one-line-first text of a failure as reports keep it (every mismatch message is already short at any
    window: :func:`fuzz.oracle.describe_difference`; the cut is a guard against a third-party error's length)."""
    return f"{type(error).__name__}: {error}"[:2000]


class Campaign:
    """One target's campaign: its configured target, budget, result and the failure it is settling."""

    def __init__(self, target: Target, config: CampaignConfig, *, seconds: float,
                 database: ExampleDatabase | None = None,
                 on_progress: Callable[[TargetResult], None] | None = None,
                 stop: Callable[[], bool] | None = None, deadline: float | None = None,
                 enough: Callable[[TargetResult], bool] | None = None, prior: tuple[Failure, ...] = ()):
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
        for f in prior:  # findings an earlier round of this campaign saved: not found again (fuzz.schedule)
            self.known.record(f)
        #: The signature of the finding being shrunk or reduced now (``None``: none).
        self.shrinking: Optional[str] = None
        #: Other new signatures met meanwhile: signature -> the smallest case of it (settled after the current one).
        self.deferred: dict[str, Found] = {}

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
    def found(self, case: Case, e: BaseException, sig: str) -> None:
        """Keep ``case`` if it is the smallest failing with the signature being shrunk (the first new one)."""
        res = self.res
        if self.best is None:
            if res.examples_to_fail is None:  # time to bug: the campaign's first finding
                res.examples_to_fail = res.examples
                res.seconds_to_fail = round(self.elapsed(), 4)
                res.tokens_to_fail = res.tokens + case.tokens
            res.phase = "reducing" if case.id in self.explicit else "shrinking"
            self.shrinking = sig
            set_fresh(self.target, True)
        elif sig != self.shrinking or size(case) > size(self.best.case):
            return
        self.best = Found(case, e)
        res.pending = Failure(self.target.name, message(e), case, kind=failure_kind(e), signature=sig)
        self.publish()

    def defer(self, sig: str, case: Case, e: BaseException) -> None:
        """Keep a failure with a new signature met while another one is shrunk (the smallest case of it)."""
        have = self.deferred.get(sig)
        if have is None or size(case) < size(have.case):
            self.deferred[sig] = Found(case, e)

    def settle(self, smallest: Found, note: Optional[str] = None) -> None:
        """Save the finding ``smallest`` stands for (a tour's or a multi-instance case's reduced first, never into
        another signature), record its signature so later cases of it are left out or not re-reported, and go
        on exploring (``--stop-on-first``: the campaign ends here). Then the other new signatures met meanwhile."""
        res, target = self.res, self.target
        sig = signature(target.name, smallest.error, smallest.case)
        seen = self.known.found.get(sig)
        if seen is not None:  # e.g. the bulk phase meeting a tour's finding: one finding, counted again
            seen.repeats += 1
            self.best, self.error, self.shrinking, self.bulk_found = None, None, None, None
            res.pending, res.phase = None, "fuzzing"
            set_fresh(target, False)
            self.done = self.done or self.config.stop_on_first
            return
        reduce = smallest.case.id in self.explicit or bool(getattr(smallest.case, "instances", ()))
        if reduce and smallest is not self.bulk_found and self.fault is None and not res.interrupted:
            res.phase = "reducing"
            self.publish()
            smallest, why = reduce_failure(
                target, smallest.case, smallest.error, deadline=self.hard, stop=self.stopping,
                narrow_width=self.config.width is None,
                same=lambda c, e: signature(target.name, e, c) == sig, other=self.other_failure)
            if why == "interrupted":
                res.interrupted = True
                note = "interrupted while reducing: the smallest failing case so far"
            elif why == "deadline":
                note = "reduction cut short at the time budget: the smallest failing case so far"
            elif why is not None:  # a harness fault while reducing: the case so far is saved, the target stops
                res.faults.append(why)
                self.done = True
        elif reduce and note is None and res.interrupted:
            note = "interrupted while reducing: the smallest failing case so far (the failing case as it ran)"
        if getattr(smallest.case, "threads", False) and self.fault is None and not res.interrupted:
            note = self._confirm_race(smallest.case, note)
        fail = Failure(target.name, message(smallest.error), smallest.case, kind=failure_kind(smallest.error),
                       note=note, signature=sig)
        res.failures.append(save_failure(fail, self.config, self.campaign_seed))
        self.known.record(fail)
        self.deferred.pop(sig, None)
        self.best, self.error, self.shrinking, self.bulk_found = None, None, None, None
        res.pending = None
        res.phase = "fuzzing"
        set_fresh(target, False)
        if self.config.stop_on_first or self.fault is not None or res.interrupted or self.done:
            self.done = True
            return
        self.publish()
        while self.deferred and not self.done:  # each one reduced (Hypothesis did not shrink it) and saved
            sig2 = next(iter(self.deferred))
            if sig2 in self.known.found:
                del self.deferred[sig2]
                continue
            self.explicit.add(self.deferred[sig2].case.id)
            self.settle(self.deferred.pop(sig2))

    def probe_crashes(self) -> None:
        """Report the target's crashes at its availability probe (:meth:`fuzz.targets.base.Target.probe_crashes`,
        DESIGN §4) as outcomes of this campaign, before any case runs: one the written-up findings explain is a
        known finding reproduced (``--skip-known``: skipped); any other is a crash finding with its signature,
        saved as a seed (the probe's call as a case) like every finding. The probe's case is not run again here:
        it died already, in the probe's own (child) process."""
        res = self.res
        for pc in self.target.probe_crashes():
            if pc.known is not None:
                if getattr(self.config, "skip_known", False):
                    res.count_known({pc.known: None})
                    continue
                res.count_known({pc.known: True})
                self.known.count({pc.known: True})
                c = pc.case  # a known finding saves no seed: the report says how to replay the probe's case
                res.known_links.setdefault(pc.known, {})["probe_replay"] = (
                    f"kvwindow seeds add --window {c.window} --ops '{c.text}' --seeds-dir DIR && "
                    f"kvwindow replay DIR/{c.id}.json --target {self.target.name}")
                res.known_first.setdefault(pc.known, {"examples": 0, "seconds": round(self.elapsed(), 4)})
                continue
            sig = signature(self.target.name, pc.error, pc.case)
            seen = self.known.found.get(sig)
            if seen is not None:  # two probes that died alike: one finding
                seen.repeats += 1
                continue
            if res.examples_to_fail is None:
                res.examples_to_fail, res.seconds_to_fail, res.tokens_to_fail = 0, round(self.elapsed(), 4), 0
            fail = Failure(self.target.name, message(pc.error), pc.case, kind=failure_kind(pc.error),
                           note="died at the availability probe (its own process), which ran the same call without "
                                "the window; not run again in the campaign", signature=sig)
            res.failures.append(save_failure(fail, self.config, self.campaign_seed))
            self.known.record(fail)
            if self.config.stop_on_first:
                self.done = True
                break
        self.publish()

    def _confirm_race(self, case: Case, note: Optional[str]) -> str:
        """A threaded case fails by chance (a race), so before it is saved it is re-run
        (:func:`fuzz.phases.reduce.confirm`) and the count that failed again goes into the finding's note: a case
        that never fails again is saved all the same (a rare race is still a race), and says so."""
        failed, runs = confirm(self.target, case, runs=CONFIRM_RUNS)
        race = (f"a race: failed again in {failed} of {runs} threaded re-runs" if failed else
                f"failed once, then in none of {runs} threaded re-runs: a rare race, kept; replay it to confirm")
        return f"{note}; {race}" if note else race

    def other_failure(self, case: Case, e: BaseException) -> None:
        """A reduction met a failure that is not the one it reduces: another bug, kept for later unless reported."""
        if failure_kind(e) == HARNESS:
            return
        sig = signature(self.target.name, e, case)
        if sig in self.known.found:
            return
        if sig != self.shrinking:
            self.defer(sig, case, e)

    # -- one case ---------------------------------------------------------------
    def execute(self, case: Case, phase: str, *, in_hypothesis: bool = False):
        """Run ``case`` for ``phase``: ``None`` when it was left out (a known finding reproduced often
        enough, or a finding of this campaign it is predicted to repeat; inside Hypothesis it is rejected
        instead) or failed with a signature already reported or not the one being shrunk (then it passes),
        else its :class:`~fuzz.targets.base.RunStats`. A new failure is recorded and re-raised; :class:`Stop`
        ends the campaign. ``max_examples`` counts
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
            sig = signature(self.target.name, e, case)
            seen = self.known.found.get(sig)
            if seen is not None:  # a bug this campaign reported already: counted on it, not reported again
                seen.repeats += 1
                self.publish()
                return None
            if self.shrinking is not None and sig != self.shrinking:  # another new bug: never shrunk into this one
                self.defer(sig, case, e)
                return None
            self.found(case, e, sig)
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
        if stats.calls:
            res.kernel_calls += stats.calls
            res.kernel_seconds += stats.call_seconds
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
