"""The campaign loop: Hypothesis drives one target at a time within a time budget.

Hypothesis stops after ``max_examples``, so a timed campaign runs it in
batches (each with its own derived seed) until the budget is spent; the
example database carries what earlier batches — and earlier campaigns, other
workers, other machines — found. On failure Hypothesis shrinks, replays the
minimal case last, and that case becomes a regression seed.

Every exception a target raises is classified (DESIGN §4, :func:`fuzz.targets.base.failure_kind`):
a mismatch or a crash is a finding, shrunk and saved; a harness fault stops the target at
once with its one-line reason and is never shrunk, stored in the example database or saved.

The budget is enforced inside the test function: once the time is spent (or a
stop is requested) the next example raises :class:`_Stop`, a
``KeyboardInterrupt`` subclass that Hypothesis passes straight through
without recording it as a failure. Shrinking a failure (and reducing a failing
boundary tour) may run on for :func:`slack` seconds past the budget; then, or at a
stop request (Ctrl-C, SIGTERM), it is cut short and the smallest failing case
seen so far is the one saved. Nothing found is dropped: the smallest failing case
is tracked from the first failure on (and published as ``pending`` with the
progress, so a parent can save it if this process dies).

The long tour (:func:`fuzz.strategies.long_tour`, 70 001 tokens) is one example that the
budget cannot cut short, so it runs only when, at the fastest rate the target has shown
in this campaign, it would end within the budget and its slack; otherwise it is skipped
and a warning says so (a cache that costs milliseconds per entry would need minutes).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable

from hypothesis import HealthCheck, Phase, Verbosity, example, given, seed as hyp_seed, settings
from hypothesis.database import ExampleDatabase
from hypothesis.errors import Flaky, UnsatisfiedAssumption

from fuzz import seeds as seedstore
from fuzz.config import CampaignConfig
from fuzz.ops import Case, Chunk, Push, Reset
from fuzz.replay import replay_hint
from fuzz.results import Failure, TargetResult
from fuzz.strategies import boundary_tours, cases, long_tour, uniform_cases
from fuzz.targets.base import HARNESS, Target, failure_kind
from fuzz.targets.ring_bulk import bulk_phase

BATCH = 100
#: How a campaign's warnings say the long tour did not run (:mod:`fuzz.bench.throughput` reads it).
LONG_TOUR_SKIPPED = "long tour skipped"


def slack(seconds: float) -> float:
    """How long shrinking and reduction may run past a budget of ``seconds``: 10 %, at least 2 s."""
    return max(2.0, 0.1 * seconds)


class _Stop(KeyboardInterrupt):
    """Raised inside the test function to end a campaign: the budget is spent or a stop was requested."""


@dataclass
class _Found:
    """The smallest failing case seen so far, and what it raised."""

    case: Case
    error: BaseException


def _size(case: Case) -> tuple[int, int, int]:
    return (len(case.ops), case.tokens, case.window)


def _set_fresh(target: Target, fresh: bool) -> None:
    """Every case in a fresh process while a failure is shrunk (an isolated target's ``fresh``)."""
    if hasattr(target, "fresh"):
        target.fresh = fresh  # type: ignore[attr-defined]


def fuzz_target(
    target: Target,
    config: CampaignConfig,
    *,
    seconds: float | None = None,
    database: ExampleDatabase | None = None,
    on_progress: Callable[[TargetResult], None] | None = None,
    stop: Callable[[], bool] | None = None,
    deadline: float | None = None,
) -> TargetResult:
    """Fuzz ``target`` as ``config`` says until ``seconds`` (default ``config.seconds``) pass,
    ``config.max_examples`` run, it fails, or ``stop()`` is true.

    ``deadline`` (a ``time.monotonic()`` value, default ``seconds`` + :func:`slack` from now) is
    when shrinking and reduction are cut short. A stop request or a ``KeyboardInterrupt`` ends
    the campaign cleanly: the result says ``interrupted`` and keeps the smallest failure found
    so far (saved as a seed). A harness fault ends it with ``faults`` set and nothing saved for it.
    """
    seconds = config.seconds if seconds is None else seconds
    max_examples = config.max_examples
    target = target.configured(config)  # the campaign's payload width and dtype, --skip-known
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
    long = long_tour(wmax)
    start = time.monotonic()
    hard = start + seconds + slack(seconds) if deadline is None else deadline
    best: list[_Found] = []  # [smallest failing case so far], once something failed
    fault: list[BaseException] = []
    fastest = [0.0]  # tokens/s of the fastest example so far

    def stopping() -> bool:
        return stop is not None and stop()

    def publish() -> None:
        if on_progress is not None:
            on_progress(res)

    def found(case: Case, e: BaseException) -> None:
        """Keep ``case`` if it is the smallest failing the way the first failure did."""
        if not best:
            res.examples_to_fail = res.examples
            res.seconds_to_fail = round(time.monotonic() - start, 4)
            res.tokens_to_fail = res.tokens + case.tokens
            res.phase = "shrinking" if case not in tours else "reducing"
            _set_fresh(target, True)
        elif type(e) is not type(best[0].error) or _size(case) > _size(best[0].case):
            return
        best[:] = [_Found(case, e)]
        res.pending = Failure(target.name, _message(e), case, kind=failure_kind(e))
        publish()

    def check(case):
        now = time.monotonic()
        if best:
            if now >= hard or stopping():
                raise _Stop()
        elif now - start >= seconds or now >= hard or (max_examples is not None and res.examples >= max_examples) \
                or stopping():
            raise _Stop()
        if case == long and fastest[0] and now + case.tokens / fastest[0] > hard:
            res.warnings.append(f"{LONG_TOUR_SKIPPED}: its {case.tokens:,} tokens at the fastest rate this target "
                                f"ran ({fastest[0]:,.0f} tokens/s) would take ~{case.tokens / fastest[0]:,.0f} s, past "
                                "the time budget and its slack; give it more --time to cross 2**15, 2**16 and 70 000")
            return
        began = time.perf_counter()
        try:
            stats = target.run(case)
        except UnsatisfiedAssumption:  # the target left the case out (Hypothesis's reject()): not a failure
            raise
        except Exception as e:
            res.examples += 1
            if failure_kind(e) == HARNESS:
                fault.append(e)
                raise _Stop() from e
            found(case, e)
            try:  # what Hypothesis raises at the end is recognised by this mark, with the case that raised it
                e._kvwindow_case = case  # type: ignore[attr-defined]
            except AttributeError:
                pass
            raise
        took = time.perf_counter() - began
        if stats.tokens and took > 0:
            fastest[0] = max(fastest[0], stats.tokens / took)
        res.examples += 1
        res.tokens += stats.tokens
        res.count_known(stats.known)
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
        (it counts as one example; its tokens are ``bulk_tokens``, apart from the cases'). Its failure
        comes reduced to an op list (:func:`fuzz.targets.ring_bulk.reduce_bulk_failure`)."""
        bulk_state["done"] = True
        _set_fresh(target, True)  # an isolated target reduces a failure in fresh runners
        try:
            phase = bulk_phase(target, config, campaign_seed)
        finally:
            _set_fresh(target, False)
        if phase is None:
            return False
        res.bulk_tokens += phase.tokens
        res.bulk_seconds += phase.seconds
        if phase.error is None:
            return False
        if failure_kind(phase.error) == HARNESS:
            fault.append(phase.error)
            return True
        res.examples_to_fail = res.examples + 1
        res.seconds_to_fail = round(time.monotonic() - start, 4)
        res.tokens_to_fail = res.tokens + phase.tokens
        bulk_state["found"] = _Found(phase.case, phase.error)
        return True

    bulk_state: dict = {"done": config.tester == "uniform", "found": None}  # the naive baseline has no bulk phase
    batch = 0
    error: BaseException | None = None
    try:
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= seconds or (max_examples is not None and res.examples >= max_examples):
                break
            if stopping():
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
                if stopping():
                    res.interrupted = True
                break
            except Exception as e:  # noqa: BLE001 - a finding, or a fault of Hypothesis / the database
                error = e
                break
            if best:  # a failure whose shrinking ended some other way: keep what was found
                break
            if not bulk_state["done"] and bulk():  # after the boundary tours and the first batch
                break
        if not bulk_state["done"] and error is None and not best and not fault and not res.interrupted:
            bulk()  # the first batch never completed (max_examples or the time ran out first)
    except KeyboardInterrupt:  # a second Ctrl-C, or one outside the test function
        res.interrupted = True
    finally:
        _set_fresh(target, False)

    note = None
    if error is not None and hasattr(error, "_kvwindow_case"):
        smallest: _Found | None = _Found(error._kvwindow_case, error)  # Hypothesis's shrunk case, replayed last
    elif bulk_state["found"] is not None:
        smallest = bulk_state["found"]  # reduced already: never a tour, so not reduced again below
    else:
        smallest = best[0] if best else None
        if error is not None and isinstance(error, Flaky) and smallest is not None:
            note = "flaky: the smallest failing case did not fail again when Hypothesis replayed it"
        elif error is not None:  # raised outside the test function: Hypothesis or the example database
            fault.append(error)
        if smallest is not None and note is None:
            note = ("interrupted while shrinking: the smallest failing case so far" if res.interrupted else
                    "shrinking cut short at the time budget: the smallest failing case so far")
    if fault:
        res.faults.append(_fault_line(fault[0]))
    if smallest is not None:
        if smallest.case in tours and smallest is not bulk_state["found"] and not fault and not res.interrupted:
            # explicit examples are not shrunk by Hypothesis: reduce them here
            res.phase = "reducing"
            publish()
            smallest, why = reduce_failure(target, smallest.case, smallest.error, deadline=hard, stop=stop)
            if why == "interrupted":
                res.interrupted = True
                note = "interrupted while reducing: the smallest failing case so far"
            elif why == "deadline":
                note = "reduction cut short at the time budget: the smallest failing case so far"
            elif why is not None:
                res.faults.append(why)
        _record_failure(res, target, smallest.error, smallest.case, campaign_seed, config, note)
    res.pending = None
    res.phase = "done"
    res.seconds = time.monotonic() - start
    res.done = True
    return res


def reduce_failure(target: Target, case: Case, error: BaseException, budget: int = 2000, *,
                   deadline: float | None = None, stop: Callable[[], bool] | None = None,
                   ) -> tuple[_Found, str | None]:
    """Greedy delta-debugging of a failing case: drop ops, shrink chunks, narrow windows.

    Hypothesis shrinks what it generated, but not explicit examples (the boundary
    tours); this gives their failures the same small, readable seeds. A candidate
    is kept only if it still fails with the same exception type. Returns the smallest
    failing case with its exception, and why the reduction stopped early: ``None`` (it
    finished), ``"deadline"``, ``"interrupted"`` (a stop request or Ctrl-C), or a harness
    fault's one line. The smallest case so far is returned in every case.
    """
    error_type = type(error)
    best = _Found(case, error)

    def candidates(c: Case):
        window, ops = c.window, list(c.ops)
        if ops and isinstance(ops[0], Reset):
            yield Case(ops[0].window, ops[1:])
        for i in range(len(ops)):
            yield Case(window, ops[:i] + ops[i + 1:])
        for i, op in enumerate(ops):
            if isinstance(op, Chunk):
                for n in sorted({0, 1, op.n // 2, op.n - 1}):
                    if 0 <= n < op.n:  # chunk:0 has nothing smaller
                        yield Case(window, ops[:i] + [Push() if n == 1 else Chunk(n)] + ops[i + 1:])
            elif isinstance(op, Reset) and op.window > 1:
                yield Case(window, ops[:i] + [Reset(op.window - 1)] + ops[i + 1:])
        if window > 1:
            yield Case(window - 1, ops)

    _set_fresh(target, True)
    try:
        improved = True
        while improved and budget > 0:
            improved = False
            for cand in candidates(best.case):
                if stop is not None and stop():
                    return best, "interrupted"
                if deadline is not None and time.monotonic() >= deadline:
                    return best, "deadline"
                budget -= 1
                try:
                    target.run(cand)
                except error_type as e:
                    best, improved = _Found(cand, e), True
                    break
                except Exception as e:  # noqa: BLE001 - another failure is another bug, not this one
                    if failure_kind(e) == HARNESS:
                        return best, _fault_line(e)
                if budget <= 0:
                    break
    except KeyboardInterrupt:
        return best, "interrupted"
    finally:
        _set_fresh(target, False)
    return best, None


def _message(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:2000]


def _fault_line(error: BaseException) -> str:
    """A harness fault in one line: its reason, or the exception that Hypothesis or the database raised."""
    reason = getattr(error, "reason", None)
    text = reason if reason is not None else f"{type(error).__name__}: {error}"
    return (text.splitlines() or [""])[0][:500]


def _record_failure(res: TargetResult, target: Target, error: BaseException, case: Case, campaign_seed: int,
                    config: CampaignConfig, note: str | None = None) -> None:
    fail = Failure(target.name, _message(error), case, kind=failure_kind(error), note=note)
    res.failures.append(save_failure(fail, config, campaign_seed))


def save_failure(fail: Failure, config: CampaignConfig, campaign_seed: int | None, *,
                 note: str | None = None) -> Failure:
    """Save ``fail``'s case as a seed (when ``config.save_seeds``) and say where in ``fail``; a seed that
    cannot be written is kept in the failure (``seed_error``) for the CLI to print in full, never dropped.
    A campaign with a non-default ``--width``/``--dtype`` records them in the seed and in the replay hint."""
    if note is not None:
        fail.note = note
    if not config.save_seeds:
        return fail
    found = {"target": fail.target, "kind": fail.kind, "error": fail.error[:500],
             "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "campaign_seed": campaign_seed}
    if (config.width, config.dtype) != (CampaignConfig.width, CampaignConfig.dtype):
        found.update(width=config.width, dtype=config.dtype)
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
        fail.replay = replay_hint(saved.path, fail.target) + config.payload_flags()
    return fail
