"""``CampaignConfig``: everything that decides what a campaign runs, in one frozen value.

The CLI builds it once from its flags; the campaign loop, the workers, the kill
table and the bench all take it, and a report carries it verbatim (``"config"``),
so a report says exactly how to run its campaign again. What cannot be written
into a report — an opened example database, a progress callback — is passed
beside it, never inside.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

#: The testers a campaign can draw its cases from (:mod:`fuzz.strategies`).
TESTERS = ("biased", "uniform")


@dataclass(frozen=True, kw_only=True)
class CampaignConfig:
    #: The ``--target`` values, in order (a worker process resolves them again from here).
    targets: tuple[str, ...] = ()
    #: Seconds of fuzzing in all (shared among the targets; each worker gets all of it).
    seconds: float = 60.0
    #: Stop each target after this many examples (per worker once split); ``None``: the time decides.
    max_examples: int | None = None
    #: Largest window a case (or a reset in it) draws.
    window_max: int = 16
    #: Every case starts at this window (resets still draw up to ``window_max``); ``None``: drawn.
    start_window: int | None = None
    #: The Hypothesis seed of the campaign (``--seed``); ``None``: drawn, then reported.
    campaign_seed: int | None = None
    #: ``"biased"`` (boundary tours, then the boundary-biased strategies) or ``"uniform"`` (the baseline).
    tester: str = "biased"
    workers: int = 1
    #: Example database: a directory, a ``redis://`` URL, or ``None`` for none.
    db: str | None = None
    #: Where failures are saved as seeds; ``None``: this package's ``fuzz/seeds``.
    seeds_dir: str | None = None
    save_seeds: bool = True
    shrink: bool = True
    #: A known finding (``docs/findings/``) a case reproduced does not fail the campaign (``--accept-known``).
    accept_known: bool = False
    #: Leave out the cases that hit a known finding instead of running them (``--skip-known``).
    skip_known: bool = False

    def __post_init__(self) -> None:
        if self.tester not in TESTERS:
            raise ValueError(f"tester must be one of {', '.join(TESTERS)}, got {self.tester!r}")
        if not isinstance(self.targets, tuple):
            object.__setattr__(self, "targets", tuple(self.targets))

    def replace(self, **changes: Any) -> "CampaignConfig":
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in dataclasses.fields(self)}
