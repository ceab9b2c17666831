"""Hypothesis state machine for a ``ringkv.h`` ring: one long interleaving of ops per example.

The campaign (``fuzz.campaign``) generates whole cases up front; this
machine instead chooses each op after seeing the state, so Hypothesis can
steer into a window edge it has just reached and shrink to the shortest
interleaving that fails. Chunk lengths are biased to ``W-1``, ``W``,
``W+1`` and ``2W+3`` (``fuzz.strategies.chunk_sizes``). After every rule the
invariant compares the contents, ``len`` and the next position with the oracle,
through the same array comparison as the campaign (:func:`fuzz.targets.cache.compare_arrays`).
"""

from __future__ import annotations

from typing import Callable

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from fuzz.ops import Chunk, Push, Reset
from fuzz.oracle import PAYLOAD_WIDTH, SpecStream
from fuzz.strategies import chunk_sizes, windows
from fuzz.targets.cache import array_cache, compare_arrays


def ring_machine(factory: Callable[[], object], *, width: int = PAYLOAD_WIDTH,
                 window_max: int = 16) -> type[RuleBasedStateMachine]:
    """A state machine class driving caches built by ``factory`` (``CRing`` or any
    ringkv backend), checked against :class:`fuzz.oracle.SpecStream`."""

    class RingMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.ring = factory()
            self.cache = array_cache(self.ring, width)
            self.spec: SpecStream | None = None

        @initialize(w=windows(window_max))
        def start(self, w: int) -> None:
            self.cache.reset(w)
            self.spec = SpecStream(w, width)

        @rule()
        def push(self) -> None:
            self.cache.push(*self.spec.next_entry())
            self.spec.apply(Push())

        @rule(data=st.data())
        def push_chunk(self, data) -> None:
            n = data.draw(chunk_sizes(self.spec.window), label="chunk")
            self.cache.push_arrays(*self.spec.new_entries(n))
            self.spec.apply(Chunk(n))

        @rule(w=windows(window_max))
        def reset(self, w: int) -> None:
            self.cache.reset(w)
            self.spec.apply(Reset(w))

        @rule()
        def read(self) -> None:
            """An explicit read through ``ringkv_read`` with an exact-size buffer."""
            if hasattr(self.ring, "read"):
                pos, _, _ = self.ring.read()
                want = self.spec.positions()
                assert pos.tolist() == want, f"read() {pos.tolist()} != spec {want}"

        @invariant()
        def matches_spec(self) -> None:
            if self.spec is None:
                return
            diff = compare_arrays(self.cache.read_arrays(), self.spec.expected())
            assert diff is None, f"W={self.spec.window}: {diff}"
            if hasattr(self.ring, "next_position"):
                assert self.ring.next_position() == self.spec.n, \
                    f"next position {self.ring.next_position()} != tokens seen {self.spec.n}"
                want = len(self.spec.positions())
                assert len(self.ring) == want, f"length {len(self.ring)} != spec {want}"

        def teardown(self) -> None:
            close = getattr(self.ring, "close", None)
            if close is not None:
                close()

    RingMachine.__name__ = RingMachine.__qualname__ = f"RingMachine_{getattr(factory, '__name__', 'cache')}"
    return RingMachine


def ring_c_machine() -> type[RuleBasedStateMachine]:
    """The machine for target ``ring-c`` (the library compiled at install)."""
    from impl.ring import CRing

    def ring_c() -> CRing:
        return CRing(PAYLOAD_WIDTH)

    return ring_machine(ring_c)
