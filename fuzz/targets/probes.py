"""Crashes at the availability probe (DESIGN §4): a library that died on a sliding-window call while its target
was being built, but ran the same call without the window, is *available* and has a crash finding.

The probes themselves live with the adapters (:func:`impl.errors.window_probe`: ``impl.hf.families.Family.attn_impls``
for transformers' attention implementations, :func:`fuzz.targets.engines.base.probe_once` for the engines); they
keep the death. This module is what turns a kept death into an outcome of the target's campaign: the probe's own
call written as a case (window, tokens, call schedule — replaying it on the target makes the same calls), the
:class:`~fuzz.targets.base.Crash` it stands for, and the written-up finding that explains it, if one does. The
campaign reports it like any other finding (:meth:`fuzz.phases.context.Campaign.probe_crashes`): a signature
(:func:`fuzz.results.signature`; ``known:<id>`` when written up), a seed through :mod:`fuzz.saving`, a replay command.

It is never run again in the campaign's process: the death already happened (in a child process where the call
may die natively, as flex attention's compile does), and a case of a compiled kernel may not die twice in one
process (what the process compiled before decides: docs/findings/hf-flex-attention-sliding-compile.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from fuzz.ops import Case
from fuzz.targets.base import Crash


@dataclass(frozen=True)
class ProbeCrash:
    """A probe's death on the sliding window, as a campaign outcome of the target whose calls the probe made."""

    #: The probe's call as a case of this target (replaying it makes the calls that died).
    case: Case
    #: The crash: the probe, how it died, and that the same call without the window ran.
    error: Crash
    #: The written-up finding (``docs/findings/<id>.md``) that explains it on this release, or ``None`` (a new
    #: finding; always ``None`` on a strict target, which reproduces findings as findings).
    known: Optional[str] = None


def probe_crash(target: Any, case: Case, what: str, death: str) -> ProbeCrash:
    """The :class:`ProbeCrash` of ``target`` for a probe (``what``: the calls it made, in words) that died as
    ``death`` says with the window and ran without it; ``known`` is decided the way a case's failure is
    (:meth:`fuzz.targets.known.KnownFindingsTarget.explained_by`: the finding must hit the case and explain the
    message)."""
    error = Crash(target.name, None, None, f"{what} died with the sliding window: {death}; the same call without "
                                           "the window ran (a crash at the availability probe)")
    known = None
    if getattr(target, "knows_findings", False):
        hit = target.known_findings(case)
        known = target.explained_by(case, error, hit) if hit else None
    return ProbeCrash(case, error, known)
