"""The repeating phases: boundary-biased cases of one instance (``generated``), and cases that drive 2-3
live instances of the target at once (``instances``), both drawn by Hypothesis in batches.

``generated`` is what a campaign mostly spends its time on; each case also draws its payload width
and dtype where the target takes them (:func:`fuzz.strategies.payload_dims`). ``instances`` exists
because a cache whose objects or handles share state (a buffer in a class attribute, a slab per
window) passes every single-instance case: only two live instances with interleaved streams show
it. The uniform tester (``--baseline``'s naive comparison) draws only uniform single-instance cases.
"""

from __future__ import annotations

from typing import Any, Optional

from fuzz.phases.base import HypothesisPhase
from fuzz.phases.context import Campaign
from fuzz.strategies import SMALL_WINDOW, cases, instance_cases, uniform_cases


def _dims(camp: Campaign) -> dict[str, Any]:
    t, cfg = camp.target, camp.config
    dtypes = tuple(t.dtypes) if cfg.dtype is None else ((cfg.dtype,) if t.dtypes else ())
    return {"width": cfg.width if t.widths else None, "drawn_width": bool(t.widths) and cfg.width is None,
            "dtypes": dtypes, "multiple": getattr(t, "width_multiple", 1)}


class Generated(HypothesisPhase):
    name = "generated"
    share = 0.7

    def strategy(self, camp: Campaign) -> Any:
        t = camp.target
        if camp.config.tester == "uniform":
            # The naive baseline draws uniformly in 1..16, as every campaign did before windows went past 16: a
            # uniform draw up to 65 537 would make nearly every case a ~100 k-token one (a measure of nothing).
            return uniform_cases(min(camp.window_max, SMALL_WINDOW), max_tokens=t.max_tokens, salt=camp.campaign_seed)
        start = None if camp.config.start_window is None else min(camp.config.start_window, camp.window_max)
        return cases(camp.window_max, max_tokens=t.max_tokens, start_window=start, bad=tuple(t.bad_kinds),
                     **_dims(camp))


class Instances(HypothesisPhase):
    name = "instances"
    share = 0.3
    salt = 0x1_0000

    def not_applicable(self, camp: Campaign) -> Optional[str]:
        if camp.config.tester == "uniform":
            return "the uniform tester drives one instance"
        if not camp.target.instances:
            return "it is driven as one model or session per stream (not a cache a case builds twice)"
        return None

    def strategy(self, camp: Campaign) -> Any:
        t = camp.target
        return instance_cases(camp.window_max, max_tokens=t.max_tokens, bad=tuple(t.bad_kinds), **_dims(camp))
