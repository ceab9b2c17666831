"""What the model-level engine targets (``ct2:``, ``llama:``, ``keras:``) share: each stream of a case
as token ids drawn from the case's seed, the float64 spec-mask reference computed **once per stream**
over its whole history, and the comparison that names the op a disagreeing logit row belongs to.

A case's stream (``Case.streams()``) is a list of ops; :func:`plan` turns it into a :class:`Stream`:
its tokens (seeded by the stream's own window, index and ops, so a seed replays identically and a
case cut after a stream's last op drives that stream exactly as the whole case did), the op that
feeds each position (``cols``: failure messages name the op of the first bad row) and the engine
calls the ops stand for (``calls``: ``(op index, op, start, n)``, one per op that feeds tokens; the
first is the prefill, a later ``Chunk`` a chunked continuation, a ``Push`` one decode step).

Every path an engine target drives for a stream (a forward of the whole row, decode steps, a padded
batch, generation, cache edits) produces logit rows of positions of some token sequence; all of them
are rows of :meth:`Reference.logits` of that sequence (the stream's tokens, or a prompt plus what the
engine generated), computed once and kept (an LRU of a few hundred sequences), so the reference costs
one float64 forward per distinct sequence, not one per op.

A failure is charged to the **last op of its stream** (:attr:`Stream.last`): every path of a stream
depends on all of its ops (the batch row's length, the stream's tokens), so that is the shortest prefix
that replays it; the message names the op that fed the first bad position.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from fuzz.ops import Case, Op
from fuzz.targets.base import Mismatch

#: Token ids a stream draws (0-2 are pad/bos/eos: never drawn, so no engine treats one specially).
LOW = 3


def case_seed(case: Case) -> int:
    return int.from_bytes(hashlib.sha256(f"{case.window}|{case.text}".encode()).digest()[:4], "little")


@dataclass
class Stream:
    epoch: int
    window: int
    tokens: list[int]
    #: ``cols[t]``: the (op index, op) that fed position ``t``.
    cols: list[tuple[int, Op]]
    #: ``(op index, op, start, n)`` per op that feeds tokens, in order.
    calls: list[tuple[int, Op, int, int]]
    #: A second row for batches: seeded tokens of another length (``len(tokens) +- 1..3``, at least 1).
    other: list[int]
    #: The stream's last op (what a failure of the stream is charged to).
    last: tuple[int, Op] = (-1, None)  # type: ignore[assignment]

    @property
    def length(self) -> int:
        return len(self.tokens)


def stream_seed(window: int, epoch: int, seg: Sequence[tuple[int, Op]]) -> int:
    text = " ".join(op.text for _, op in seg)
    return int.from_bytes(hashlib.sha256(f"{window}|{epoch}|{text}".encode()).digest()[:4], "little")


def plan(case: Case, vocab: int) -> list[Stream]:
    """The case's streams that feed at least one token, with their seeded tokens."""
    out = []
    for epoch, (w, seg) in enumerate(case.streams()):
        calls, cols, start = [], [], 0
        for i, op in seg:
            if op.tokens > 0:
                calls.append((i, op, start, op.tokens))
                cols += [(i, op)] * op.tokens
                start += op.tokens
        if not calls:
            continue
        rng = np.random.default_rng(stream_seed(w, epoch, seg))
        tokens = [int(t) for t in rng.integers(LOW, vocab, size=start)]
        delta = int(rng.integers(1, 4)) * (1 if rng.integers(0, 2) else -1)
        other = [int(t) for t in rng.integers(LOW, vocab, size=max(1, start + delta))]
        out.append(Stream(epoch, w, tokens, cols, calls, other, seg[-1]))
    return out


def log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


class Reference:
    """Float64 spec-mask logits of token sequences at a window, cached: ``forward(window, tokens)``
    is the engine-independent reference (:func:`impl.hf.reference.forward` over the same weights)."""

    def __init__(self, forward: Callable[[int, Sequence[int]], np.ndarray], size: int = 512):
        self._forward, self._size = forward, size
        self._cache: "OrderedDict[tuple, np.ndarray]" = OrderedDict()

    def logits(self, window: int, tokens: Sequence[int]) -> np.ndarray:
        key = (window, tuple(int(t) for t in tokens))
        hit = self._cache.get(key)
        if hit is None:
            from impl.decoder import torch_threads

            with torch_threads(1):  # a tiny float64 forward: a second thread only spins (3 ms -> 40-150 ms here)
                hit = np.asarray(self._forward(window, key[1]), dtype=np.float64)
            self._cache[key] = hit
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return hit


def first_bad(got: np.ndarray, want: np.ndarray, atol: float, rtol: float) -> Optional[tuple[int, float]]:
    """The first row of ``got`` (``[L, V]``) off ``want`` by more than ``atol + rtol * |want|`` (a NaN
    is), with its worst error; ``None`` when every row is close."""
    g = np.asarray(got, dtype=np.float64).reshape(len(got), -1)
    w = np.asarray(want, dtype=np.float64).reshape(len(want), -1)
    if g.shape != w.shape:
        return (0, float("inf"))
    err = np.abs(g - w)
    bad = ~(err <= atol + rtol * np.abs(w))
    rows = np.nonzero(bad.any(axis=1))[0]
    if rows.size == 0:
        return None
    r = int(rows[0])
    return r, float(np.nan_to_num(err[r], nan=np.inf).max())


def fed_by(cols: Sequence[tuple[int, Op]], pos: int) -> str:
    """``"op #i (text)"``: the op that fed position ``pos`` of a sequence whose ops are ``cols``."""
    if not cols:
        return "no op"
    i, op = cols[min(max(pos, 0), len(cols) - 1)]
    return f"op #{i} ({op.text})"


def check_rows(target: str, tag: str, s: Stream, got: np.ndarray, want: np.ndarray, positions: Sequence[int],
               cols: Sequence[tuple[int, Op]], atol: float, rtol: float) -> None:
    """Raise :class:`Mismatch` (charged to the stream's last op) at the first row of ``got`` that is off
    ``want``; row ``j`` holds the logits of position ``positions[j]``, fed by ``cols[position]``."""
    bad = first_bad(got, want, atol, rtol)
    if bad is None:
        return
    j, worst = bad
    pos = positions[j] if j < len(positions) else -1
    what = f"shape {np.shape(got)} != reference {np.shape(want)}" if np.shape(got) != np.shape(want) else \
        f"differ from the spec-masked reference by {worst:.3g}"
    i, op = s.last
    raise Mismatch(target, i, op, f"{tag} logits at position {pos} (fed by {fed_by(cols, pos)}, W={s.window}) "
                                  f"{what} (tolerance {atol:g} + {rtol:g}*|ref|)")


def as_outcome(target, error: BaseException) -> BaseException:
    """A path's failure as the outcome :class:`~fuzz.targets.engines.base.EngineTarget` raises (an engine
    call that raised becomes the :class:`~fuzz.targets.base.Crash` it stands for)."""
    from fuzz.targets.base import Crash
    from fuzz.targets.engines.base import EngineCallFailed

    if isinstance(error, EngineCallFailed):
        crash = Crash(target.name, error.index, error.op, f"{target.package} {target.release}: {error}")
        crash.__cause__ = error.error
        return crash
    return error


def pick(target, case: Case, failures: list) -> BaseException:
    """Which of a stream's path failures to raise: every path runs (a known finding on one path must
    not hide a new one on another), and the first failure no known finding of the case explains wins;
    when all are explained, the first."""
    hit = target.known_findings(case)
    explained = set()
    for e in failures:
        fid = target.explained_by(case, e, hit) if hit else None
        if fid is None:
            return e
        explained.add(fid)
    first = failures[0]
    # Every finding some path reproduced (KnownFindingsTarget.run records them all, not just the first's).
    first.known_reproduced = frozenset(explained)
    return first
