"""The phases of a paged target's campaign (``kind == "paged"``): its boundary tours and its generated batches.

A paged cache is driven by :class:`~fuzz.paged.ops.PagedCase` (sequences in a block pool), so the ring
phases (window tours, the error tour, the long tour, the bulk phase, ring cases, multi-instance cases)
do not apply to it and are marked n/a with the reason; in their place:

==================  ========================================================================================
``paged-tours``     :func:`fuzz.paged.strategies.tours`: explicit cases at every boundary class (``W = 1``,
                    ``W < B``, ``W = B``, ``W mod B``, ``B = 1``), forks at the window edge, every hit length,
                    rollbacks across block edges, a pool one block short — only the optional ops the target has
``paged-generated`` :func:`fuzz.paged.strategies.seeded_cases` in Hypothesis batches: long biased cases at one
                    Hypothesis draw each; Hypothesis shrinks a failure to the shortest failing prefix, then the
                    campaign's reducer (:meth:`~fuzz.paged.ops.PagedCase.candidates`) drops and shrinks its ops
==================  ========================================================================================
"""

from __future__ import annotations

import time
from typing import Any, Optional

from fuzz.paged.strategies import scale_tours, seeded_cases, tours
from fuzz.phases.base import ExplicitPhase, HypothesisPhase, Phase
from fuzz.phases.context import Campaign
from fuzz.phases.tours import SCALE_SHARE

#: Why a ring phase does not run on a paged target.
NOT_PAGED = "a ring-cache phase: paged targets run paged-tours and paged-generated (fuzz/phases/paged.py)"


class NotForPaged(Phase):
    """A ring phase in a paged target's plan: listed, never run."""

    def __init__(self, phase: Phase):
        self.name = phase.name
        self.exhausted = None

    def not_applicable(self, camp: Campaign) -> Optional[str]:
        return NOT_PAGED


class PagedTours(ExplicitPhase):
    name = "paged-tours"

    def cases(self, camp: Campaign) -> list:
        t = camp.target
        for note in getattr(t, "notes", ()):
            if note not in camp.res.warnings:
                camp.res.warnings.append(note)
        width = camp.config.width or 4
        # the boundary classes first, then the production-scale shapes (pages of 16-257, windows over many
        # blocks, 64 live sequences in one pressed pool: fuzz.paged.strategies.scale_tours)
        scale = [c for c in scale_tours(width=width) if c.window <= camp.window_max]
        self._scale = {id(c) for c in scale}
        self._began: Optional[float] = None
        return [c for c in tours(getattr(t, "paged_ops", ()), width=width, rollback=getattr(t, "max_rollback", 0))
                if c.window <= camp.window_max] + scale

    def skip(self, camp: Campaign, case: Any) -> Optional[str]:
        """The scale tours run while they fit :data:`fuzz.phases.tours.SCALE_SHARE` of the budget: each next one
        only if the time they took so far, and as much again, stays within it (a Python pool takes seconds where
        the C pool takes tenths)."""
        if id(case) not in self._scale:
            return None
        now = time.monotonic()
        if self._began is None:
            self._began = self._mark = now
        last, self._mark = now - self._mark, now  # what the scale tour before this one took
        spent = now - self._began
        if spent + last > SCALE_SHARE * camp.seconds:
            return (f"the production-scale tours stopped at W = {case.window:,}, B = {case.block_size}: "
                    f"{spent:.1f} s spent, past {SCALE_SHARE:.0%} of the budget (more --time reaches them)")
        return None

    def run(self, camp: Campaign) -> None:
        super().run(camp)
        rec = camp.phase_record(self.name)
        if rec["status"] == "skipped" and rec["examples"]:
            rec["status"] = "ran"  # every boundary tour ran; "why" says where the budget stopped the scale ones


class PagedGenerated(HypothesisPhase):
    name = "paged-generated"
    share = 1.0
    salt = 0x2_0000

    def strategy(self, camp: Campaign) -> Any:
        t = camp.target

        def mark(case):  # reduced like an explicit case when it fails (Hypothesis only shrinks the op count)
            camp.explicit.add(case.id)
            return case

        width = camp.config.width
        strat = seeded_cases(getattr(t, "paged_ops", ()), window_max=camp.window_max,
                             rollback=getattr(t, "max_rollback", 0))
        if width is not None:
            strat = strat.map(lambda c: c.replace(width=width))
        if getattr(t, "max_seq_tokens", None) is not None:  # cases past the target's own limit are left out
            strat = strat.filter(lambda c: t.accepts(c) is None)
        return strat.map(mark)


def paged_plan(plan: list[Phase]) -> tuple[list[Phase], tuple[str, ...], list[HypothesisPhase]]:
    """A paged target's plan from the ring plan: every ring phase n/a, then the paged phases; returns the
    plan, the names of its one-off phases and its repeating phases."""
    generated = PagedGenerated()
    return [*(NotForPaged(p) for p in plan), PagedTours(), generated], ("paged-tours",), [generated]
