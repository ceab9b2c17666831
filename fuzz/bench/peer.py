"""The peer: a plain Hypothesis state machine over the same C ring, written the way a user would.

``kvwindow bench`` runs the ``ring-c`` campaign and this machine side by side and
reports the campaign's tokens/s over the machine's (:func:`fuzz.bench.sections.section_peer`):
what the harness's boundary tours, phase coverage, seeds and reporting cost
against checking the ring by hand. The machine does what a hand-written test
does: rules push / chunk / reset through ``CRing``'s tuple protocol, the
history kept as a Python list of ``(pos, key, value)``, and an invariant that
compares ``contents()`` with the history's last ``W`` entries, exactly, after
every rule. Tokens count as in the campaign: a chunk of ``k`` is ``k``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from fuzz.oracle import PAYLOAD_WIDTH

#: Examples per ``run_state_machine_as_test`` call (Hypothesis's default ``max_examples``, what a user's
#: test runs); the time budget is checked between calls.
BATCH = 100


def peer_machine(window: int, tokens: list[int], width: int = PAYLOAD_WIDTH) -> type[RuleBasedStateMachine]:
    """The hand-written machine for ``CRing`` at window ``window``; adds every token pushed to ``tokens[0]``."""
    from impl.ring import CRing

    class RingPeer(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.ring = CRing(width)
            self.ring.reset(window)
            self.history: list[tuple[int, np.ndarray, np.ndarray]] = []

        def entry(self) -> tuple[int, np.ndarray, np.ndarray]:
            pos = len(self.history)
            key = np.full(width, pos, dtype=np.float32)
            self.history.append((pos, key, -key))
            return self.history[-1]

        @rule()
        def push(self) -> None:
            self.ring.push(*self.entry())
            tokens[0] += 1

        @rule(k=st.integers(0, 2 * window))
        def chunk(self, k: int) -> None:
            self.ring.push_chunk([self.entry() for _ in range(k)])
            tokens[0] += k

        @rule()
        def reset(self) -> None:
            self.ring.reset(window)
            self.history = []

        @invariant()
        def holds_the_last_w_entries(self) -> None:
            got = self.ring.contents()
            want = self.history[-window:]
            assert [p for p, _, _ in got] == [p for p, _, _ in want]
            for (_, gk, gv), (_, wk, wv) in zip(got, want):
                assert np.array_equal(gk, wk) and np.array_equal(gv, wv)

    return RingPeer


def measure_peer(window: int, seconds: float, width: int = PAYLOAD_WIDTH) -> dict[str, Any]:
    """Tokens per second of :func:`peer_machine` at ``window`` over about ``seconds``."""
    tokens = [0]
    machine = peer_machine(window, tokens, width)
    run = settings(max_examples=BATCH, deadline=None, database=None, phases=[Phase.generate],
                   suppress_health_check=list(HealthCheck))
    examples = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        run_state_machine_as_test(machine, settings=run)
        examples += BATCH
    elapsed = time.perf_counter() - start
    return {"window": window, "tokens": tokens[0], "examples": examples, "seconds": elapsed,
            "tokens_per_s": tokens[0] / elapsed}
