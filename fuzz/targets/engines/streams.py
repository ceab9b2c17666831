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
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

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


@dataclass
class Payload:
    q: np.ndarray  # [T, H, D] float32
    k: np.ndarray  # [T, Hkv, D]
    v: np.ndarray  # [T, Hkv, D]


def payload(seed: int, length: int, heads: int, kv_heads: int, dim: int) -> Payload:
    rng = np.random.default_rng(seed)
    f = lambda h: rng.standard_normal((length, h, dim)).astype(np.float32)  # noqa: E731
    return Payload(f(heads), f(kv_heads), f(kv_heads))


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
    flat_h = np.ascontiguousarray(history.reshape(history.shape[0], -1))
    index = {flat_h[p].tobytes(): p for p in range(flat_h.shape[0] - 1, -1, -1)}
    flat_k = np.ascontiguousarray(keys.reshape(keys.shape[0], -1).astype(np.float32))
    return [index.get(flat_k[i].tobytes()) for i in range(flat_k.shape[0])]


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
                       f"[{where}] cache holds positions {_short(held)} after {call.end} tokens; the next query needs "
                       f"{_short(want)} (W={ref.window}{', sinks ' + str(ref.sinks) if ref.sinks else ''})")


def _short(xs: list) -> str:
    return str(xs) if len(xs) <= 24 else f"[{', '.join(map(str, xs[:8]))}, ... {', '.join(map(str, xs[-8:]))}] ({len(xs)})"
