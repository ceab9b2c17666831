"""How a campaign over several targets spends its time: coverage first, then what is left, evenly.

An equal split of a 60 s campaign over 18 targets gave each 3.3 s: ``pyring`` reached its goal in a
tenth of that and idled, every ``hf:<model_type>`` target ran 15–40 examples and the long tour on
``ring-c`` was skipped. Time is bought in proportion to each target's cost instead, in two rounds:

1. **coverage**: targets run one after another, cheapest kind first (caches before models), each
   until it has run every phase that applies to it and :data:`GOAL_EXAMPLES` examples (shared among
   the workers), or until its share of what is left — the time not yet spent divided by the targets
   not yet run — is spent; a target that reaches its goal early leaves its time to the later ones;
2. **more of the same**: whatever time is left is split evenly among the targets, each continuing
   with the repeating phases (generated and multi-instance cases; :func:`fuzz.campaign.fuzz_target`
   with ``once=False``); the example database carries what round 1 found.

A target that hit a harness fault or was interrupted gets no second round, nor one that found something
under ``--stop-on-first``; otherwise its second round knows the findings of its first (``prior``) and
reports only new ones. A target
that does not reach its goal says why in the summary (:func:`goal_note`). Targets are built before the
clock starts: the budget is fuzzing time, not the seconds it takes to import transformers.
"""

from __future__ import annotations

import math
import time
from typing import Callable

from hypothesis.database import ExampleDatabase

from fuzz.campaign import fuzz_target
from fuzz.config import CampaignConfig
from fuzz.phases.context import slack
from fuzz.results import TargetResult, absorb
from fuzz.targets.base import Target

#: Examples every target of a multi-target campaign should reach (with every phase that applies to it).
GOAL_EXAMPLES = 100
#: The shortest round a target is given (building it and its first tour take about this long).
MIN_ROUND_S = 0.5


def reached(res: TargetResult, goal: int) -> bool:
    """Whether ``res`` has ``goal`` examples and every phase that applies to its target ran."""
    if res.examples < goal:
        return False
    return all(rec.get("status") in ("ran", "n/a") for rec in res.phases_run.values())


def goal_note(res: TargetResult, goal: int = GOAL_EXAMPLES) -> str | None:
    """Why ``res`` (merged over the workers) is short of the coverage goal, in one line, or ``None``."""
    if res.failures or res.faults or res.interrupted:
        return None
    parts = []
    if res.examples < goal:
        rate = res.examples / res.seconds if res.seconds else 0.0
        need = f"; {goal} would need ~{goal / rate:,.0f} s at that rate" if rate else ""
        parts.append(f"{res.examples} of {goal} examples in {res.seconds:.1f} s ({rate:,.1f}/s{need})")
    missed = [f"{name} ({rec.get('why', rec.get('status'))})" for name, rec in res.phases_run.items()
              if rec.get("status") in ("skipped", "not reached")]
    if missed:
        parts.append("did not run " + ", ".join(missed))
    return "; ".join(parts) or None


def run_targets(config: CampaignConfig, get_target: Callable[[str], Target], *, database: ExampleDatabase | None,
                stop: Callable[[], bool], publish: Callable[[TargetResult], None],
                close_after: bool = False) -> list[TargetResult]:
    """Run ``config.targets`` as the module docstring says; the campaign as a whole ends by
    ``config.seconds`` plus the slack of the whole budget (shrinking may run :func:`slack` past a round)."""
    from fuzz.targets.isolated import close

    specs = list(config.targets)
    warnings = getattr(database, "warnings", [])
    results: dict[str, TargetResult] = {}
    built: dict[str, Target] = {}
    clock = {"start": time.monotonic()}
    goal = math.ceil(GOAL_EXAMPLES / max(1, config.replicas)) if len(specs) > 1 or config.replicas < config.workers \
        else None

    def publish_with_warnings(r: TargetResult) -> None:
        if warnings:
            r.warnings = list(dict.fromkeys([*r.warnings, *warnings]))
        publish(r)

    def left() -> float:
        return config.seconds - (time.monotonic() - clock["start"])

    def target_for(spec: str) -> Target:
        if spec not in built:
            built[spec] = get_target(spec)
        return built[spec]

    def release(spec: str) -> None:
        if close_after and spec in built:
            close(built.pop(spec))

    try:
        # Every target is built before the clock starts: importing transformers and building tiny models takes
        # seconds, and that is not fuzzing (a budget that paid for it left the model targets nothing).
        for spec in specs:
            if stop():
                break
            built[spec] = get_target(spec)
        clock["start"] = time.monotonic()
        hard = clock["start"] + config.seconds + slack(config.seconds)
        # Round 1, cheapest kind first.
        order = sorted(range(len(specs)), key=lambda i: (_kind_rank(specs[i]), i))
        for n, i in enumerate(order):
            spec = specs[i]
            if stop() or spec not in built:
                break
            target = target_for(spec)
            now = time.monotonic()
            share = max(min(MIN_ROUND_S, config.seconds / len(specs)), left() / (len(specs) - n))
            enough = None if goal is None else (lambda r: reached(r, goal))
            r = fuzz_target(target, config, seconds=share, database=database, on_progress=publish_with_warnings,
                            stop=stop, deadline=min(hard, now + share + slack(share)), enough=enough)
            results[spec] = r
            publish_with_warnings(r)
            if r.interrupted:
                break
            if goal is None or (r.failures and config.stop_on_first) or r.faults:
                release(spec)
        # Round 2: the time left, evenly, to every target still worth fuzzing.
        again = [s for s in specs if s in results and not ((results[s].failures and config.stop_on_first)
                                                           or results[s].faults or results[s].interrupted)]
        if goal is not None and again and left() > MIN_ROUND_S and not stop():
            for n, spec in enumerate(again):
                if stop() or left() <= MIN_ROUND_S / 2:
                    break
                share = left() / (len(again) - n)
                now = time.monotonic()
                more = fuzz_target(target_for(spec), config, seconds=share, database=database,
                                   on_progress=lambda r, s=spec: publish_with_warnings(absorb(results[s], r)),
                                   stop=stop, deadline=min(hard, now + share + slack(share)), once=False,
                                   prior=tuple(results[spec].failures))
                results[spec] = absorb(results[spec], more)
                publish_with_warnings(results[spec])
                release(spec)
                if more.interrupted:
                    break
    finally:
        for spec in list(built):
            release(spec)
    return [results[s] for s in specs if s in results]


def assign(specs: tuple[str, ...], workers: int) -> list[tuple[tuple[str, ...], int]]:
    """Which targets each of ``workers`` runs, and by how many workers each of them runs: with at least as
    many targets as workers every target goes to one worker, dealt cheapest kind first in turn (so every
    worker gets its share of the slow model targets); with fewer, the workers are dealt over the targets
    and each target runs in ``workers // len(specs)`` or more of them."""
    if not specs:
        return [((), 1)] * workers
    if len(specs) >= workers:
        order = sorted(range(len(specs)), key=lambda i: (_kind_rank(specs[i]), i))
        dealt: list[list[int]] = [[] for _ in range(workers)]
        for n, i in enumerate(order):
            dealt[n % workers].append(i)
        return [(tuple(specs[i] for i in sorted(d)), 1) for d in dealt]
    owners = [i % len(specs) for i in range(workers)]
    return [((specs[o],), owners.count(o)) for o in owners]


def _kind_rank(spec: str) -> int:
    """The cost rank of a ``--target`` value before it is built: transformers, engines and the decoder are
    models (milliseconds per call), everything else is a cache."""
    models = ("hf-mistral", "hf-gemma2", "hf:", "decoder", "cuda-decoder", "mutant:decoder-", "py-decoder:",
              "ort:", "mlx:", "ct2:", "llama:", "keras:")
    return 1 if spec.startswith(models) else 0
