"""Known findings stop eating the budget: after a written-up finding has been reproduced ``K`` times on a
target (``--known-repeats K``, default 3), the cases that would hit it are left out *before they run*.

Measured before this existed: on transformers 4.51.2, two thirds of a 120 s ``hf-gemma2`` campaign
re-reproduced ``hf-445-sliding-cache``; on 5.24.0 ``hf-sliding-window-1`` took most cases of most
HF targets. A finding's predicate looks at the case alone (:meth:`fuzz.targets.base.Target.known_hits`),
so deciding costs a predicate call, not a model run; inside Hypothesis the case is rejected (it does
not count as an example, and generation moves on), and in the report each left-out case counts as
*skipped* for every finding it hits — "reproduced 3, skipped 1 204". The first ``K`` cases still run,
so a finding that no longer reproduces on a release is reported as not reproduced, as before.

The same mechanism leaves out the cases of a finding *this* campaign made (DESIGN §4, distinct findings): once a
finding is saved (:meth:`KnownBudget.record`), a later case predicted to fail the same way — it starts with the
finding's shrunk case (same window, payload and instances, its ops as a prefix), so a deterministic target fails
it at the same op — is left out before it runs and counted on the finding (``left_out``). A case that is not
predicted runs; if it fails with a signature already found it is not reported again (``repeats``,
:meth:`fuzz.phases.context.Campaign.execute`).
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
        #: The findings this campaign saved (and those a previous round of it handed on): signature -> failure.
        self.found: dict[str, Any] = {}

    def record(self, failure: Any) -> None:
        """A finding was saved: later cases that repeat it are left out (:meth:`predicted`)."""
        self.found.setdefault(failure.key, failure)

    def predicted(self, case: Any, target: Any = None) -> Any:
        """The saved finding ``case`` is predicted to repeat, or ``None``: its shrunk case is a prefix of ``case``
        — same window and instances, the same payload width and dtype as ``target`` runs them (a case that names
        none runs at the target's own), its ops first (a paged case is never predicted: it runs)."""
        if not self.found or getattr(case, "paged", False):
            return None
        ops = case.ops
        for f in self.found.values():
            fc = f.case
            if getattr(fc, "paged", False) or len(fc.ops) > len(ops) or ops[:len(fc.ops)] != fc.ops:
                continue
            if _as_run(case.replace_ops(fc.ops), target) == _as_run(fc, target):
                return f
        return None

    def count(self, known: dict[str, Optional[bool]]) -> None:
        """Add one case's outcomes (:attr:`fuzz.targets.base.RunStats.known`)."""
        for fid, outcome in known.items():
            if outcome:
                self.reproduced[fid] = self.reproduced.get(fid, 0) + 1

    def saturated(self, target: Any, case: Any) -> bool:
        """Whether ``case`` hits a finding already reproduced ``repeats`` times (then it is counted as skipped
        for every finding it hits), or repeats a finding this campaign saved (:meth:`predicted`; counted as left
        out on it). Free for targets without findings and before any finding is saturated."""
        mine = self.predicted(case, target)
        if mine is not None:
            mine.left_out += 1
            return True
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


def _as_run(case: Any, target: Any) -> Any:
    """``case`` with the payload width and dtype ``target`` runs it at filled in (a case that names none runs at
    the target's own: :meth:`fuzz.targets.cache.CacheTarget.configured`), so two spellings of one run compare equal."""
    width, dtype = getattr(target, "width", None), getattr(target, "dtype", None)
    if not getattr(target, "widths", False) or not isinstance(width, int):
        return case
    return case.replace(width=case.width if case.width is not None else width,
                        dtype=case.dtype if case.dtype is not None else dtype)
