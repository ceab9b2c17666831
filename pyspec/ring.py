"""Mirror of ``lean/KVWindow/Ring.lean``: the ring buffer an inference engine writes.

``W`` slots, a ``head`` (the oldest slot) and a ``size`` (filled slots). The
entry of position ``p`` lands in slot ``p mod W`` (Lean ``slot_eq_pos_mod``),
and :meth:`Ring.to_list` — the seed write-up's ``ringToList`` — reads ``size``
slots from ``head``, so unfilled slots are never read (Lean ``push_simulates_step``
proves this equals the list model's ``step``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Optional, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Ring(Generic[T]):
    """Lean ``KVWindow.Ring``: fields ``w``, ``buf : List (Option α)``, ``head``, ``size``.

    ``None`` is Lean's ``none`` (an empty slot). Constructors go through
    ``type(self)``/``cls`` so a test can subclass a deliberately broken ring.
    """

    w: int
    buf: tuple[Optional[T], ...]
    head: int
    size: int

    @classmethod
    def empty(cls, w: int) -> "Ring[Any]":
        """Lean ``Ring.empty w := Ring.mk w (emptySlots w) 0 0``; ``W < 1`` is rejected
        (Lean's ``Ring.WF`` requires ``0 < w``)."""
        if isinstance(w, bool) or not isinstance(w, int):
            raise TypeError(f"ring window must be an int >= 1, got {w!r}")
        if w < 1:
            raise ValueError(f"ring window must be >= 1, got {w}")
        return cls(w, (None,) * w, 0, 0)

    def push(self, x: T) -> "Ring[T]":
        """Lean ``Ring.push``: while not full write slot ``(head + size) % w`` and grow;
        when full overwrite the head slot (the oldest) and advance ``head``."""
        if self.size < self.w:
            slot = (self.head + self.size) % self.w
            return type(self)(self.w, _set(self.buf, slot, x), self.head, self.size + 1)
        return type(self)(self.w, _set(self.buf, self.head, x), (self.head + 1) % self.w, self.size)

    def to_list(self) -> list[T]:
        """Lean ``Ring.toList r := somes r.reads``, where ``Ring.reads`` reads the ``size``
        slots ``(head + i) % w`` for ``i < size`` (``readsOf``/``slotRead``) and ``somes``
        keeps the filled ones (``List.filterMap id``)."""
        out = []
        for i in range(self.size):
            e = self.buf[(self.head + i) % self.w]
            if e is not None:
                out.append(e)
        return out

    def wf(self) -> bool:
        """Lean ``Ring.WF``: ``0 < w ∧ buf.length = w ∧ head < w ∧ size ≤ w ∧
        (size < w → head = 0) ∧ ∃ vals, reads = vals.map some`` (every read slot is filled)."""
        return (
            0 < self.w
            and len(self.buf) == self.w
            and 0 <= self.head < self.w
            and 0 <= self.size <= self.w
            and (self.size == self.w or self.head == 0)
            and all(self.buf[(self.head + i) % self.w] is not None for i in range(self.size))
        )


def _set(buf: tuple, i: int, x: Any) -> tuple:
    """Lean ``KVWindow.setSlot``: replace slot ``i`` (no effect past the end)."""
    if i >= len(buf):
        return buf  # Lean's `| [], _, _ => []`; slicing alone would append x
    return buf[:i] + (x,) + buf[i + 1:]


def slot_of(pos: int, w: int) -> int:
    """Lean ``slot_eq_pos_mod``: after pushing positions ``0..n-1``, every position ``p`` still
    in the window (``n ≤ p + w``) is in slot ``p % w`` (``getSlot buf (p % w) = some p``)."""
    if w < 1:
        raise ValueError(f"ring window must be >= 1, got {w}")
    return pos % w


def ring_run(w: int, xs) -> Ring:
    """Lean ``Ring.run w xs := xs.foldl Ring.push (Ring.empty w)`` (``ring_run_correct``)."""
    r = Ring.empty(w)
    for x in xs:
        r = r.push(x)
    return r
