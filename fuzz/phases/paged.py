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

from typing import Any, Optional

from fuzz.paged.strategies import seeded_cases, tours
from fuzz.phases.base import ExplicitPhase, HypothesisPhase, Phase
from fuzz.phases.context import Campaign

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
        return [c for c in tours(getattr(t, "paged_ops", ()), width=width, rollback=getattr(t, "max_rollback", 0))
                if c.window <= camp.window_max]


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
        return strat.map(mark)


def paged_plan(plan: list[Phase]) -> tuple[list[Phase], tuple[str, ...], list[HypothesisPhase]]:
    """A paged target's plan from the ring plan: every ring phase n/a, then the paged phases; returns the
    plan, the names of its one-off phases and its repeating phases."""
    generated = PagedGenerated()
    return [*(NotForPaged(p) for p in plan), PagedTours(), generated], ("paged-tours",), [generated]
