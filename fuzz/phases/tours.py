"""The one-off phases: the boundary tours, the error tour and the long tour (explicit cases, run once).

They run before anything is drawn because they are cheap and aimed: the boundary tours walk every
window edge (``W - 1``, ``W``, ``W + 1``, chunks of ``W`` and ``2W + 3``, resets when full), so the
common boundary bugs die in the first few examples; the error tour sends every bad call of the
target's error contract at every fill level; the long tour crosses positions 2**15, 2**16 and
70 000 (int16/uint16 position bugs). The long tour is one example the budget cannot cut short, so
it runs only when, at the fastest rate the target has shown in this campaign, it would end within
the budget and its slack (a cache that costs milliseconds per entry would need minutes), which a probe
of up to 1 025 tokens tells first.
"""

from __future__ import annotations

import math
import time
from typing import Optional

from fuzz.ops import Case, Chunk, Push
from fuzz.phases.base import ExplicitPhase
from fuzz.phases.context import Campaign
from fuzz.strategies import FLOAT_BUDGET, error_tour, instance_tours, long_tour, scale_tours, window_tours

#: How a campaign's warnings say the long tour did not run (:mod:`fuzz.bench.throughput` reads it).
LONG_TOUR_SKIPPED = "long tour skipped"


def _multiple(width: int, target) -> int:
    m = getattr(target, "width_multiple", 1)
    return -(-width // m) * m


def _payload(camp: Campaign, case: Case) -> Case:
    """A tour at the campaign's pinned width and dtype (a drawn dimension leaves the target's default)."""
    if camp.config.width is not None and camp.target.widths:
        case = case.replace(width=camp.config.width)
    if camp.config.dtype is not None and camp.target.dtypes:
        case = case.replace(dtype=camp.config.dtype)
    return case


#: The payload widths the window tours take in turn where the width is drawn (the first at the target's
#: default): one below 4, one past it, a real head size — so a width baked into a cache dies in a tour.
TOUR_WIDTHS = (None, 1, 5, 64)


class BoundaryTours(ExplicitPhase):
    """The window tours — each at its own payload width and dtype where the target draws them — and, for a
    target driven as several live instances, the instance tours (:func:`fuzz.strategies.instance_tours`)."""

    name = "tours"

    def not_applicable(self, camp: Campaign) -> Optional[str]:
        return "the uniform tester has no boundary tours" if camp.config.tester == "uniform" else None

    def cases(self, camp: Campaign) -> list[Case]:
        t, cfg = camp.target, camp.config
        tours = []
        for i, c in enumerate(window_tours(camp.window_max, t.max_tokens)):
            if t.widths and cfg.width is None and TOUR_WIDTHS[i % len(TOUR_WIDTHS)] is not None:
                c = c.replace(width=_multiple(TOUR_WIDTHS[i % len(TOUR_WIDTHS)], t))
            if cfg.dtype is None and len(t.dtypes) > 1:
                c = c.replace(dtype=t.dtypes[i % len(t.dtypes)])
            tours.append(_payload(camp, c))
        if t.instances:
            tours += [_payload(camp, c) for c in instance_tours(camp.window_max, t.max_tokens)]
        return tours


#: The share of a campaign's time the scale tours may spend: each next tour runs only while the time they took so
#: far plus its estimate (:func:`scale_estimate`) stays within it.
SCALE_SHARE = 0.15


def scale_estimate(done: list[tuple[int, float]], window: int) -> float:
    """Seconds a tour at ``window`` should take, from the tours run so far (``(window, seconds)``, smallest
    first). A tour's tokens grow with its window, and each op may too (a ring that copies its window per push is
    quadratic), so the cost is taken as ``c * W**k`` with ``k`` fitted to the last two tours and held to [1, 2];
    after a single tour, ``k = 2``: an estimate that is too high only stops the tours early (the record says
    where), one too low let a Python ring's tour at W = 32 769 overrun a 60 s campaign by 40 s."""
    w1, t1 = done[-1]
    k = 2.0
    if len(done) >= 2:
        w0, t0 = done[-2]
        if t0 > 0 and t1 > 0 and w1 > w0:
            k = min(2.0, max(1.0, math.log(t1 / t0) / math.log(w1 / w0)))
    return t1 * (window / w1) ** k


class ScaleTours(ExplicitPhase):
    """The window tours at production scale (:func:`fuzz.strategies.scale_tours`: W = 33 ... 65 537), smallest first,
    while they fit :data:`SCALE_SHARE` of the budget: a tour costs about its window in tokens and reads, so the last
    one's time scaled by the next window says whether the next ends in time. The record says the largest window
    reached (``window``) and, when the budget stopped them, which were left out and why."""

    name = "scale"

    def __init__(self) -> None:
        self._prev: Optional[tuple[int, float]] = None  # (window, record seconds before it) of the last tour started
        self._done: list[tuple[int, float]] = []  # (window, seconds it took) of every tour that ran

    def not_applicable(self, camp: Campaign) -> Optional[str]:
        if camp.config.tester == "uniform":
            return "the uniform tester has no boundary tours"
        if camp.window_max <= 16:
            return f"its windows stop at {camp.window_max} (--window-max or the target's own maximum)"
        return None

    def cases(self, camp: Campaign) -> list[Case]:
        width = camp.config.width if camp.config.width is not None and camp.target.widths else None
        top = camp.window_max if width is None else min(camp.window_max, max(16, FLOAT_BUDGET // width))
        return [_payload(camp, c) for c in scale_tours(top, camp.target.max_tokens)]

    def skip(self, camp: Campaign, case: Case) -> Optional[str]:
        rec = camp.phase_record(self.name)
        if self._prev is not None:
            w, before = self._prev
            rec["window"] = w  # the largest window a scale tour ran at
            if not self._done or self._done[-1][0] != w:
                self._done.append((w, rec["seconds"] - before))
            estimate = scale_estimate(self._done, case.window)
            if rec["seconds"] + estimate > SCALE_SHARE * camp.seconds or time.monotonic() + estimate > camp.hard:
                # not a warning: a short campaign always stops here; the record says where (the phases table)
                return (f"reached W = {w:,}; W = {case.window:,} would take ~{estimate:,.1f} s, past "
                        f"{SCALE_SHARE:.0%} of the budget (more --time reaches it)")
        self._prev = (case.window, rec["seconds"])
        return None

    def run(self, camp: Campaign) -> None:
        super().run(camp)
        rec = camp.phase_record(self.name)
        if self._prev is not None and rec["examples"]:
            rec["window"] = self._prev[0]  # the last tour started: skip() starts none it declines
        if rec["status"] == "skipped" and rec["examples"]:
            rec["status"] = "ran"  # it ran up to a window; "why" says where the budget stopped it


class ErrorTour(ExplicitPhase):
    name = "errors"

    def not_applicable(self, camp: Campaign) -> Optional[str]:
        if camp.config.tester == "uniform":
            return "the uniform tester sends no bad calls"
        if not camp.target.bad_kinds:
            return "no error contract (a py: class gets one with validates_positions = True)"
        return None

    def cases(self, camp: Campaign) -> list[Case]:
        return [_payload(camp, error_tour(tuple(camp.target.bad_kinds), camp.window_max))]


class LongTour(ExplicitPhase):
    """The long tour, after a probe: one chunk of :data:`PROBE_TOKENS` tokens and a push. The probe's time,
    scaled to the tour's tokens, says whether the tour ends within the budget and its slack (the rate the
    tours showed is no guide: their cases are a few tokens each, so their cost is per case, not per token)."""

    name = "long"

    def __init__(self) -> None:
        self._probe: Optional[Case] = None

    def not_applicable(self, camp: Campaign) -> Optional[str]:
        if camp.config.tester == "uniform":
            return "the uniform tester has no long tour"
        case = long_tour(camp.window_max)
        if camp.target.accepts(case) is None:
            return None
        limit = camp.target.max_tokens
        return f"a case takes at most {limit} tokens there" if limit else "it takes no stream that long"

    def cases(self, camp: Campaign) -> list[Case]:
        tour = _payload(camp, long_tour(camp.window_max))
        # The probe costs at most ~5 % of the budget at the (pessimistic) rate the tours showed.
        n = PROBE_TOKENS if not camp.fastest else int(min(PROBE_TOKENS, max(16, camp.fastest * 0.05 * camp.seconds)))
        self._probe = tour.replace_ops((Chunk(n), Push()))
        return [self._probe, tour]

    def skip(self, camp: Campaign, case: Case) -> Optional[str]:
        if case == self._probe:
            return None
        took = camp.phase_record(self.name)["seconds"]
        if not took:
            return None
        probe = self._probe.tokens
        estimate = took * case.tokens / probe
        if time.monotonic() + estimate <= camp.hard:
            return None
        why = (f"its {case.tokens:,} tokens would take ~{estimate:,.0f} s (a {probe:,}-token probe took "
               f"{took:.3f} s), past the time budget and its slack")
        camp.res.warnings.append(f"{LONG_TOUR_SKIPPED}: {camp.target.name}: {why}; give it more --time to cross "
                                 "2**15, 2**16 and 70 000")
        return why


#: The long tour's probe, at most: enough tokens that their cost, not the case's, dominates its time.
PROBE_TOKENS = 1024
