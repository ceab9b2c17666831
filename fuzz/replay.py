"""Replay a regression seed against a target: the same check the campaign runs, once, classified as
DESIGN §4 says; and the replay command the CLI prints for a seed (every one it prints resolves:
``tests/test_cli_fuzz.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from fuzz.seeds import Seed
from fuzz.results import known_signature, signature
from fuzz.targets.base import HARNESS, Target, failure_kind, subject_call


class Outcome(NamedTuple):
    """A replay that did not pass: ``kind`` is ``mismatch``, ``crash`` (findings), ``known`` (a written-up
    finding, ``docs/findings/``, reproduced) or ``harness``; ``signature`` says which bug it is, in the one form
    a campaign's findings have (:func:`fuzz.results.signature`; a known finding's is ``known:<id>``), so a
    replay can be matched against the finding that saved the seed."""

    kind: str
    message: str
    signature: str | None = None


#: The kind of a replay that reproduced a known finding: a replay is for seeing the bug again, so it fails.
KNOWN = "known"


def replay_outcome(seed: Seed, target: Target) -> Outcome | None:
    """``None`` if ``target`` passes the seed's case, else what went wrong and which kind of failure it is.

    A seed the target cannot take (a window above its maximum) raises
    ``ValueError`` naming the reason; callers report it rather than skip silently.
    """
    why = target.accepts(seed.run_case)
    if why is not None:
        raise ValueError(f"seed {seed.id} cannot run on {target.name}: {why}")
    try:
        stats = subject_call(target.run, seed.run_case)
    except Exception as e:  # noqa: BLE001 - any failure of the target is the outcome
        kind = failure_kind(e)
        return Outcome(kind, f"{type(e).__name__}: {e}",
                       None if kind == HARNESS else signature(target.name, e, seed.run_case))
    known = [fid for fid, reproduced in stats.known.items() if reproduced]
    if known:
        return Outcome(KNOWN, "known finding " + ", ".join(f"{fid} reproduced (docs/findings/{fid}.md)"
                                                           for fid in known), known_signature(known[0]))
    return None


def replay_seed(seed: Seed, target: Target) -> str | None:
    """``None`` if ``target`` passes the seed's case, else the failure message (:func:`replay_outcome`)."""
    out = replay_outcome(seed, target)
    return None if out is None else out.message


def replay_hint(seed_path: str | Path, target: str | None = None, config: Any = None) -> str:
    """The command that replays the seed at ``seed_path`` (against ``target``, a ``--target`` value), with the
    flags of ``config`` (the campaign's) the finding needs to happen again: :func:`replay_flags`."""
    flags = replay_flags(config, target) if config is not None and target else ""
    return f"kvwindow replay {seed_path}" + (f" --target {target}" if target else "") + flags


def replay_flags(config: Any, target: str) -> str:
    """The isolation flags of ``config`` that differ from what ``kvwindow replay`` does by default for ``target``:
    a crash found in a child (``--isolate``), under a shorter ``--op-timeout`` or another ``--op-memory``, or
    with ``--sanitize``, happens again only under them — and a native death replayed in process kills the replay."""
    from fuzz.config import CampaignConfig
    from fuzz.targets.isolated import should_isolate

    default = CampaignConfig()
    flags = []
    isolated = should_isolate(target, config)
    if config.sanitize:
        flags.append("--sanitize")
    elif isolated != should_isolate(target, default):
        flags.append("--isolate" if isolated else "--no-isolate")
    if isolated:
        if config.op_timeout != default.op_timeout:
            flags.append(f"--op-timeout {config.op_timeout:g}")
        if config.op_memory != default.op_memory:
            flags.append(f"--op-memory {config.op_memory or 0}")
    return "".join(" " + f for f in flags)
