"""Replay a regression seed against a target: the same check the campaign runs, once."""

from __future__ import annotations

from fuzz.seeds import Seed
from fuzz.targets.base import Target


def replay_seed(seed: Seed, target: Target) -> str | None:
    """``None`` if ``target`` passes the seed's case, else the failure message.

    A seed the target cannot take (a window above its maximum) raises
    ``ValueError`` naming the reason; callers report it rather than skip silently.
    """
    why = target.accepts(seed.window, seed.ops)
    if why is not None:
        raise ValueError(f"seed {seed.id} cannot run on {target.name}: {why}")
    try:
        target.run(seed.window, seed.ops)
    except Exception as e:  # noqa: BLE001 - any failure of the target is the finding
        return f"{type(e).__name__}: {e}"
    return None
