"""Python twins of the Lean theorems (DESIGN §3): one ``test_<leanName>`` per theorem.

Each theorem's statement is written once, as a checker that takes the
definitions as parameters (a :class:`Defs`) and returns the first
counterexample in the small scope or ``None``:

* exhaustive: every window ``W <= 6`` (from 0, or from 1 where the theorem needs
  ``0 < w``) and every history of length ``<= 9`` over a 2-letter alphabet;
  position theorems use entries ``(pos, letter)`` with positions ``0..n-1``;
* beyond the scope: a Hypothesis test on longer histories and wider windows;
* negative: the *same* checker run against a deliberately wrong definition
  (a step keeping ``W + 1``, an inclusive far edge, a ring that reads unfilled
  slots, a sink step that forgets the sinks, ...) must find a counterexample,
  so a twin that cannot fail does not count as a check.

The Lean names are in ``lean/README.md``; ``tests/test_lean_lint.py`` checks
that every theorem in ``lean/KVWindow/Audit.lean`` has a ``test_<name>`` here.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from typing import Any, Callable, Iterable, Optional

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from pyspec import spec
from pyspec.golden import sink_run as py_sink_run
from pyspec.ring import Ring

ALPHA = (0, 1)
MAX_LEN = 9
WINDOWS = range(0, 7)
POS_WINDOWS = range(1, 7)
SINKS = range(0, 4)
HISTS: list[tuple[int, ...]] = [h for n in range(MAX_LEN + 1) for h in itertools.product(ALPHA, repeat=n)]


# --------------------------------------------------------------------------- definitions under test


def _fold(step: Callable, w: int, c: Iterable, ys: Iterable) -> list:
    out = list(c)
    for y in ys:
        out = step(w, out, y)
    return out


@dataclasses.dataclass(frozen=True)
class Defs:
    """The definitions a theorem talks about; pyspec by default, a mutant in negative tests."""

    last_window: Callable = spec.last_window
    step: Callable = spec.step
    run: Callable = spec.run
    push_chunk: Callable = spec.push_chunk
    position_invariant: Callable = spec.position_invariant
    positions_last_window: Callable = spec.positions_last_window
    in_window: Callable = spec.in_window
    sink_window: Callable = spec.sink_window
    sink_step: Callable = spec.sink_step
    sink_run: Callable = py_sink_run
    ring: type = Ring

    def ring_run(self, w: int, xs: Iterable) -> Any:
        r = self.ring.empty(w)
        for x in xs:
            r = r.push(x)
        return r


PY = Defs()


def with_step(step: Callable) -> Defs:
    """A mutant ``step``; ``run``/``pushChunk`` are rebuilt from it (they are folds of ``step``)."""
    return dataclasses.replace(
        PY,
        step=step,
        run=lambda w, xs: _fold(step, w, [], xs),
        push_chunk=lambda w, c, ys: _fold(step, w, c, ys),
    )


def with_sink_step(sink_step: Callable) -> Defs:
    def sink_run(s, w, hs):
        c: list = []
        for x in hs:
            c = sink_step(s, w, c, x)
        return c

    return dataclasses.replace(PY, sink_step=sink_step, sink_run=sink_run)


def entries(letters: Iterable[int], base: int = 0) -> list[tuple[int, int]]:
    """A history of entries ``(pos, letter)`` with consecutive positions from ``base``."""
    return [(base + i, a) for i, a in enumerate(letters)]


def first_failure(check: Callable, d: Defs, windows: Iterable[int], hists=None) -> Optional[tuple]:
    for w in windows:
        for hs in (HISTS if hists is None else hists):
            if not check(d, w, list(hs)):
                return (w, hs)
    return None


# --------------------------------------------------------------------------- the statements (one per theorem)


def lastWindow_length(d: Defs, w: int, hs: list) -> bool:
    return len(d.last_window(w, hs)) == min(w, len(hs))


def lastWindow_suffix(d: Defs, w: int, hs: list) -> bool:
    lw = list(d.last_window(w, hs))
    # ∃ pre, pre ++ lastWindow w hs = hs
    return any(hs[:k] + lw == hs for k in range(len(hs) + 1))


def step_lastWindow(d: Defs, w: int, hs: list) -> bool:
    return all(d.step(w, d.last_window(w, hs), x) == d.last_window(w, hs + [x]) for x in ALPHA)


def step_preserves_valid(d: Defs, w: int, hs: list) -> bool:
    def valid(hist, c):
        return list(c) == list(d.last_window(w, hist))

    for k in range(len(hs) + 1):  # every candidate cache: each suffix of hs (one is valid)
        c = hs[k:]
        if valid(hs, c):
            if not all(valid(hs + [x], d.step(w, c, x)) for x in ALPHA):
                return False
    return True


def run_correct(d: Defs, w: int, hs: list) -> bool:
    return d.run(w, hs) == d.last_window(w, hs)


def run_length_le(d: Defs, w: int, hs: list) -> bool:
    return len(d.run(w, hs)) <= w


def pushChunk_correct(d: Defs, w: int, xs: list) -> bool:
    for m in range(MAX_LEN - len(xs) + 1):
        for ys in itertools.product(ALPHA, repeat=m):
            if d.push_chunk(w, d.last_window(w, xs), list(ys)) != d.last_window(w, xs + list(ys)):
                return False
    return True


def run_length_lt_of_gt(d: Defs, w: int, hs: list) -> bool:
    return not (w < len(hs)) or len(d.run(w, hs)) < len(hs)


def positions_lastWindow(d: Defs, w: int, letters: list) -> bool:
    hs = entries(letters)
    return [p for p, _ in d.last_window(w, hs)] == d.positions_last_window(w, len(hs))


def step_preserves_positionInvariant(d: Defs, w: int, letters: list) -> bool:
    for base in (0, 3):
        c = entries(letters, base)
        for a in ALPHA:
            x = (base + len(c), a)  # hx : x.pos = base + c.length
            if not d.position_invariant(d.step(w, c, x)):
                return False
    return True


def _ring_states(d: Defs, w: int):
    """Every ring of ``w`` slots over {empty, 0, 1}, any head and size (WF or not)."""
    for buf in itertools.product((None,) + ALPHA, repeat=w):
        for head in range(w):
            for size in range(w + 1):
                yield d.ring(w, buf, head, size)


RING_STATE_WINDOWS = range(1, 7)


def push_simulates_step(d: Defs, w: int, _hs: list) -> bool:
    for r in _ring_states(d, w):
        if Ring.wf(r):  # the hypothesis is the real WF, whatever the ring under test
            for x in ALPHA:
                if r.push(x).to_list() != spec.step(r.w, r.to_list(), x):
                    return False
    return True


def push_preserves_wf(d: Defs, w: int, _hs: list) -> bool:
    for r in _ring_states(d, w):
        if Ring.wf(r):
            for x in ALPHA:
                if not Ring.wf(r.push(x)):
                    return False
    return True


def ring_run_correct(d: Defs, w: int, hs: list) -> bool:
    return d.ring_run(w, hs).to_list() == d.run(w, hs)


def slot_eq_pos_mod(d: Defs, w: int, hs: list) -> bool:
    n = len(hs)
    r = d.ring_run(w, range(n))  # positions 0..n-1
    return all(r.buf[p % w] == p for p in range(n) if n <= p + w)


def _masked(d: Defs, w: int, hs: list) -> list:
    t = max(0, len(hs) - 1)  # Lean `hs.length - 1` (truncated)
    return [e for e in hs if d.in_window(w, t, e[0])]


def filter_inWindow_eq_lastWindow(d: Defs, w: int, letters: list) -> bool:
    hs = entries(letters)
    return _masked(d, w, hs) == list(d.last_window(w, hs))


ATTNS: list[Callable[[list], Any]] = [
    lambda c: tuple(c),  # the identity: the strongest attention function
    lambda c: sum((1 + a) * 2.0 ** -(p % 7) for p, a in c),  # a weighted sum of values
    lambda c: len(c),
]


def attention_eq(d: Defs, w: int, letters: list) -> bool:
    hs = entries(letters)
    return all(attn(_masked(d, w, hs)) == attn(d.run(w, hs)) for attn in ATTNS)


def sinkStep_correct(d: Defs, w: int, hs: list) -> bool:
    return all(
        d.sink_step(s, w, d.sink_window(s, w, hs), x) == d.sink_window(s, w, hs + [x])
        for s in SINKS for x in ALPHA
    )


def sinkRun_correct(d: Defs, w: int, hs: list) -> bool:
    return all(d.sink_run(s, w, hs) == d.sink_window(s, w, hs) for s in SINKS)


# --------------------------------------------------------------------------- mutants (negative checks)


def step_keeps_w_plus_1(w, c, x):
    c2 = list(c) + [x]
    return c2[1:] if w + 1 < len(c2) else c2


def step_evicts_at_w(w, c, x):  # `<=` instead of `<`: holds W - 1
    c2 = list(c) + [x]
    return c2[1:] if w <= len(c2) else c2


def step_never_evicts(w, c, x):
    return list(c) + [x]


def step_evicts_newest_old(w, c, x):  # drops the wrong entry: positions stop being consecutive
    c2 = list(c) + [x]
    return c2[:-2] + c2[-1:] if w < len(c2) else c2


def push_chunk_long_bug(w, c, ys):  # a chunk longer than W keeps its first W tokens
    ys = list(ys)
    if len(ys) > w:
        return ys[:w]
    return _fold(spec.step, w, c, ys)


class RingNoAdvance(Ring):
    """Overwrites the oldest slot but forgets to advance ``head``."""

    def push(self, x):
        if self.size < self.w:
            return super().push(x)
        buf = self.buf[:self.head] + (x,) + self.buf[self.head + 1:]
        return type(self)(self.w, buf, self.head, self.size)


class RingReadsGarbage(Ring):
    """Reads all ``w`` slots from ``head`` before the ring is full (unfilled slots leak out)."""

    def to_list(self):
        return [self.buf[(self.head + i) % self.w] for i in range(self.w)]


class RingWritePastEnd(Ring):
    """While filling, writes one slot too far: ``(head + size + 1) % w``."""

    def push(self, x):
        if self.size < self.w:
            slot = (self.head + self.size + 1) % self.w
            buf = self.buf[:slot] + (x,) + self.buf[slot + 1:]
            return type(self)(self.w, buf, self.head, self.size + 1)
        return super().push(x)


class RingEvictBeforeAppend(Ring):
    """When full, advances ``head`` first and writes at the new head (head/tail order swapped)."""

    def push(self, x):
        if self.size < self.w:
            return super().push(x)
        head = (self.head + 1) % self.w
        buf = self.buf[:head] + (x,) + self.buf[head + 1:]
        return type(self)(self.w, buf, head, self.size)


def in_window_inclusive_far_edge(w, t, p):  # `<=` on the far edge: W + 1 keys
    return p <= t and t <= p + w


def in_window_excludes_self(w, t, p):  # mask diagonal off by one
    return p < t and t < p + w


def sink_step_forgets_sinks(s, w, c, x):
    return spec.step(w, c, x)


def last_window_w_plus_1(w, hs):
    hs = list(hs)
    return hs[max(0, len(hs) - w - 1):]


def last_window_prefix(w, hs):
    return list(hs)[:min(w, len(hs))]


def positions_by_cache_length(w, n):  # the position replaced by the slot index
    return list(range(min(w, n)))


# --------------------------------------------------------------------------- the table

# theorem name -> (checker, windows, mutant Defs that must fail)
TWINS: dict[str, tuple[Callable, Iterable[int], Defs]] = {
    "lastWindow_length": (lastWindow_length, WINDOWS, dataclasses.replace(PY, last_window=last_window_w_plus_1)),
    "lastWindow_suffix": (lastWindow_suffix, WINDOWS, dataclasses.replace(PY, last_window=last_window_prefix)),
    "step_lastWindow": (step_lastWindow, WINDOWS, with_step(step_keeps_w_plus_1)),
    "step_preserves_valid": (step_preserves_valid, WINDOWS, with_step(step_keeps_w_plus_1)),
    "run_correct": (run_correct, WINDOWS, with_step(step_evicts_at_w)),
    "run_length_le": (run_length_le, WINDOWS, with_step(step_keeps_w_plus_1)),
    "pushChunk_correct": (pushChunk_correct, WINDOWS, dataclasses.replace(PY, push_chunk=push_chunk_long_bug)),
    "run_length_lt_of_gt": (run_length_lt_of_gt, WINDOWS, with_step(step_never_evicts)),
    "positions_lastWindow": (positions_lastWindow, WINDOWS,
                             dataclasses.replace(PY, positions_last_window=positions_by_cache_length)),
    "step_preserves_positionInvariant": (step_preserves_positionInvariant, WINDOWS,
                                         with_step(step_evicts_newest_old)),
    "push_simulates_step": (push_simulates_step, RING_STATE_WINDOWS, dataclasses.replace(PY, ring=RingNoAdvance)),
    "push_preserves_wf": (push_preserves_wf, RING_STATE_WINDOWS, dataclasses.replace(PY, ring=RingWritePastEnd)),
    "ring_run_correct": (ring_run_correct, POS_WINDOWS, dataclasses.replace(PY, ring=RingReadsGarbage)),
    "slot_eq_pos_mod": (slot_eq_pos_mod, POS_WINDOWS, dataclasses.replace(PY, ring=RingEvictBeforeAppend)),
    "filter_inWindow_eq_lastWindow": (filter_inWindow_eq_lastWindow, WINDOWS,
                                      dataclasses.replace(PY, in_window=in_window_inclusive_far_edge)),
    "attention_eq": (attention_eq, WINDOWS, dataclasses.replace(PY, in_window=in_window_excludes_self)),
    "sinkStep_correct": (sinkStep_correct, WINDOWS, with_sink_step(sink_step_forgets_sinks)),
    "sinkRun_correct": (sinkRun_correct, WINDOWS, with_sink_step(sink_step_forgets_sinks)),
}

# Ring-state theorems range over ring states, not histories: one pass per window.
_STATE_ONLY = {"push_simulates_step", "push_preserves_wf"}


def _exhaustive(name: str, d: Defs) -> Optional[tuple]:
    check, windows, _ = TWINS[name]
    hists = [()] if name in _STATE_ONLY else None
    return first_failure(check, d, windows, hists)


def _twin(name: str) -> None:
    """Exhaustive positive check, Hypothesis beyond that scope, then the same checker
    against the mutant must fail."""
    assert _exhaustive(name, PY) is None, f"{name}: pyspec counterexample {_exhaustive(name, PY)}"
    _beyond(name)
    assert _exhaustive(name, TWINS[name][2]) is not None, f"{name}: the checker cannot tell a wrong definition"


# --------------------------------------------------------------------------- beyond the small scope

_BIG_W = st.integers(min_value=0, max_value=40)
# Lengths drawn first, so long histories (past every window) are as common as short ones.
_LETTERS = st.integers(0, 120).flatmap(lambda n: st.lists(st.integers(0, 5), min_size=n, max_size=n))
BEYOND = settings(max_examples=40, deadline=None)


def _history_beyond(name: str, w: int, hs: list) -> None:
    check, windows, _ = TWINS[name]
    if min(windows) >= 1 and w < 1:
        w = 1
    if name == "pushChunk_correct":  # its checker enumerates chunks up to MAX_LEN; split instead
        k = len(hs) // 2
        assert spec.push_chunk(w, spec.last_window(w, hs[:k]), hs[k:]) == spec.last_window(w, hs)
        return
    assert check(PY, w, hs), (name, w, hs)


def _ring_state_beyond(name: str, w: int, head: int, size: int, fill: list, x: int) -> None:
    r = Ring(w, tuple(fill[:w]), head % w, min(size, w))
    if not Ring.wf(r):
        return
    if name == "push_simulates_step":
        assert r.push(x).to_list() == spec.step(r.w, r.to_list(), x)
    else:
        assert Ring.wf(r.push(x))


def _beyond(name: str) -> None:
    """The same statement with Hypothesis, past the exhaustive scope (windows to 40, histories to 120)."""
    if name in _STATE_ONLY:
        @BEYOND
        @given(w=st.integers(1, 12), head=st.integers(0, 11), size=st.integers(0, 12),
               fill=st.lists(st.one_of(st.none(), st.integers(0, 9)), min_size=12, max_size=12),
               x=st.integers(0, 9))
        def run(w, head, size, fill, x):
            _ring_state_beyond(name, w, head, size, fill, x)
    else:
        @BEYOND
        @given(w=_BIG_W, hs=_LETTERS)
        def run(w, hs):
            _history_beyond(name, w, hs)
    run()


# --------------------------------------------------------------------------- one test per theorem


def test_lastWindow_length():
    _twin("lastWindow_length")


def test_lastWindow_suffix():
    _twin("lastWindow_suffix")


def test_step_lastWindow():
    _twin("step_lastWindow")


def test_step_preserves_valid():
    _twin("step_preserves_valid")


def test_run_correct():
    _twin("run_correct")


def test_run_length_le():
    _twin("run_length_le")


def test_pushChunk_correct():
    _twin("pushChunk_correct")


def test_run_length_lt_of_gt():
    _twin("run_length_lt_of_gt")


def test_positions_lastWindow():
    _twin("positions_lastWindow")


def test_step_preserves_positionInvariant():
    _twin("step_preserves_positionInvariant")


def test_push_simulates_step():
    _twin("push_simulates_step")


def test_push_preserves_wf():
    _twin("push_preserves_wf")


def test_ring_run_correct():
    _twin("ring_run_correct")


def test_slot_eq_pos_mod():
    _twin("slot_eq_pos_mod")


def test_filter_inWindow_eq_lastWindow():
    _twin("filter_inWindow_eq_lastWindow")


def test_attention_eq():
    _twin("attention_eq")


def test_sinkStep_correct():
    _twin("sinkStep_correct")


def test_sinkRun_correct():
    _twin("sinkRun_correct")


def test_every_twin_has_a_test_function():
    names = {n[len("test_"):] for n in globals() if n.startswith("test_")}
    assert set(TWINS) <= names


def test_beyond_scope_catches_what_the_exhaustive_scope_cannot(monkeypatch):
    """A window edge that breaks only for W > 8 passes every exhaustive check (W <= 6) —
    the Hypothesis half of the twin is what catches it."""
    def last_window_wide_bug(w, hs):
        hs = list(hs)
        return hs[max(0, len(hs) - w - (1 if w > 8 else 0)):]

    wrong = dataclasses.replace(PY, last_window=last_window_wide_bug)
    assert _exhaustive("lastWindow_length", wrong) is None
    monkeypatch.setattr(sys.modules[__name__], "PY", wrong)
    with pytest.raises(AssertionError):
        _beyond("lastWindow_length")
