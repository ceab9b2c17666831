"""Known findings stop eating the budget: after a written-up finding has been reproduced ``K`` times on a
target (``--known-repeats K``, default 3), the cases that would hit it are left out *before they run*.

Measured before this existed: on transformers 4.51.2, two thirds of a 120 s ``hf-gemma2`` campaign
re-reproduced ``hf-445-sliding-cache``; on 5.24.0 ``hf-sliding-window-1`` took most cases of most
HF targets. A finding's predicate looks at the case alone (:meth:`fuzz.targets.base.Target.known_hits`),
so deciding costs a predicate call, not a model run; inside Hypothesis the case is rejected (it does
not count as an example, and generation moves on), and in the report each left-out case counts as
*skipped* for every finding it hits — "reproduced 3, skipped 1 204". The first ``K`` cases still run,
so a finding that no longer reproduces on a release is reported as not reproduced, as before.
"""

from __future__ import annotations

from typing import Any, Optional

#: Reproductions of a known finding per target before its cases are left out (``--known-repeats``).
KNOWN_REPEATS = 3


class KnownBudget:
    """Counts each finding's reproductions in one target's campaign and says when a case is not worth running."""

    def __init__(self, repeats: Optional[int], res: Any):
        #: ``None``: never leave a case out (every case runs, as ``--known-repeats -1`` asks).
        self.repeats = repeats
        self.res = res
        self.reproduced: dict[str, int] = {}

    def count(self, known: dict[str, Optional[bool]]) -> None:
        """Add one case's outcomes (:attr:`fuzz.targets.base.RunStats.known`)."""
        for fid, outcome in known.items():
            if outcome:
                self.reproduced[fid] = self.reproduced.get(fid, 0) + 1

    def saturated(self, target: Any, case: Any) -> bool:
        """Whether ``case`` hits a finding already reproduced ``repeats`` times (then it is counted as skipped
        for every finding it hits). Free for targets without findings and before any finding is saturated."""
        if self.repeats is None or not getattr(target, "knows_findings", False) \
                or getattr(target, "every_path_runs", False):
            return False
        if self.repeats > 0 and (not self.reproduced or max(self.reproduced.values()) < self.repeats):
            return False
        hits = target.known_hits(case)
        if not any(self.reproduced.get(fid, 0) >= self.repeats for fid in hits):
            return False
        self.res.count_known({fid: None for fid in hits})
        return True
