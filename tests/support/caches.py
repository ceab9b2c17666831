"""Caches with a known bug (or a missing method), for campaigns, CLI runs and worker processes to catch.

They are targets too: ``--target py:tests.support.caches:ReadsFromSlotZero``
(a worker process imports them by that name, so they live in a module of their own).
"""

from __future__ import annotations

from fuzz.targets.pyring import PyRing

BUGGY = "py:tests.support.caches:ReadsFromSlotZero"
#: A bug no explicit phase reaches (W 7 .. 16): Hypothesis finds it, so it lands in the example database.
GAP_BUGGY = "py:tests.support.caches:ReadsFromSlotZeroBetweenTours"
NO_CONTENTS = "py:tests.support.caches:NoContents"


class ReadsFromSlotZero(PyRing):
    """A ring that reads from slot 0 instead of head once it has wrapped."""

    def contents(self):
        r = self._ring
        return [r.buf[i] for i in range(r.size)] if r else []


class ReadsFromSlotZeroWhenWide(ReadsFromSlotZero):
    """The same bug, only for windows >= 7: beyond the boundary tours (W <= 5)."""

    def contents(self):
        if self._ring is not None and self._ring.w >= 7:
            return super().contents()
        return PyRing.contents(self)


class ReadsFromSlotZeroBetweenTours(ReadsFromSlotZero):
    """The same bug, only for windows 7 .. 16: between the boundary tours (W <= 5) and the scale tours (W >= 33),
    explicit examples that Hypothesis never stores, so the failure comes from the generate phase and lands in the
    example database."""

    def contents(self):
        if self._ring is not None and 7 <= self._ring.w <= 16:
            return super().contents()
        return PyRing.contents(self)


class NoContents:
    """A cache missing contents(): the py: target must be refused naming the method."""

    def reset(self, window): ...
    def push(self, pos, key, value): ...
    def push_chunk(self, entries): ...
