"""Greedy delta-debugging of a failing case the campaign did not draw (a tour, a long or error tour).

Hypothesis shrinks what it generated, but not explicit examples; this gives their failures the
same small, readable seeds. Candidates, simplest first: one live instance alone, drop a live instance (and its ops), drop
the opening reset, drop one op, shrink a chunk, narrow a reset's window or the case's window,
narrow the payload width. A candidate is kept only if it still fails the same way: with the same
exception type, or — what a campaign asks — with the same signature (:func:`fuzz.results.signature`), so
reducing a second finding never turns it into the first; a candidate that fails another way is handed to
``other`` (the campaign keeps it as a finding of its own).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator

from fuzz.ops import Case, Chunk, Push, Reset, at, target_of
from fuzz.targets.base import HARNESS, Target, failure_kind

#: Runs :func:`confirm` gives a racy case.
CONFIRM_RUNS = 20


@dataclass
class Found:
    """The smallest failing case seen so far, and what it raised."""

    case: Case
    error: BaseException


def set_fresh(target: Target, fresh: bool) -> None:
    """Every case in a fresh process while a failure is shrunk (an isolated target's ``fresh``)."""
    if hasattr(target, "fresh"):
        target.fresh = fresh  # type: ignore[attr-defined]


def confirm(target: Target, case: Case, runs: int = CONFIRM_RUNS) -> tuple[int, int]:
    """Run threaded ``case`` on ``target`` ``runs`` times: ``(failed, runs)``. A race is confirmed when it
    fails at least once more; a case that never fails again is reported as such, not dropped."""
    failed = 0
    for _ in range(runs):
        try:
            target.run(case)
        except AssertionError:
            failed += 1
        except Exception:  # noqa: BLE001 - a crash counts as a reproduction too
            failed += 1
    return failed, runs


def fault_line(error: BaseException) -> str:
    """A harness fault in one line: its reason, or the exception that Hypothesis or the database raised."""
    reason = getattr(error, "reason", None)
    text = reason if reason is not None else f"{type(error).__name__}: {error}"
    return (text.splitlines() or [""])[0][:500]


def candidates(c: Case, narrow_width: bool = True) -> Iterator[Case]:
    """Every one-step smaller variant of ``c`` (a pinned ``--width`` is not narrowed); a paged case lists its own
    (:meth:`fuzz.paged.ops.PagedCase.candidates`)."""
    if getattr(c, "paged", False):
        yield from (d for d in c.candidates() if narrow_width or d.width == c.width)
        return
    if c.instances:
        for k in range(c.instance_count):  # one instance alone: the bug needed no second one
            yield c.instance_case(k)
    for k in range(len(c.instances), 0, -1):
        yield c.without_instance(k)
    ops = list(c.ops)
    if ops and isinstance(ops[0], Reset):
        yield c.replace(window=ops[0].window, ops=tuple(ops[1:]))
    for i in range(len(ops)):
        yield c.replace_ops(ops[:i] + ops[i + 1:])
    for i, op in enumerate(ops):
        k, bare = target_of(op)
        if isinstance(bare, Chunk):
            for n in sorted({0, 1, bare.n // 2, bare.n - 1}):
                if 0 <= n < bare.n:  # chunk:0 has nothing smaller
                    yield c.replace_ops(ops[:i] + [at(k, Push() if n == 1 else Chunk(n))] + ops[i + 1:])
        elif isinstance(bare, Reset) and bare.window > 1:
            yield c.replace_ops(ops[:i] + [at(k, Reset(bare.window - 1))] + ops[i + 1:])
    if c.window > 1:
        yield c.replace(window=c.window - 1)
    if c.width is not None and narrow_width:
        for w in sorted({4, 1, c.width // 2, c.width - 1}):
            if 1 <= w < c.width:
                yield c.replace(width=w)


def reduce_failure(target: Target, case: Case, error: BaseException, budget: int = 2000, *,
                   deadline: float | None = None, stop: Callable[[], bool] | None = None,
                   narrow_width: bool = True, same: Callable[[Case, BaseException], bool] | None = None,
                   other: Callable[[Case, BaseException], None] | None = None) -> tuple[Found, str | None]:
    """The smallest case failing like ``case`` did, with its exception, and why the reduction stopped early:
    ``None`` (it finished), ``"deadline"``, ``"interrupted"`` (a stop request or Ctrl-C), or a harness
    fault's one line. The smallest case so far is returned in every case. ``same(candidate, error)`` says
    whether a candidate's failure is this one (default: the same exception type); ``other`` is told of every
    finding that is not."""
    error_type = type(error)
    if same is None:
        def same(_c: Case, e: BaseException) -> bool:
            return isinstance(e, error_type)
    best = Found(case, error)
    set_fresh(target, True)
    try:
        improved = True
        while improved and budget > 0:
            improved = False
            for cand in candidates(best.case, narrow_width):
                if stop is not None and stop():
                    return best, "interrupted"
                if deadline is not None and time.monotonic() >= deadline:
                    return best, "deadline"
                if target.accepts(cand) is not None:
                    continue
                budget -= 1
                try:
                    target.run(cand)
                except Exception as e:  # noqa: BLE001 - this failure, another bug, or a harness fault
                    if failure_kind(e) == HARNESS:
                        return best, fault_line(e)
                    if same(cand, e):
                        best, improved = Found(cand, e), True
                        break
                    if other is not None:  # another failure is another bug, not this one
                        other(cand, e)
                if budget <= 0:
                    break
    except KeyboardInterrupt:
        return best, "interrupted"
    finally:
        set_fresh(target, False)
    return best, None
