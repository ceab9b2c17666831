"""Saving a finding: its seed written (atomically, :func:`fuzz.seeds.store_seed`) and where it went told in the
:class:`~fuzz.results.Failure`, with the replay command it needs.

Its own module because both the campaign driver (:mod:`fuzz.campaign`, :mod:`fuzz.workers`) and a campaign's
context (:meth:`fuzz.phases.context.Campaign.settle`, which saves each distinct finding as it is found) save
findings, and the context is below the driver: the driver imports it, never the other way round.
"""

from __future__ import annotations

import time

from fuzz import seeds as seedstore
from fuzz.config import CampaignConfig
from fuzz.replay import replay_hint
from fuzz.results import Failure


def save_failure(fail: Failure, config: CampaignConfig, campaign_seed: int | None, *,
                 note: str | None = None) -> Failure:
    """Save ``fail``'s case as a seed (when ``config.save_seeds``) and say where in ``fail``; a seed that
    cannot be written is kept in the failure (``seed_error``) for the CLI to print in full, never dropped.
    The case carries its own payload width and dtype, so the replay hint needs no flags for them."""
    if note is not None:
        fail.note = note
    if not config.save_seeds:
        return fail
    found = {"target": fail.target, "kind": fail.kind, "error": fail.error[:500],
             "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "campaign_seed": campaign_seed}
    s = seedstore.Seed(fail.case, found)
    fail.seed_id = s.id
    try:
        directory = config.seeds_dir if config.seeds_dir is not None else seedstore.default_seeds_dir()
    except seedstore.SeedError as e:  # an unreadable [tool.kvwindow]: the seed is printed in full instead
        fail.seed_error = f"cannot tell where seeds go: {e}"
        return fail
    try:
        saved = seedstore.store_seed(s, directory)
    except (OSError, seedstore.SeedError) as e:
        fail.seed_error = f"cannot write the seed into {directory}: {getattr(e, 'strerror', None) or e}"
    else:
        fail.seed_path, fail.created = str(saved.path), saved.created
        fail.moved_aside = None if saved.moved_aside is None else str(saved.moved_aside)
        fail.replay = replay_hint(saved.path, fail.target, config)  # with the flags the finding needs
    return fail
