"""The campaign loop: Hypothesis drives one target at a time within a time budget.

Hypothesis stops after ``max_examples``, so a timed campaign runs it in
batches (each with its own derived seed) until the budget is spent; the
example database carries what earlier batches — and earlier campaigns, other
workers, other machines — found. On failure Hypothesis shrinks, replays the
minimal case last, and that case becomes a regression seed.

The budget is enforced inside the test function: once the time is spent (or a
stop is requested) the next example raises :class:`_Stop`, a
``KeyboardInterrupt`` subclass that Hypothesis passes straight through
without recording it as a failure. A failure being shrunk is never cut short
by the budget; a real Ctrl-C during shrinking keeps the smallest failing case
seen so far and saves it as the seed.
"""

from __future__ import annotations

import random
import time
from typing import Callable

from hypothesis import HealthCheck, Phase, Verbosity, example, given, seed as hyp_seed, settings
from hypothesis.database import ExampleDatabase

from fuzz import seeds as seedstore
from fuzz.config import CampaignConfig
from fuzz.ops import Case, Chunk, Push, Reset
from fuzz.replay import replay_hint
from fuzz.results import Failure, TargetResult
from fuzz.strategies import boundary_tours, cases, uniform_cases
from fuzz.targets.base import Target
from fuzz.targets.ring_bulk import bulk_phase

BATCH = 100


class _Stop(KeyboardInterrupt):
    """Raised inside the test function to end a campaign: the budget is spent or a stop was requested."""


def fuzz_target(
    target: Target,
    config: CampaignConfig,
    *,
    seconds: float | None = None,
    database: ExampleDatabase | None = None,
    on_progress: Callable[[TargetResult], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> TargetResult:
    """Fuzz ``target`` as ``config`` says until ``seconds`` (default ``config.seconds``) pass,
    ``config.max_examples`` run, it fails, or ``stop()`` is true.

    A ``KeyboardInterrupt`` ends the campaign cleanly: the result says
    ``interrupted`` and keeps whatever failure was found so far (saved as a seed).
    """
    seconds = config.seconds if seconds is None else seconds
    max_examples = config.max_examples
    target = target.configured(config)  # the campaign's payload width and dtype
    res = TargetResult(target.name, versions=target.versions(), tolerances=target.tolerances())
    campaign_seed = config.campaign_seed
    if campaign_seed is None:  # a campaign is always reproducible: draw its seed and report it
        campaign_seed = random.SystemRandom().randrange(2**32)
    res.campaign_seed = campaign_seed
    wmax = min(config.window_max, target.window_max or config.window_max)
    start_window = None if config.start_window is None else min(config.start_window, wmax)
    if config.tester == "uniform":
        strat, tours = uniform_cases(wmax, max_tokens=target.max_tokens, salt=campaign_seed), []
    else:  # the boundary-biased strategies, starting from the boundary tours (first batch only)
        strat = cases(wmax, max_tokens=target.max_tokens, start_window=start_window, bad=target.bad_kinds)
        tours = [c for c in boundary_tours(wmax, target.max_tokens, target.bad_kinds) if target.accepts(c) is None]
    last: dict = {}
    state = {"failing": False, "smallest": None}
    start = time.monotonic()

    def check(case):
        now = time.monotonic() - start
        if not state["failing"]:
            if now >= seconds or (max_examples is not None and res.examples >= max_examples) \
                    or (stop is not None and stop()):
                raise _Stop()
        last["case"] = case
        try:
            stats = target.run(case)
        except Exception:
            res.examples += 1
            if not state["failing"]:
                state["failing"] = True
                res.examples_to_fail = res.examples
                res.seconds_to_fail = round(time.monotonic() - start, 4)
                res.tokens_to_fail = res.tokens + case.tokens
            small = state["smallest"]
            if small is None or _size(case) <= _size(small):
                state["smallest"] = case
            raise
        res.examples += 1
        res.tokens += stats.tokens
        for p in stats.phases:
            res.phases[p] += 1
        res.seconds = time.monotonic() - start
        if on_progress is not None:
            on_progress(res)

    def batch_test(explicit):
        """A fresh test function per batch (``@example`` and ``@given`` attach state to it)."""
        def test(case):
            return check(case)
        # One database key per target: workers and machines fuzzing the same target share a corpus.
        test._hypothesis_internal_add_digest = f"kvwindow:{target.name}".encode()  # type: ignore[attr-defined]
        for case in reversed(explicit):
            test = example(case)(test)
        return given(strat)(test)

    def bulk() -> bool:
        """The bulk phase (targets with ``ringkv_trace``), once per biased campaign: True when it failed
        (it counts as one example; its tokens are ``bulk_tokens``, apart from the cases')."""
        state["bulk"] = True
        phase = bulk_phase(target, config, campaign_seed)
        if phase is None:
            return False
        res.bulk_tokens += phase.tokens
        res.bulk_seconds += phase.seconds
        if phase.error is None:
            return False
        res.examples_to_fail = res.examples + 1
        res.seconds_to_fail = round(time.monotonic() - start, 4)
        res.tokens_to_fail = res.tokens + phase.tokens
        last["case"], last["bulk_error"] = phase.case, phase.error
        return True

    state["bulk"] = config.tester == "uniform"  # the naive baseline has no bulk phase
    batch = 0
    error: BaseException | None = None
    try:
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= seconds or (max_examples is not None and res.examples >= max_examples):
                break
            if stop is not None and stop():
                res.interrupted = True
                break
            n = BATCH if max_examples is None else max(1, min(BATCH, max_examples - res.examples))
            # @seed makes the run reproducible; settings applied on top keep the example
            # database (a bare @seed would switch it off), so seeded campaigns share too.
            run = settings(
                max_examples=n,
                deadline=None,
                database=database,
                derandomize=False,
                suppress_health_check=list(HealthCheck),
                phases=[Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if config.shrink else []),
                print_blob=False,
                report_multiple_bugs=False,
                verbosity=Verbosity.quiet,
            )(hyp_seed(campaign_seed * 1_000_003 + batch)(batch_test(tours if batch == 0 else [])))
            batch += 1
            try:
                run()
            except _Stop:
                if stop is not None and stop():
                    res.interrupted = True
                break
            except Exception as e:  # noqa: BLE001 - a crash in the target is a finding too
                error = e
                break
            if not state["bulk"] and bulk():  # after the boundary tours and the first batch
                error = last["bulk_error"]
                break
        if not state["bulk"] and error is None and not res.interrupted and bulk():
            error = last["bulk_error"]
    except KeyboardInterrupt:
        res.interrupted = True
        if state["failing"]:
            error = KeyboardInterrupt("interrupted while shrinking")
            last["case"] = state["smallest"]
    if error is not None and last.get("case") is not None:
        # explicit examples are not shrunk by Hypothesis: reduce them here (a bulk failure comes reduced)
        if last["case"] in tours and error is not last.get("bulk_error"):
            last["case"] = reduce_case(target, last["case"], type(error))
            try:  # the reduced case's own message
                target.run(last["case"])
            except Exception as e:  # noqa: BLE001
                error = e
        _record_failure(res, target, error, last["case"], campaign_seed, config)
    res.seconds = time.monotonic() - start
    res.done = True
    return res


def reduce_case(target: Target, case: Case, error_type: type, budget: int = 2000) -> Case:
    """Greedy delta-debugging of a failing case: drop ops, shrink chunks, narrow windows.

    Hypothesis shrinks what it generated, but not explicit examples (the boundary
    tours); this gives their failures the same small, readable seeds. A candidate
    is kept only if it still fails with the same exception type.
    """
    def fails(c: Case) -> bool:
        try:
            target.run(c)
        except error_type:
            return True
        except Exception:  # noqa: BLE001 - another failure is another bug, not this one
            return False
        return False

    def candidates(c: Case):
        window, ops = c.window, list(c.ops)
        if ops and isinstance(ops[0], Reset):
            yield Case(ops[0].window, ops[1:])
        for i in range(len(ops)):
            yield Case(window, ops[:i] + ops[i + 1:])
        for i, op in enumerate(ops):
            if isinstance(op, Chunk):
                for n in sorted({0, 1, op.n // 2, op.n - 1}):
                    if n < op.n:
                        yield Case(window, ops[:i] + [Push() if n == 1 else Chunk(n)] + ops[i + 1:])
            elif isinstance(op, Reset) and op.window > 1:
                yield Case(window, ops[:i] + [Reset(op.window - 1)] + ops[i + 1:])
        if window > 1:
            yield Case(window - 1, ops)

    best = case
    improved = True
    while improved and budget > 0:
        improved = False
        for cand in candidates(best):
            budget -= 1
            if fails(cand):
                best, improved = cand, True
                break
            if budget <= 0:
                break
    return best


def _size(case: Case) -> tuple[int, int]:
    return (len(case.ops), case.window)


def _record_failure(res: TargetResult, target: Target, error: BaseException, case: Case, campaign_seed: int,
                    config: CampaignConfig) -> None:
    msg = f"{type(error).__name__}: {error}"
    if isinstance(error, KeyboardInterrupt):
        # Interrupted mid-shrink: re-run the smallest failing case to get its own message.
        try:
            target.run(case)
            msg = "failure found, but the smallest case no longer fails (flaky target?)"
        except Exception as e:  # noqa: BLE001
            msg = f"{type(e).__name__}: {e}"
    fail = Failure(target.name, msg[:2000], case)
    if config.save_seeds:
        found = {"target": target.name, "error": msg[:500],
                 "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "campaign_seed": campaign_seed}
        s = seedstore.Seed(case, found)
        if (config.width, config.dtype) != (CampaignConfig.width, CampaignConfig.dtype):
            found.update(width=config.width, dtype=config.dtype)
        path, created = seedstore.save_seed(s, config.seeds_dir if config.seeds_dir is not None
                                            else seedstore.default_seeds_dir())
        fail.seed_id, fail.seed_path, fail.created = s.id, str(path), created
        fail.replay = replay_hint(path, target.name) + config.payload_flags()
    res.failures.append(fail)
