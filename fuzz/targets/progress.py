"""Where a target running in a supervised child says how far it got, so that a death can be placed.

A target's :attr:`~fuzz.targets.base.Target.op_slot` is an array of int64 words in memory
shared with the supervisor (:mod:`fuzz.targets.isolated`), which reads it when the child
dies or hangs — after the fact, so writing it must be cheap and must not depend on the
child surviving:

* ``SEQ`` — the number of the request being run;
* ``OP`` — the index of the op being run (``-1``: the opening reset; :data:`IDLE` between
  requests); in the bulk phase, the index of the stream;
* ``RUN`` — the length of the trace call in progress (``0``: none): pushes ``OP .. OP + RUN - 1``
  of the case, or positions ``POS .. POS + RUN - 1`` of a bulk stream;
* ``POS``, ``WINDOW``, ``DONE`` — bulk phase only: where the segment being traced starts, the
  stream's window, and the tokens the earlier streams checked;
* ``SETUP`` — how many times one-time setup (a model built, converted, compiled) began or ended in this
  request: odd while the target is inside :func:`setting_up`. The supervisor times setup apart from the
  ops (its own limit; never part of an op's measured cost), so a slow first call is not a hang.

After :data:`HEADER` words come :data:`TRACE_WORDS` more, :attr:`~fuzz.targets.base.Target.trace_sums`:
the checksum buffer the trace call in progress writes into, filled with :data:`UNWRITTEN`
first. ``ringkv_trace`` writes the checksum after each push (``csrc/ringkv.h``), so the
first entry still unwritten is the push that was running when the library died — one
fill per trace call, and the op loop keeps pushing a run of pushes through one trace.
"""

from __future__ import annotations

import numpy as np

SEQ, OP, RUN, POS, WINDOW, DONE, SETUP = range(7)
#: Words before the trace buffer.
HEADER = 8
#: Checksums one supervised trace call can report its progress in (1 MiB; longer runs are traced in pieces).
TRACE_WORDS = 1 << 17
#: The slot's size in int64 words.
WORDS = HEADER + TRACE_WORDS
#: ``slot[OP]`` between requests.
IDLE = -2
#: What a checksum entry holds before the trace writes it (a checksum is this value with probability 2**-64).
UNWRITTEN = np.uint64(0xA5A5_5A5A_C3C3_3C3C)


def trace_buffer(slot) -> np.ndarray:
    """The :data:`TRACE_WORDS` checksums (``uint64``) after the header of ``slot`` (a ``memoryview`` of
    :data:`WORDS` int64), sharing its memory."""
    return np.frombuffer(slot, dtype=np.uint64, count=TRACE_WORDS, offset=HEADER * 8)


def pushes_written(sums: np.ndarray, m: int) -> int:
    """How many of a trace's ``m`` pushes wrote their checksum into ``sums`` (filled with :data:`UNWRITTEN`
    before the call): the index of the push that was running when the call stopped."""
    unwritten = np.flatnonzero(sums[:m] == UNWRITTEN)
    return int(unwritten[0]) if unwritten.size else m


def running_push(slot, sums: np.ndarray, first: int) -> int:
    """``first`` (the op or position a trace started at), plus, while a trace of ``slot[RUN]`` pushes is in
    progress, the pushes that wrote their checksum into ``sums``: the push that was running."""
    run = int(slot[RUN])
    return first + min(pushes_written(sums, run), run - 1) if run > 0 else first


def running_op(slot, sums: np.ndarray) -> int:
    """The index of the op ``slot`` says was running (a push inside a traced run of pushes included)."""
    return running_push(slot, sums, int(slot[OP]))


def in_setup(slot) -> bool:
    """Whether ``slot`` says the target is inside :func:`setting_up`."""
    return bool(int(slot[SETUP]) & 1)


#: The slot of this process when it is a supervised runner (set by :mod:`fuzz.targets.isolated_child`), so a
#: ``py:`` cache can mark its own setup with ``setting_up()`` without holding the slot.
_process_slot = None


def set_process_slot(slot) -> None:
    global _process_slot
    _process_slot = slot


class setting_up:
    """``with setting_up():`` marks one-time setup (building, converting, compiling a model; a first call per
    shape) in the shared slot, so a supervisor does not count it toward an op's time limit (it has its own,
    :data:`fuzz.config.SETUP_TIMEOUT`). A ``py:`` cache may use it around its own setup; targets use
    :meth:`fuzz.targets.base.Target.setting_up`. Nested uses mark once; in process (no slot) it does nothing."""

    __slots__ = ("slot", "outer")

    def __init__(self, slot=None) -> None:
        self.slot, self.outer = (slot if slot is not None else _process_slot), False

    def __enter__(self) -> None:
        if self.slot is not None and not in_setup(self.slot):
            self.slot[SETUP] += 1
            self.outer = True

    def __exit__(self, *exc) -> None:
        if self.outer:
            self.slot[SETUP] += 1
