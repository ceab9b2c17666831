"""The bulk phase: >= 100 k tokens through ``ringkv_trace`` in one campaign, every step checked
(:mod:`fuzz.targets.ring_bulk`), for targets with a trace call (``ring-c``, ``c:`` libraries, C mutants).

Cases check a few hundred tokens each; the bulk streams check a hundred thousand for the price of a
few cases, which is how a campaign reaches long streams at every window it draws. Its payload width
is the campaign's pinned ``--width``, else one drawn for the campaign from
:data:`fuzz.strategies.WIDTHS`. A failure comes back reduced to an ordinary op list (with that
width), so its seed replays like any other.
"""

from __future__ import annotations

import random
from typing import Optional

from fuzz.phases.base import Phase
from fuzz.phases.context import Campaign, Found, set_fresh
from fuzz.strategies import WIDTHS
from fuzz.targets.base import HARNESS, failure_kind
from fuzz.targets.ring_bulk import bulk_phase


class Bulk(Phase):
    name = "bulk"

    def not_applicable(self, camp: Campaign) -> Optional[str]:
        if camp.config.tester == "uniform":
            return "the uniform tester has no bulk phase"
        if not getattr(camp.target, "traced", False):
            return "no trace call (ringkv_trace: the C ring targets have one)"
        return None

    def width(self, camp: Campaign) -> int:
        if camp.config.width is not None:
            return camp.config.width
        return random.Random(camp.campaign_seed ^ 0xB01C).choice(WIDTHS)

    def run(self, camp: Campaign) -> None:
        if camp.done:
            return
        width = self.width(camp)
        config = camp.config.replace(width=width)
        target = camp.target.configured(config)
        set_fresh(camp.target, True)  # an isolated target reduces a failure in fresh runners
        try:
            phase = bulk_phase(target, config, camp.campaign_seed)
        finally:
            set_fresh(camp.target, False)
        if phase is None:
            return
        res = camp.res
        rec = camp.phase_record(self.name)
        rec["examples"] += len(phase.streams) + (phase.error is not None)
        rec["seconds"] += phase.seconds
        rec["width"] = width
        camp.mark(self.name, "ran")
        res.bulk_tokens += phase.tokens
        res.bulk_seconds += phase.seconds
        if phase.error is None:
            return
        if failure_kind(phase.error) == HARNESS:
            camp.fault = phase.error
            camp.done = True
            return
        if res.examples_to_fail is None:
            res.examples_to_fail = res.examples + 1
            res.seconds_to_fail = round(camp.elapsed(), 4)
            res.tokens_to_fail = res.tokens + phase.tokens
        case = phase.case if phase.case.width is not None else phase.case.replace(width=width)
        camp.bulk_found = Found(case, phase.error)  # reduced already: saved as it is, then on exploring
        camp.settle(camp.bulk_found)
