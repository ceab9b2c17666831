"""The two shapes of a phase: a one-off list of explicit cases, and batches Hypothesis draws.

:class:`Phase` is what the driver (:mod:`fuzz.campaign`) knows of every phase: its name (one of
:data:`fuzz.phases.ORDER`), whether it applies to the target (:meth:`Phase.not_applicable`: a reason
or ``None``) and how to run it. An :class:`ExplicitPhase` runs its cases once, in order, and a
failure among them is reduced afterwards by :func:`fuzz.phases.reduce.reduce_failure` (Hypothesis
does not shrink explicit examples). A :class:`HypothesisPhase` runs one batch of drawn cases per
call; the driver calls the repeating phases in turn by their budget :attr:`~HypothesisPhase.share`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any, Optional

from hypothesis import HealthCheck, Phase as HPhase, Verbosity, given, seed as hyp_seed, settings
from hypothesis.database import ExampleDatabase
from hypothesis.errors import Unsatisfiable

from fuzz.ops import Case
from fuzz.phases.context import Campaign, Found, Stop

#: Examples per Hypothesis batch (each batch has its own derived seed; the database carries what earlier ones found).
BATCH = 100


class Phase(ABC):
    name: str = "?"

    def not_applicable(self, camp: Campaign) -> Optional[str]:
        """Why this phase does not apply to the campaign's target (``None``: it applies)."""
        return None


class ExplicitPhase(Phase):
    """A fixed list of cases, each run once; a failure is reduced and saved at once and the phase goes on
    (``--stop-on-first``: it ends the phase and the campaign)."""

    @abstractmethod
    def cases(self, camp: Campaign) -> list[Case]:
        """The cases, in the order they run."""

    def skip(self, camp: Campaign, case: Case) -> Optional[str]:
        """Why ``case`` should not run now (``None``: run it)."""
        return None

    def run(self, camp: Campaign) -> None:
        cases = [c for c in self.cases(camp) if camp.target.accepts(c) is None]
        if not cases:
            camp.mark(self.name, "n/a", f"none of its cases fits {camp.target.name}")
            return
        if camp.done:
            return
        for case in cases:
            why = self.skip(camp, case)
            if why is not None:
                camp.mark(self.name, "skipped", why)
                return
            camp.explicit.add(case.id)
            try:
                camp.execute(case, self.name)
            except Stop:
                camp.done = True
                camp.res.interrupted |= camp.stopping()
                break
            except Exception:  # noqa: BLE001 - a finding: Campaign.found kept it; reduced and saved now
                if camp.best is None:  # the target left the case out (Hypothesis's reject()): not a finding
                    continue
                camp.settle(camp.best)
                if camp.done:  # --stop-on-first, a stop request, a fault while reducing
                    break
        if camp.phase_record(self.name)["examples"]:
            camp.mark(self.name, "ran")
        else:
            camp.mark(self.name, "not reached", "the budget was spent before it")


class HypothesisPhase(Phase):
    """Batches of cases drawn from :meth:`strategy`, shrunk by Hypothesis when one fails."""

    #: This phase's share of the time left after the one-off phases (the repeating phases split it).
    share: float = 1.0
    #: Mixed into each batch's seed, so two phases of one campaign draw different cases.
    salt: int = 0
    #: Whether Hypothesis shrinks a failure of this phase (``--no-shrink`` switches it off for all).
    shrinks: bool = True

    def __init__(self) -> None:
        self.batches = 0
        self.seconds = 0.0
        #: Why this phase cannot draw any more cases (every draw hits a finding already reproduced enough).
        self.exhausted: Optional[str] = None
        self._unsatisfied = 0

    @abstractmethod
    def strategy(self, camp: Campaign) -> Any:
        """The Hypothesis strategy of this phase's cases."""

    def database_key(self, camp: Campaign) -> bytes:
        """One database key per target and phase: workers and machines fuzzing the same target share a corpus."""
        return f"kvwindow:{camp.target.name}".encode() if self.name == "generated" else \
            f"kvwindow:{camp.target.name}:{self.name}".encode()

    def run_batch(self, camp: Campaign) -> None:
        """One batch of up to :data:`BATCH` examples (fewer when ``max_examples`` is near)."""
        if camp.done:
            return
        began = time.monotonic()
        left = None if camp.max_examples is None else camp.max_examples - camp.res.examples
        # Under max_examples a batch is at most this phase's share of them, so every repeating phase runs.
        n = BATCH if left is None else max(1, min(BATCH, left, round(self.share * camp.max_examples)))
        strat = self.strategy(camp)

        def test(case):
            camp.execute(case, self.name, in_hypothesis=True)

        test._hypothesis_internal_add_digest = self.database_key(camp)  # type: ignore[attr-defined]
        # @seed makes the run reproducible; settings applied on top keep the example database (a bare
        # @seed would switch it off), so seeded campaigns share too.
        run = settings(
            max_examples=n,
            deadline=None,
            database=keeping(camp.database) if camp.known.found else camp.database,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
            phases=[HPhase.explicit, HPhase.reuse, HPhase.generate] + ([HPhase.shrink] if camp.config.shrink and self.shrinks else []),
            print_blob=False,
            report_multiple_bugs=False,
            verbosity=Verbosity.quiet,
        )(hyp_seed(camp.campaign_seed * 1_000_003 + self.salt + self.batches)(given(strat)(test)))
        self.batches += 1
        camp.mark(self.name, "ran")
        try:
            run()
            self._unsatisfied = 0
        except Stop:
            camp.done = True
            camp.res.interrupted |= camp.stopping()
        except Unsatisfiable:  # every case of the batch was left out: a saturated known finding covers them
            self._unsatisfied += 1
            if self._unsatisfied >= 2:
                self.exhausted = ("every case it drew hits a known finding already reproduced "
                                  f"{camp.config.known_repeats} times (--known-repeats)")
        except Exception as e:  # noqa: BLE001 - a finding, or a fault of Hypothesis / the database
            if hasattr(e, "_kvwindow_case"):  # Hypothesis's shrunk case, replayed last: saved, then on exploring
                self.seconds += time.monotonic() - began
                began = time.monotonic()
                camp.settle(Found(e._kvwindow_case, e))
            else:  # Flaky, or raised outside the test function: settled (or a fault) at the end
                camp.error = e
                camp.done = True
        finally:
            self.seconds += time.monotonic() - began
        if camp.best is not None:  # a failure whose shrinking ended some other way: keep what was found
            camp.done = True


class KeepingDatabase(ExampleDatabase):
    """The example database as a campaign that has findings uses it: saves go through, deletions do not.

    Hypothesis deletes a stored failing example that passes when it replays it. Once this campaign has found a
    signature, a later case with that signature counts as passing (it is counted, not reported again: DESIGN §4,
    distinct findings), so the stored example of the finding itself would pass on the next batch's replay and be
    deleted — and the database, shared with other workers and machines, would lose every failure it was given.
    A pass here is no evidence of a fix, so nothing is deleted; a campaign without findings deletes as usual."""

    def __init__(self, inner: ExampleDatabase):
        super().__init__()
        self.inner = inner

    def save(self, key: bytes, value: bytes) -> None:
        self.inner.save(key, value)

    def fetch(self, key: bytes):
        yield from self.inner.fetch(key)

    def delete(self, key: bytes, value: bytes) -> None:
        pass

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.inner.save(dest, value)


def keeping(db: Optional[ExampleDatabase]) -> Optional[ExampleDatabase]:
    """``db`` wrapped in :class:`KeepingDatabase` (``None`` stays ``None``: no database)."""
    return None if db is None else KeepingDatabase(db)
