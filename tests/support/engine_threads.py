"""A fake engine target for the threads phase on engine targets (issue 28.3): one shared engine object whose API
(this docstring, for the test) promises concurrent calls, each caller with a stream of its own.

:class:`Engine` extends a caller's window by ``n`` positions and returns the positions it then holds (the last
``W``). The racy one keeps the stream it is working on in a shared attribute (``self.held``: per-stream state on
the one object, as an engine that stashes its KV cache on the session would); the clean twin works on the caller's
list only. Each step sleeps for 0 s, which releases the GIL as a native kernel does, so two callers are inside the
object at once. One thread at a time, both are right: only the threads phase can tell them apart.
"""

from __future__ import annotations

import time

from fuzz.ops import Case
from fuzz.targets.base import Mismatch, RunStats
from fuzz.targets.engines import streams as S
from fuzz.targets.engines.base import EngineTarget
from fuzz.targets.known import case_stats


class Engine:
    def __init__(self, racy: bool):
        self.racy = racy
        self.held: list[int] = []

    def extend(self, held: list[int], start: int, n: int, window: int) -> list[int]:
        work = self.held = list(held) if self.racy else None
        work = work if work is not None else list(held)
        for p in range(start, start + n):
            work.append(p)
            time.sleep(0)  # the GIL released inside the "kernel"
        if self.racy:
            work = self.held  # read back: another caller's stream if it came in meanwhile
        return work[-window:]


class FakeEngineTarget(EngineTarget):
    """``fake-engine:racy`` / ``fake-engine:clean``: one :class:`Engine` shared by every stream this target runs."""

    distribution = "kvwindow-fake-engine"
    package = __name__
    release = "1.0"
    window_max = 32
    max_tokens = 96
    thread_safe = True
    threads_doc = "tests.support.engine_threads: Engine.extend may be called concurrently on one object"

    def __init__(self, racy: bool):
        self.engine = Engine(racy)
        self.name = self.finding_kind = f"fake-engine:{'racy' if racy else 'clean'}"

    def run_case(self, case: Case) -> RunStats:
        for w, ops in case.streams():
            held: list[int] = []
            for c in S.calls(ops):
                with self.calling("Engine.extend", c.index, c.op):
                    held = self.engine.extend(held, c.start, c.n, w)
                want = list(range(max(0, c.end - w), c.end))
                if held != want:
                    raise Mismatch(self.name, c.index, c.op, f"holds positions {held} after {c.end} tokens at "
                                                             f"W={w}; the spec holds {want}")
        return case_stats(case)


class Unpromised(FakeEngineTarget):
    """The clean engine without the promise: the threads phase must not run it (n/a naming the document)."""

    thread_safe = False
    threads_doc = "tests.support.engine_threads: Engine documents no concurrent use of one object"
