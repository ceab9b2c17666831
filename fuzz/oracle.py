"""The oracle's side of a run: the payloads every cache-level target is fed, the spec stream the
target is checked against, and the boundary phases (campaign coverage) each op exercised.

``SpecStream`` feeds the same entries through ``pyspec`` that the target gets, so after
every op it knows ``lastWindow W history`` — what the target must hold.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fuzz.config import DTYPES
from fuzz.ops import Bad, Chunk, Op, Reset
from pyspec.bulk import last_window


# ---------------------------------------------------------------------------
# Payloads: deterministic, distinct per (stream epoch, position), exact in the payload dtype


#: Floats per key and per value in every cache-level target unless ``--width`` says otherwise
#: (small: the check is about which entries a cache holds, and a wider payload only slows the oracle down).
PAYLOAD_WIDTH = 4

#: How many distinct payload codes each dtype gets: 2**22 integers for float32; every positive
#: normal float16 (30 exponents x 1024 mantissas) and bfloat16 (254 x 128) bit pattern.
_CODES = {"float32": 1 << 22, "float16": 30 * 1024, "bfloat16": 254 * 128}

#: Epochs per live instance: instance ``k``'s streams are epochs ``k * INSTANCE_EPOCHS``, ``+ 1`` after each of
#: its resets, so no two instances of a case (or two streams of one) ever push the same payload at a position.
INSTANCE_EPOCHS = 1 << 10

#: The epoch whose payloads bad calls carry (``bad:gap`` ...): no stream ever reaches it, so an
#: entry a cache wrongly kept from a refused call is visible as a payload of no real stream.
BAD_EPOCH = -7


def check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return dtype


def payloads(epoch: int, positions: Any, width: int, dtype: str = "float32") -> tuple[np.ndarray, np.ndarray]:
    """``float32[n, width]`` keys and values pushed for ``positions`` in stream ``epoch``.

    The rule: a payload code ``c = (131 * pos + 1_000_003 * epoch + 7 * j) mod M`` per float ``j``,
    turned into a value that ``dtype`` holds exactly —

    * ``float32``: the integer ``c`` (``M = 2**22``; integers below ``2**24`` are exact);
    * ``float16``: the positive normal float16 with bit pattern ``0x0400 + c`` (``M = 30720``);
    * ``bfloat16``: the positive normal bfloat16 with bit pattern ``0x0080 + c`` (``M = 32512``),

    and values are the keys negated (``-c - 1`` for float32). So every implementation that
    stores ``dtype`` round-trips them bit for bit and comparison stays exact. 131 and
    1_000_003 are prime to every ``M``: within a stream any two positions less than ``M``
    apart get different payloads (every window the campaign draws), and the same position in
    another epoch gets another one, so a stale entry left over from before a reset is
    distinguishable from a fresh one. The arrays are always float32 (the C ABI's type; numpy
    has no bfloat16); the values are the dtype's. One vectorized call per op keeps the oracle
    off the fuzz loop's profile at large W.
    """
    pos = np.asarray(positions, dtype=np.int64).reshape(-1, 1)
    j = np.arange(width, dtype=np.int64)[None, :]
    mix = pos * 131 + (epoch * 1_000_003 + j * 7)
    if dtype == "float32":
        keys = (mix & (_CODES["float32"] - 1)).astype(np.float32)  # == % 2**22: every code >= 0
        return keys, np.negative(keys) - np.float32(1)
    if dtype == "float16":
        bits = (0x0400 + mix % _CODES["float16"]).astype(np.uint16)
        keys = bits.view(np.float16).astype(np.float32)
    elif dtype == "bfloat16":
        keys = ((0x0080 + mix % _CODES["bfloat16"]) << 16).astype(np.uint32).view(np.float32)
    else:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return keys, np.negative(keys)


def payload(epoch: int, pos: int, width: int, dtype: str = "float32") -> tuple[np.ndarray, np.ndarray]:
    """The key and value of one position: row 0 of :func:`payloads`."""
    keys, values = payloads(epoch, [pos], width, dtype)
    return keys[0], values[0]


#: Payload tables of the first epochs of a case (most streams are one of these), shared by every
#: case: ``(epoch, width, dtype) -> (positions, keys, values)`` for positions ``0 .. len-1``, read-only.
_TABLES: dict[tuple[int, int, str], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
_TABLE_EPOCHS = 64
_TABLE_ROWS = 1 << 16


def history_table(epoch: int, width: int, rows: int,
                  dtype: str = "float32") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions ``0 .. rows-1`` (at least) of stream ``epoch`` and their payloads, read-only (a cache
    that writes into what it was pushed fails loudly instead of corrupting the oracle)."""
    table = _TABLES.get((epoch, width, dtype))
    if table is not None and table[0].shape[0] >= rows:
        return table
    have = 0 if table is None else table[0].shape[0]
    pos = np.arange(max(rows, 2 * have, 64), dtype=np.int64)
    keys, values = payloads(epoch, pos, width, dtype)
    table = (pos, keys, values)
    for a in table:
        a.flags.writeable = False
    if 0 <= epoch % INSTANCE_EPOCHS < _TABLE_EPOCHS and epoch < 4 * INSTANCE_EPOCHS and pos.shape[0] <= _TABLE_ROWS:
        _TABLES[(epoch, width, dtype)] = table
    return table


# ---------------------------------------------------------------------------
# Readable differences at any window


#: Entries shown either side of the first difference (a mismatch at W = 4096 prints a dozen numbers, not 8 192).
AROUND = 3
#: Lists this short are shown whole.
WHOLE = 12


def describe_difference(got: Sequence[Any], want: Sequence[Any], what: str = "positions",
                        spec: str = "spec lastWindow") -> str:
    """One line saying how ``got`` differs from ``want`` at any size: the first differing index, the entries
    around it (got vs spec, :data:`AROUND` either side, the differing one in ``<>``), how many indices differ
    and both lengths — never the whole list past :data:`WHOLE` entries. The words say whether the lengths
    agree ("length N each" / "length got N, spec M"), so a cache that keeps one too many and one that keeps
    the wrong ones read differently (and get different signatures, :func:`fuzz.results.message_shape`)."""
    got, want = list(got), list(want)
    n = min(len(got), len(want))
    diff = [i for i in range(n) if got[i] != want[i]]
    first = diff[0] if diff else n
    count = len(diff) + abs(len(got) - len(want))
    # No plural that follows a count: the message's shape (fuzz.results.message_shape) must not depend on it.
    sizes = f"length {len(want)} each" if len(got) == len(want) else f"length got {len(got)}, spec {len(want)}"
    whole = len(got) <= WHOLE and len(want) <= WHOLE
    lo, hi = (0, max(len(got), len(want))) if whole else (max(0, first - AROUND), first + AROUND + 1)

    def show(xs: list) -> str:
        cells = [f"<{x}>" if i == first else str(x) for i, x in enumerate(xs[lo:hi], lo)]
        if first >= len(xs) and len(got) != len(want):
            cells.append("<end>")
        return ("[... " if lo else "[") + ", ".join(cells) + (" ...]" if hi < len(xs) else "]")

    tail = "" if len(got) == len(want) else f"; last got {got[-1:]}, spec {want[-1:]}"
    return (f"{what} differ from {spec} at index {first}: {count} differ, {sizes}; "
            f"got {show(got)}, spec {show(want)}{tail}")


def _rows_differ(g: np.ndarray, w: np.ndarray, n: int) -> np.ndarray:
    """Which of ``n`` rows differ: bit for bit when the dtypes agree (as :func:`_same`), by value across them."""
    if g.dtype == w.dtype:
        gb = np.ascontiguousarray(g).reshape(n, -1).view(np.uint8)
        wb = np.ascontiguousarray(w).reshape(n, -1).view(np.uint8)
        return ~(gb == wb).all(axis=1)
    return ~(g == w).reshape(n, -1).all(axis=1)


def payload_difference(positions: np.ndarray, pairs: tuple) -> str:
    """The first row whose key or value differs (``pairs``: ``(label, got, want)`` arrays of rows), its first
    floats, and how many rows differ: readable at any window and payload width."""
    for label, g, w in pairs:
        if g.shape != w.shape:
            return f"{label}s have shape {tuple(g.shape)}, spec {tuple(w.shape)}"
    n = len(positions)
    bad = {label: _rows_differ(g, w, n) for label, g, w in pairs}
    rows = np.flatnonzero(np.logical_or.reduce(list(bad.values())))
    if not rows.size:
        raise AssertionError("unreachable: the payload arrays differ but no row does")
    i = int(rows[0])
    label, g, w = next((lb, g, w) for lb, g, w in pairs if bad[lb][i])
    return (f"{label} of position {int(positions[i])} (index {i}): got {g[i][:4].tolist()}..., want "
            f"{w[i][:4].tolist()}... ({rows.size} of {len(positions)} rows differ)")


# ---------------------------------------------------------------------------
# Phases: which boundaries a run exercised (campaign coverage)

PHASES = (
    "not-yet-full",
    "exactly-full",
    "first-eviction",
    "steady-state",
    "chunk>W",
    "after-reset",
)


def phases_of(op: Op, n_before: int, n_after: int, window: int, after_reset: bool) -> set[str]:
    """The boundary phases one op exercised, from stream lengths before and after it."""
    out: set[str] = set()
    if 0 < n_after < window:
        out.add("not-yet-full")
    if n_after == window or (n_before < window <= n_after and isinstance(op, Chunk)):
        out.add("exactly-full")
    if n_before <= window < n_after:
        out.add("first-eviction")
    if n_before > window and n_after > n_before:
        out.add("steady-state")
    if isinstance(op, Chunk) and op.n > window:
        out.add("chunk>W")
    if after_reset and n_after > n_before:
        out.add("after-reset")
    return out


class SpecStream:
    """The oracle's view of one run: the stream's history as arrays, and ``lastWindow W`` of it.

    ``history()`` is positions ``int64[n]`` and keys / values ``float32[n, width]`` of every
    token pushed since the last reset; the cache must hold ``expected()`` =
    ``pyspec.bulk.last_window(W, history)`` — by Lean ``run_correct`` and ``pushChunk_correct``
    exactly what stepping ``pyspec.step`` over the history gives. Payloads are a pure function
    of ``(epoch, pos)``, so rows are computed ahead in blocks shared by every case
    (:func:`history_table`) and every op's entries and expectation are slices of the same
    arrays: no per-op allocation. Live instance ``k`` of a case has its own stream, whose epochs
    start at ``k * INSTANCE_EPOCHS``: a payload one instance finds from another is visible.
    """

    __slots__ = ("window", "width", "dtype", "epoch", "n", "after_reset", "_pos", "_keys", "_values", "_filled")

    def __init__(self, window: int, width: int = PAYLOAD_WIDTH, dtype: str = "float32", instance: int = 0):
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an int >= 1, got {window!r}")
        self.window, self.width, self.dtype = window, width, check_dtype(dtype)
        self.epoch, self.n, self.after_reset = instance * INSTANCE_EPOCHS, 0, False
        self._fill(16)

    def _fill(self, capacity: int) -> None:
        """This epoch's positions and payloads ``0 .. capacity-1`` (at least)."""
        self._pos, self._keys, self._values = history_table(self.epoch, self.width, capacity, self.dtype)
        self._filled = self.epoch

    def reserve(self, tokens: int) -> None:
        """Make room for ``tokens`` more tokens in this stream (optional: the stream grows on demand)."""
        need, have = self.n + tokens, self._pos.shape[0]
        if self._filled != self.epoch:
            self._fill(max(need, 16))
        elif need > have:
            self._fill(max(need, 2 * have))

    def new_entries(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The next ``k`` entries (not yet applied): positions ``int64[k]``, keys and values ``float32[k, width]``."""
        self.reserve(k)
        a, b = self.n, self.n + k
        return self._pos[a:b], self._keys[a:b], self._values[a:b]

    def next_entry(self) -> tuple[int, np.ndarray, np.ndarray]:
        """The next entry (not yet applied): its position, key ``float32[width]`` and value."""
        self.reserve(1)
        n = self.n
        return n, self._keys[n], self._values[n]

    def apply(self, op: Op) -> set[str]:
        """Advance the oracle by ``op``; returns the phases it exercised (a bad call: none, and
        the stream is as before)."""
        before = self.n
        if type(op) is Bad:
            return set()
        if isinstance(op, Reset):
            self.after_reset = self.n > 0 or self.after_reset
            self.window, self.epoch, self.n = op.window, self.epoch + 1, 0
            return set()
        self.reserve(op.tokens)
        self.n += op.tokens
        return phases_of(op, before, self.n, self.window, self.after_reset)

    def history(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every entry pushed since the last reset: positions, keys, values (views)."""
        n = self.n
        return self._pos[:n], self._keys[:n], self._values[:n]

    def expected(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``lastWindow W history`` as positions, keys, values in logical order (views): the rows
        ``pyspec.bulk.last_window`` keeps of the positions, and the same rows of the payloads."""
        n = self.n
        pos = last_window(self.window, self._pos[:n])
        a = n - pos.shape[0]
        return pos, self._keys[a:n], self._values[a:n]

    def bad_entries(self, positions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Entries for a bad call at ``positions`` (int64), with :data:`BAD_EPOCH`'s payloads."""
        pos = np.asarray(positions, dtype=np.int64)
        keys, values = payloads(BAD_EPOCH, pos, self.width, self.dtype)
        return pos, keys, values

    def positions(self) -> list[int]:
        """The positions the cache must hold, oldest first."""
        return last_window(self.window, self._pos[:self.n]).tolist()
