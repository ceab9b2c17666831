"""Mirror of ``lean/KVWindow/Spec.lean``, ``Positions.lean``, ``Attention.lean``, ``Sinks.lean``.

(The ring ``csrc/ringkv.c`` ships, ``IndexRing.lean``, is mirrored in ``pyspec/index_ring.py``.)

Entries are opaque: the list functions never look inside them. Only the
position functions read a position, through :func:`pos_of`.

Lean's ``Nat`` subtraction truncates at 0 (``3 - 5 = 0``); the mirror writes
that as ``max(0, a - b)`` where it matters, so the two agree on every input.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence, TypeVar

T = TypeVar("T")
A = TypeVar("A")


def _nat(name: str, value: Any) -> int:
    """Reject what Lean's ``Nat`` could not hold, naming the bad value."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a natural number (int >= 0), got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be a natural number (int >= 0), got {value}")
    return value


def _tsub(a: int, b: int) -> int:
    """Lean's truncated ``Nat`` subtraction."""
    return a - b if a > b else 0


def last_window(w: int, hs: Sequence[T]) -> list[T]:
    """Lean ``KVWindow.lastWindow w hs := hs.drop (hs.length - w)``: the last ``min w n`` entries."""
    _nat("window", w)
    hs = list(hs)
    return hs[_tsub(len(hs), w):]


def step(w: int, c: Sequence[T], x: T) -> list[T]:
    """Lean ``KVWindow.step``: append ``x``; if the length now exceeds ``w``, drop the oldest.

    ``if w < (c ++ [x]).length then (c ++ [x]).drop 1 else c ++ [x]``
    """
    _nat("window", w)
    c2 = list(c) + [x]
    if w < len(c2):
        return c2[1:]
    return c2


def push_chunk(w: int, c: Sequence[T], ys: Iterable[T]) -> list[T]:
    """Lean ``KVWindow.pushChunk w c ys := ys.foldl (step w) c`` (prefill, any chunk length)."""
    _nat("window", w)
    out = list(c)
    for y in ys:
        out = step(w, out, y)
    return out


def run(w: int, xs: Iterable[T]) -> list[T]:
    """Lean ``KVWindow.run w xs := xs.foldl (step w) []``."""
    return push_chunk(w, [], xs)


def valid(w: int, hs: Sequence[T], c: Sequence[T]) -> bool:
    """Lean ``KVWindow.Valid w hs c := c = lastWindow w hs``."""
    return list(c) == last_window(w, hs)


def pos_of(e: Any) -> int:
    """The position of an entry: an ``int`` is its own position, else ``e.pos``, else ``e[0]``.

    Lean's ``Entry`` is a structure with a ``pos`` field; Python callers pass
    ``(pos, key, value)`` tuples (the target protocol) or bare positions.
    """
    if isinstance(e, int) and not isinstance(e, bool):
        return e
    if hasattr(e, "pos"):
        return e.pos
    return e[0]


def position_invariant(c: Sequence[Any]) -> bool:
    """Lean ``KVWindow.PositionInvariant c := ∃ base, c.map Entry.pos = natsFrom base c.length``
    (consecutive positions ``base, base+1, ...``).

    The witness, when one exists, can only be ``c[0].pos``; the empty cache holds vacuously.
    """
    if not c:
        return True
    base = pos_of(c[0])
    return all(pos_of(e) == base + i for i, e in enumerate(c))


def positions_last_window(w: int, n: int) -> list[int]:
    """Lean ``KVWindow.positionsLastWindow w n := natsFrom (n - min w n) (min w n)``: by
    ``positions_lastWindow``, the cache after positions ``0..n-1`` holds ``n - min w n .. n-1``."""
    _nat("window", w)
    _nat("n", n)
    return list(range(n - min(w, n), n))


def in_window(w: int, t: int, p: int) -> bool:
    """Lean ``KVWindow.inWindow w t p := p ≤ t ∧ t < p + w`` (``t - w < p ≤ t`` without subtraction).

    The query at position ``t`` sees ``p`` iff this holds: ``W`` keys, itself included.
    """
    _nat("window", w)
    return p <= t and t < p + w


def guard_step(f: Callable[[A, T], A], p: Callable[[T], bool], acc: A, a: T) -> A:
    """Lean ``KVList.guardStep f p acc a := if p a = true then f acc a else acc``: one key of a
    fold that the mask ``p`` may hide (a hidden key leaves the accumulator unchanged)."""
    return f(acc, a) if p(a) else acc


def masked_fold(f: Callable[[A, T], A], mask: Callable[[T], bool], init: A, keys: Iterable[T]) -> A:
    """Lean ``KVWindow.maskedFold f mask init keys := keys.foldl (guardStep f mask) init``:
    attention as a kernel computes it, key by key, a masked key contributing nothing
    (a ``-inf`` logit has softmax weight 0). ``attention_eq`` says the full history
    masked for the newest query gives the same result as the cache with no mask."""
    acc = init
    for k in keys:
        acc = guard_step(f, mask, acc, k)
    return acc


def sink_window(s: int, w: int, hs: Sequence[T]) -> list[T]:
    """Lean ``KVWindow.sinkWindow s w hs := hs.take s ++ lastWindow (w - s) (hs.drop s)``.

    StreamingLLM: the first ``s`` entries (the attention sinks) stay forever;
    the remaining ``w - s`` slots slide. ``w - s`` truncates like Lean's ``Nat``.
    """
    _nat("sinks", s)
    _nat("window", w)
    hs = list(hs)
    return hs[:s] + last_window(_tsub(w, s), hs[s:])


def sink_step(s: int, w: int, c: Sequence[T], x: T) -> list[T]:
    """Lean ``KVWindow.sinkStep``: fill the sinks first, then slide the rest with ``step (w - s)``.

    ``if c.length < s then c ++ [x] else c.take s ++ step (w - s) (c.drop s) x``
    """
    _nat("sinks", s)
    _nat("window", w)
    c = list(c)
    if len(c) < s:
        return c + [x]
    return c[:s] + step(_tsub(w, s), c[s:], x)


def sink_run(s: int, w: int, hs: Iterable[T]) -> list[T]:
    """Lean ``KVWindow.sinkRun s w hs := hs.foldl (sinkStep s w) []``."""
    c: list[T] = []
    for x in hs:
        c = sink_step(s, w, c, x)
    return c
