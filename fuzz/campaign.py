"""The campaign of one target: a short driver over the phases of :mod:`fuzz.phases`.

Order (``fuzz.phases.ORDER``): the target's crashes at its availability probe first (outcomes already seen, not
run again: :meth:`fuzz.phases.context.Campaign.probe_crashes`), then the one-off phases — the boundary tours and
the error tour (cheap, aimed), the long tour (only when the rate the tours showed says it ends in time), the bulk
phase — then batches of generated and multi-instance cases by their budget shares until the time
or ``max_examples`` runs out or a stop is requested (``--stop-on-first``: or a finding is saved).

Every exception a target raises is classified (DESIGN §4, :func:`fuzz.targets.base.failure_kind`):
a mismatch or a crash is a finding, shrunk and saved — one per signature (DESIGN §4, distinct findings:
:func:`fuzz.results.signature`), the campaign exploring on after each; a harness fault stops the target
at once with its one-line reason and is never shrunk, stored in the example database or saved.

Shrinking a failure (and reducing a failing tour) may run on for :func:`slack` seconds past the
budget; then, or at a stop request (Ctrl-C, SIGTERM), it is cut short and the smallest failing case
seen so far is the one saved. Nothing found is dropped: the smallest failing case is tracked from
the first failure on (and published as ``pending`` with the progress, so a parent can save it if
this process dies).
"""

from __future__ import annotations

from typing import Callable

from hypothesis.database import ExampleDatabase
from hypothesis.errors import Flaky

from fuzz.config import CampaignConfig
from fuzz.phases import ORDER
from fuzz.phases.base import BATCH, HypothesisPhase, Phase  # noqa: F401 - BATCH: part of this module's API
from fuzz.phases.bulk import Bulk
from fuzz.phases.context import Campaign, Found, set_fresh, slack
from fuzz.phases.generated import Generated, Instances
from fuzz.phases.leaks import Leaks
from fuzz.phases.threads import Threads
from fuzz.phases.reduce import fault_line, reduce_failure  # noqa: F401 - reduce_failure: part of this API
from fuzz.phases.tours import LONG_TOUR_SKIPPED, BoundaryTours, ErrorTour, LongTour, ScaleTours  # noqa: F401
from fuzz.results import Failure, TargetResult
from fuzz.saving import save_failure  # noqa: F401 - re-exported: fuzz.campaign.save_failure
from fuzz.targets.base import Target

__all__ = ["fuzz_target", "reduce_failure", "save_failure", "slack", "LONG_TOUR_SKIPPED", "BATCH"]


def fuzz_target(
    target: Target,
    config: CampaignConfig,
    *,
    seconds: float | None = None,
    database: ExampleDatabase | None = None,
    on_progress: Callable[[TargetResult], None] | None = None,
    stop: Callable[[], bool] | None = None,
    deadline: float | None = None,
    once: bool = True,
    enough: Callable[[TargetResult], bool] | None = None,
    prior: tuple[Failure, ...] = (),
) -> TargetResult:
    """Fuzz ``target`` as ``config`` says until ``seconds`` (default ``config.seconds``) pass,
    ``config.max_examples`` run, it fails, or ``stop()`` is true.

    ``deadline`` (a ``time.monotonic()`` value, default ``seconds`` + :func:`slack` from now) is when
    shrinking and reduction are cut short. ``once=False`` skips the one-off phases (tours, error tour,
    bulk, long tour): a continuation of a target that already ran them (:mod:`fuzz.workers`' second
    round); ``enough(result)`` true ends it early, as a spent budget does (:mod:`fuzz.schedule`'s coverage
    goal). A stop request or a ``KeyboardInterrupt`` ends the campaign cleanly: the result says
    ``interrupted`` and keeps the smallest failure found so far (saved as a seed). A harness fault ends
    it with ``faults`` set and nothing saved for it. A finding does not end it (``config.stop_on_first``
    does): it is saved and the campaign explores on, reporting each signature once; ``prior`` are the
    findings an earlier round of this campaign saved (not reported again).
    """
    camp = Campaign(target, config, seconds=config.seconds if seconds is None else seconds, database=database,
                    on_progress=on_progress, stop=stop, deadline=deadline, enough=enough, prior=tuple(prior))
    one_off, repeating = ("tours", "errors", "long", "bulk", "scale", "leaks"), [Generated(), Instances(), Threads()]
    plan: list[Phase] = [BoundaryTours(), ErrorTour(), LongTour(), Bulk(), ScaleTours(), Leaks(), *repeating]
    if camp.target.kind == "paged":  # sequences in a block pool: its own tours and batches (fuzz/phases/paged.py)
        from fuzz.phases.paged import paged_plan

        plan, one_off, repeating = paged_plan(plan)
    live = {p.name: p for p in plan}
    for p in plan:
        why = p.not_applicable(camp)
        if why is not None:
            camp.mark(p.name, "n/a", why)
            del live[p.name]
        elif not once and p.name in one_off:
            camp.mark(p.name, "n/a", "ran in this target's first round")
            del live[p.name]
        else:
            camp.phase_record(p.name)
    if once:  # what the target's probes already saw die (DESIGN §4): outcomes before any case runs
        camp.probe_crashes()
    try:
        # The one-off phases first, whatever max_examples says (it counts drawn cases; the bulk phase runs
        # even when the time is spent: it is a fraction of a second); the time budget and stop requests
        # still end the tours, and the long tour runs only if the rate the tours showed says it ends in time.
        for name in one_off:
            if name in live and not _halt(camp, one_off=True):
                live[name].run(camp)
        _loop(camp, [p for p in repeating if p.name in live])
    except KeyboardInterrupt:  # a second Ctrl-C, or one outside a phase's test function
        camp.res.interrupted = True
    finally:
        set_fresh(camp.target, False)
    for p in repeating:
        if p.exhausted is not None:
            camp.mark(p.name, "ran" if camp.phase_record(p.name)["examples"] else "skipped", p.exhausted)
            camp.res.warnings.append(f"{camp.target.name}: {p.name}: {p.exhausted}")
    for name in ORDER:
        rec = camp.res.phases_run.get(name)
        if rec is not None and rec["status"] == "not reached" and not rec.get("why"):
            rec["why"] = ("a harness fault stopped the campaign first" if camp.fault is not None else
                          "a finding ended the campaign first" if camp.best or camp.error or (
                              camp.res.failures and camp.config.stop_on_first) else
                          "interrupted first" if camp.res.interrupted else "the budget was spent before it")
    return _finish(camp)


def _halt(camp: Campaign, one_off: bool = False) -> bool:
    """Whether the campaign must stop before its next phase (a one-off phase ignores the budget: it
    stops itself on time, and ``max_examples`` counts drawn cases)."""
    if camp.stopping():
        camp.res.interrupted = True
        return True
    return camp.done or (not one_off and camp.out_of_budget())


def _loop(camp: Campaign, phases: list[HypothesisPhase]) -> None:
    """Batches of the repeating phases, each time the one furthest below its budget share (of the time, or of
    ``max_examples`` when the campaign counts examples)."""
    def used(q: HypothesisPhase) -> float:
        if camp.max_examples is not None:
            return camp.phase_record(q.name)["examples"] / q.share
        return q.seconds / q.share

    while not _halt(camp):
        live = [p for p in phases if p.exhausted is None]
        if not live:
            return
        min(live, key=used).run_batch(camp)


def _finish(camp: Campaign) -> TargetResult:
    """Settle what is still open when the campaign ends — a failure whose shrinking or reduction was cut short
    (by the budget, a stop request, a flaky replay), the other new findings met while it was shrunk — and close
    the result. Every finding found on the way was saved already (:meth:`Campaign.settle`)."""
    res, error, target = camp.res, camp.error, camp.target
    note = None
    if error is not None and hasattr(error, "_kvwindow_case"):
        smallest: Found | None = Found(error._kvwindow_case, error)  # Hypothesis's shrunk case, replayed last
    elif camp.bulk_found is not None:
        smallest = camp.bulk_found
    else:
        smallest = camp.best
        if error is not None and isinstance(error, Flaky) and smallest is not None:
            note = "flaky: the smallest failing case did not fail again when Hypothesis replayed it"
        elif error is not None and camp.fault is None:  # raised outside the test function: Hypothesis, the db
            camp.fault = error
        if smallest is not None and note is None and smallest.case.id not in camp.explicit:
            note = ("interrupted while shrinking: the smallest failing case so far" if res.interrupted else
                    "shrinking cut short at the time budget: the smallest failing case so far")
    if camp.fault is not None:
        res.faults.append(fault_line(camp.fault))
    if smallest is not None:
        camp.settle(smallest, note)
    for sig, found in list(camp.deferred.items()):  # met while shrinking another one: saved as they ran
        camp.deferred.pop(sig, None)
        if sig not in camp.known.found and not (camp.config.stop_on_first and res.failures):
            camp.settle(found, "found while another finding was shrunk; not reduced (the campaign ended first)")
    take = getattr(target, "take_slow", None)  # an isolated target's timeouts that were slow, not hangs
    if take is not None:
        res.slow += take()
    res.pending = None
    res.phase = "done"
    res.seconds = camp.elapsed()
    res.done = True
    return res
