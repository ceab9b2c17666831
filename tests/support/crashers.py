"""Targets that crash, hang, hog memory, fail slowly or break the harness: what the crash-proofing tests drive.

The C ones are ``csrc/ringkv.c`` with one line changed by
:func:`impl._ring_build.compile_ring_library` (its exactly-once edit): the write of
position 5 into a ring of window 3 does something fatal. The Python ones are protocol
caches (``py:tests.support.crashers:NAME``; worker processes and isolated children import
them by that name).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from fuzz.targets.pyring import PyRing
from tests.support.caches import ReadsFromSlotZero, ReadsFromSlotZeroWhenWide

#: The line of ``csrc/ringkv.c`` the C crashers edit (``write_slot``: every push and chunk goes through it).
SLOT_WRITE = "  r->pos[s] = pos;"
#: ... or, for a crash that only the trace reaches, the first line of ``ringkv_trace``'s step (``p``: the position).
TRACE_STEP = "    const int64_t s = rkv_slot(p, w);"
#: What is inserted before that line: ``{body}`` runs when ``{when}`` holds.
EDIT = "  if ({when}) {{ {body} }}\n"
#: The default trigger of :data:`EDIT`: position 5 is written into a ring of window 3.
WHEN = "pos == 5 && r->w == 3"
BODIES = {
    "segv": "*(volatile int *)0 = 1;",
    "abort": "abort();",
    "hang": "for (volatile int spin = 1; spin;) {}",
    # reads one int64 past the end of a heap array: nothing visible without ASan
    "overflow": "volatile int64_t past = r->pos[r->w]; (void)past;",
}


def c_crasher(kind: str, dest: Path, *, sanitize: bool = False, when: str = WHEN, line: str = SLOT_WRITE) -> Path:
    """``csrc/ringkv.c`` compiled into ``dest`` with :data:`BODIES` ``[kind]`` run before ``line`` whenever
    ``when`` holds (C over ``r``, the ring, and at :data:`SLOT_WRITE` ``pos``, the position written, at
    :data:`TRACE_STEP` ``p``, the position the trace pushes; default: position 5 at window 3)."""
    import pytest

    from impl._ring_build import NoCompiler, compile_ring_library

    try:
        return compile_ring_library(dest, replace=(line, EDIT.format(when=when, body=BODIES[kind]) + line),
                                    sanitize=sanitize)
    except NoCompiler as e:
        pytest.skip(str(e))


def _n(cache) -> int:
    return cache._next


class RaisesOnPush(PyRing):
    """Raises on the spec-valid push of position 5: an exception of the implementation is a crash."""

    def push(self, pos, key, value):
        if pos == 5:
            raise RuntimeError("internal state corrupted")
        super().push(pos, key, value)


class NeedsArgs(PyRing):
    """A class that cannot be built with no arguments: building it is the harness's failure, not a bug."""

    def __init__(self, size):
        super().__init__()


class BuildsOnce(PyRing):
    """Builds once (when the target is resolved), then its constructor fails: the harness cannot build the
    cache under test, which is a harness fault, never a seed. ``built`` counts the builds (reset it first)."""

    built = 0

    def __init__(self):
        BuildsOnce.built += 1
        if BuildsOnce.built > 1:
            raise OSError(24, "Too many open files")
        super().__init__()


class Hog(PyRing):
    """Allocates 2 GiB when position 5 is pushed into a window of 3."""

    def push(self, pos, key, value):
        if pos == 5 and self._ring is not None and self._ring.w == 3:
            self.hoard = bytearray(2 << 30)
        super().push(pos, key, value)


class Slow:
    """Every push and chunk takes ``delay`` (20 ms; mixed into a buggy cache: reducing or shrinking its failure
    is slow)."""

    delay = 0.02

    def push(self, pos, key, value):
        time.sleep(self.delay)
        super().push(pos, key, value)

    def push_chunk(self, entries):
        time.sleep(self.delay)
        super().push_chunk(entries)


class SlowRing(Slow, PyRing):
    """A correct ring that takes 2 ms per entry (PyRing pushes a chunk entry by entry): the boundary tours take
    a fraction of a second, the long tour's 70 001 tokens over two minutes."""

    delay = 0.002


class SlowerRing(SlowRing):
    """10 ms per entry: a target that cannot reach 100 examples in a few seconds on any machine (a campaign's
    coverage goal, tests/test_schedule.py)."""

    delay = 0.01


class SlowTourBug(Slow, ReadsFromSlotZero):
    """The slot-zero bug, which the boundary tours find: reducing the failing tour is slow."""


class SlowWideBug(Slow, ReadsFromSlotZeroWhenWide):
    """The slot-zero bug for windows >= 7 only (beyond the tours: Hypothesis finds and shrinks it): shrinking
    is slow."""


class KillsItsProcess(PyRing):
    """SIGKILLs the process it runs in when a window of 9 or more is used: a worker that dies."""

    def reset(self, window):
        if window >= 9:
            os.kill(os.getpid(), signal.SIGKILL)
        super().reset(window)


class DiesWhileShrinking(ReadsFromSlotZeroWhenWide):
    """The wide slot-zero bug; the process SIGKILLs itself at its fourth failing read, so the worker dies
    in the middle of shrinking, after it has reported its first failing case."""

    failures = 0

    def contents(self):
        got = super().contents()
        if [e[0] for e in got] != [e[0] for e in PyRing.contents(self)]:
            DiesWhileShrinking.failures += 1
            if DiesWhileShrinking.failures >= 4:
                time.sleep(0.5)  # let the worker's queue deliver the pending case first
                os.kill(os.getpid(), signal.SIGKILL)
        return got


class AlwaysWrong(PyRing):
    """Holds one entry too many from the start: every case fails, and the smallest is ``window=1``, no ops."""

    def contents(self):
        return [(-1, [0.0] * 4, [0.0] * 4)] + super().contents()
