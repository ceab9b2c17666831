"""What the op-level engine targets (``ort:*``, ``mlx:rotating``, ``mlx:batch-rotating``) share: a case
turned into engine calls, payloads drawn from the case alone, and the float64 spec-mask reference.

* :func:`calls` — a stream's ops as calls: ``Push`` one token, ``Chunk(n)`` ``n`` tokens at the next
  positions (the stream's first call is the prefill, later ones are chunked continuations);
  ``chunk:0`` makes no call (no engine's users make a zero-token step; a case with one still checks
  the calls around it).
* :func:`payload` — queries, keys and values per position, standard normal float32, from a seed of the
  case, the stream's index and a salt naming the row of a batch: a failure replays from its case alone.
* :class:`Reference` — :func:`pyspec.attention.attention` over the stream's whole history (full
  history, the spec's mask, float64), computed once per stream and sliced per call; the window is the
  spec's ``W`` (and sinks where a cache keeps them), never an engine's parameter.
* :func:`compare` — one call's output rows against the reference rows: a :class:`Mismatch` at the op
  that made the call, naming the view, the row of the batch and the worst element.
* :func:`positions_of` — which history positions a cache's key rows hold (keys are stored bit-exactly
  by every cache here, so a key row identifies its position), for the contents checks.
* :class:`Outputs` — one view's outputs, gathered call by call into one array and held to the reference in
  one comparison (a campaign runs thousands of cases a second: one ``close_enough`` per view rather than one
  per call); a failure still names the first call that disagrees, and nothing a later call raises is
  reported before an earlier call's disagreement (:meth:`Outputs.check` runs first).

Speed (``kvwindow bench --only engines``): everything per stream is computed once — the payload, its flat
``[T, heads * D]`` float32 views (what the engines take), the reference of each (window, sinks) over the full
history (:meth:`Payload.reference`; a shorter batch row uses the prefix of its own full-length reference:
attention is causal, so a query's output never depends on later positions), and the key index the contents
checks look positions up in.
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass, field
from typing import Iterator, Optional, Sequence

import numpy as np

from fuzz.oracle import describe_difference
from fuzz.ops import Case, Chunk, Op, Push
from fuzz.targets.base import Mismatch
from fuzz.targets.engines.base import close_enough
from pyspec import attention as A
from pyspec import spec


def case_seed(case: Case, salt: str = "") -> int:
    """A 32-bit seed from the case's text form (and ``salt``): the same case always draws the same data."""
    return int.from_bytes(hashlib.sha256(f"{case.window}|{case.text}|{salt}".encode()).digest()[:4], "little")


@dataclass(frozen=True)
class Call:
    """One engine call: the op at ``index`` feeds positions ``start .. start + n - 1``."""

    index: int
    op: Op
    start: int
    n: int

    @property
    def end(self) -> int:
        return self.start + self.n


def calls(ops: Sequence[tuple[int, Op]]) -> list[Call]:
    """A stream's token-feeding ops as calls (``chunk:0`` makes none)."""
    out, n = [], 0
    for i, op in ops:
        if isinstance(op, (Push, Chunk)) and op.tokens > 0:
            out.append(Call(i, op, n, op.tokens))
            n += op.tokens
    return out


def stream_tokens(ops: Sequence[tuple[int, Op]]) -> int:
    return sum(op.tokens for _, op in ops if isinstance(op, (Push, Chunk)))


@dataclass(eq=False)
class Payload:
    q: np.ndarray  # [T, H, D] float32, C-contiguous
    k: np.ndarray  # [T, Hkv, D]
    v: np.ndarray  # [T, Hkv, D]
    _refs: dict = field(default_factory=dict, init=False, repr=False)
    _index: Optional[tuple] = field(default=None, init=False, repr=False)

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``q, k, v`` as ``[T, heads * D]`` float32 views (a slice of rows stays contiguous: no copy per call)."""
        t = self.q.shape[0]
        return self.q.reshape(t, -1), self.k.reshape(t, -1), self.v.reshape(t, -1)

    def reference(self, window: int, sinks: int = 0) -> "Reference":
        """The stream's reference at ``window`` (and ``sinks``), computed once per payload."""
        key = (window, sinks)
        if key not in self._refs:
            self._refs[key] = Reference(self, window, sinks)
        return self._refs[key]

    def positions(self, keys: np.ndarray) -> list[Optional[int]]:
        """:func:`positions_of` ``(keys, self.k)`` with the history's index built once per payload."""
        if self._index is None:
            self._index = _key_index(self.k)
        return _lookup(self._index, keys)


def references(payloads: Sequence[Payload], window: int, sinks: int = 0) -> list["Reference"]:
    """Each payload's :meth:`Payload.reference`, the missing ones computed in one :func:`pyspec.attention.attention`
    call: the rows of a batch stacked along the heads (query heads of row ``r`` read only row ``r``'s kv heads,
    the grouped-query mapping ``h // (H / Hkv)``), which is the same arithmetic per head at a fraction of the
    calls' overhead."""
    key = (window, sinks)
    todo = [p for p in payloads if key not in p._refs]
    if len(todo) > 1 and len({p.q.shape for p in todo}) == 1 and len({p.k.shape for p in todo}) == 1:
        heads = todo[0].q.shape[1]
        stacked = Payload(*(np.concatenate([getattr(p, x) for p in todo], axis=1) for x in ("q", "k", "v")))
        ref = Reference(stacked, window, sinks)
        for i, p in enumerate(todo):
            p._refs[key] = Reference.of(p, window, sinks, ref.out[:, i * heads:(i + 1) * heads])
    return [p.reference(window, sinks) for p in payloads]


def payload(seed: int, length: int, heads: int, kv_heads: int, dim: int) -> Payload:
    """Standard normal float32 ``q [T, heads, D]``, ``k, v [T, kv_heads, D]`` from ``seed`` (one draw, split)."""
    x = np.random.default_rng(seed).standard_normal(length * (heads + 2 * kv_heads) * dim, dtype=np.float32)
    a, b = length * heads * dim, length * (heads + kv_heads) * dim
    return Payload(x[:a].reshape(length, heads, dim), x[a:b].reshape(length, kv_heads, dim),
                   x[b:].reshape(length, kv_heads, dim))


class Reference:
    """The spec-mask reference of one stream: output row ``t`` is attention of query ``t`` over the keys
    ``inWindow W t p`` keeps (or a sink, ``p < sinks``)."""

    def __init__(self, data: Payload, window: int, sinks: int = 0, scale: Optional[float] = None):
        self.data, self.window, self.sinks = data, window, sinks
        t = data.q.shape[0]
        pos = np.arange(t)
        # sinkWindow s W keeps the first s positions and the last W - s of the rest (Lean ``sinkWindow``).
        span = window - sinks if sinks else window
        self.out = A.attention(data.q, data.k, data.v, pos, pos, span, sinks=sinks, scale=scale) if t else \
            np.zeros((0,) + data.q.shape[1:])

    @classmethod
    def of(cls, data: Payload, window: int, sinks: int, out: np.ndarray) -> "Reference":
        """A reference whose output rows were computed elsewhere (:func:`references`)."""
        ref = cls.__new__(cls)
        ref.data, ref.window, ref.sinks, ref.out = data, window, sinks, out
        return ref

    def rows(self, call: Call) -> np.ndarray:
        return self.out[call.start:call.end]

    def window_positions(self, n: int) -> list[int]:
        """The positions a cache must still hold after ``n`` tokens: those the next query (position ``n``)
        attends besides itself — ``lastWindow (W - 1)`` of the history (DESIGN §1, what a paged ``read``
        returns), or ``sinkWindow sinks (W - 1)`` with sinks. Caches may hold more (the whole window, or
        ``max_size - 1 + N`` after an ``N``-token step); they may not hold less."""
        hist = list(range(n))
        if self.sinks:
            return spec.sink_window(self.sinks, self.window - 1, hist)
        return spec.last_window(self.window - 1, hist)


class Outputs:
    """One view's outputs of one batch row, held to ``ref`` in one comparison (module docstring). ``put(call,
    out)`` stores a call's output rows at the call's positions; :meth:`check` compares every stored call and
    raises :func:`compare`'s :class:`Mismatch` for the first call (in call order; row order between
    :class:`Outputs` checked together, :func:`check_all`) that disagrees."""

    def __init__(self, target: str, ref: "Reference", atol: float, rtol: float, view: str,
                 row: Optional[int] = None, what: str = "attention output"):
        self.target, self.ref, self.atol, self.rtol, self.view, self.row, self.what = \
            target, ref, atol, rtol, view, row, what
        self.got = np.empty(ref.out.shape, np.float32)
        self.calls: list[tuple[int, Call]] = []  # (order of the call in the view, call)

    def put(self, call: Call, out, order: Optional[int] = None) -> None:
        self.got[call.start:call.end] = out
        self.calls.append((len(self.calls) if order is None else order, call))

    def first_bad(self) -> Optional[tuple[int, Call]]:
        """The first stored call whose rows are not within tolerance, or ``None``."""
        if not self.calls:
            return None
        end = max(c.end for _, c in self.calls)
        want = self.ref.out[:end]
        err = np.abs(self.got[:end] - want)
        bad = ~(err <= self.atol + self.rtol * np.abs(want))  # NaN is bad
        if not bad.any():
            return None
        rows_bad = bad.reshape(end, -1).any(axis=1)
        for order, c in sorted(self.calls, key=lambda x: x[0]):
            if rows_bad[c.start:c.end].any():
                return order, c
        return None

    def raise_for(self, call: Call) -> None:
        compare(self.target, call, self.got[call.start:call.end], self.ref.rows(call), self.atol, self.rtol,
                self.view, self.row, self.what)

    def check(self) -> None:
        check_all(self)


@contextlib.contextmanager
def deferred(*outputs: Outputs) -> Iterator[None]:
    """Run a view's calls, then :func:`check_all` its outputs — also when a call raised (a crash, a contents
    mismatch): an earlier call's disagreement is what the view reports first, as if compared call by call."""
    try:
        yield
    except Exception:
        check_all(*outputs)
        raise
    check_all(*outputs)


def check_all(*outputs: Outputs) -> None:
    """Raise for the earliest disagreeing call among ``outputs`` (ties: the first :class:`Outputs` given)."""
    worst = None
    for i, o in enumerate(outputs):
        b = o.first_bad()
        if b is not None and (worst is None or (b[0], i) < worst[0]):
            worst = ((b[0], i), o, b[1])
    if worst is not None:
        worst[1].raise_for(worst[2])


def compare(target: str, call: Call, got, want, atol: float, rtol: float, view: str, row: Optional[int] = None,
            what: str = "attention output"):
    """Raise a :class:`Mismatch` at ``call``'s op when ``got`` is not within tolerance of ``want``."""
    why = close_enough(got, want, atol, rtol)
    if why is not None:
        where = f"{view}" + (f", batch row {row}" if row is not None else "")
        raise Mismatch(target, call.index, call.op,
                       f"[{where}] {what} for positions {call.start}..{call.end - 1}: {why}")


def positions_of(keys: np.ndarray, history: np.ndarray) -> list[Optional[int]]:
    """For each key row ``keys[i]`` (``[L, Hkv, D]``), the history position whose key it equals bit for bit
    (``None``: no position's; the first match when payloads repeat, which float32 normals never do)."""
    return _lookup(_key_index(history), keys)


def _key_index(history: np.ndarray) -> tuple:
    """``(rows, fingerprints sorted, their positions, unique)`` of a history's keys: a key row's first 32 bits
    is its fingerprint, confirmed against the whole row; ``unique`` is False when two positions share one."""
    rows = np.ascontiguousarray(history.reshape(history.shape[0], int(np.prod(history.shape[1:]))), dtype=np.float32)
    fp = rows[:, 0].view(np.uint32) if rows.shape[1] else np.zeros(rows.shape[0], np.uint32)
    order = np.argsort(fp, kind="stable")
    sfp = fp[order]
    return rows, sfp, order, not bool((sfp[1:] == sfp[:-1]).any())


def _lookup(index: tuple, keys: np.ndarray) -> list[Optional[int]]:
    rows, sfp, order, unique = index
    flat = np.ascontiguousarray(keys.reshape(keys.shape[0], int(np.prod(keys.shape[1:]))), dtype=np.float32)
    if not len(flat):
        return []
    if not unique or flat.shape[1] != rows.shape[1] or not len(rows):  # the exact, slower way
        table = {rows[p].tobytes(): p for p in range(rows.shape[0] - 1, -1, -1)}
        return [table.get(flat[i].tobytes()) for i in range(flat.shape[0])]
    fk = flat[:, 0].view(np.uint32)
    at = np.minimum(np.searchsorted(sfp, fk), len(sfp) - 1)
    pos = order[at]
    hit = (sfp[at] == fk) & (rows[pos].view(np.uint32) == flat.view(np.uint32)).all(axis=1)
    return [int(p) if h else None for p, h in zip(pos.tolist(), hit.tolist())]


def check_holds(target: str, call: Call, held: list[Optional[int]], ref: Reference, view: str,
                row: Optional[int] = None, exact: bool = False, stale_ok: bool = False) -> None:
    """The cache after ``call`` must hold the spec's window (``exact``: nothing else) as a run ending at the
    newest position, in order, with no row that is not a history key (``stale_ok``: rows before the window
    may be anything — a batch cache keeps pad rows there that its mask hides)."""
    if stale_ok:
        keep = len(ref.window_positions(call.end))
        held = held[len(held) - keep:] if keep else []
    want = ref.window_positions(call.end)
    where = f"{view}" + (f", batch row {row}" if row is not None else "")
    s = min(ref.sinks, len(want))
    head, rest, want_rest = held[:s], held[s:], want[s:]
    ok = None not in held and (held == want if exact else (
        head == want[:s] and len(rest) >= len(want_rest) and rest[len(rest) - len(want_rest):] == want_rest
        and rest == sorted(rest) and all(p >= s for p in rest)))
    if not ok:
        raise Mismatch(target, call.index, call.op,
                       f"[{where}] cache holds positions other than the next query needs after {call.end} tokens: "
                       f"{describe_difference(held, want, 'held', 'needed')} "
                       f"(W={ref.window}{', sinks ' + str(ref.sinks) if ref.sinks else ''})")


def _short(xs: list) -> str:
    return str(xs) if len(xs) <= 24 else f"[{', '.join(map(str, xs[:8]))}, ... {', '.join(map(str, xs[-8:]))}] ({len(xs)})"
