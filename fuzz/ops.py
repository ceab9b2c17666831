"""The op language every target is driven with, and the spec stream it is checked against.

A test case is a window ``W`` plus a list of ops:

* ``Push()`` — one new token at the next position;
* ``Chunk(n)`` — a prefill chunk of ``n`` tokens (``n`` may be 0 or exceed ``W``);
* ``Reset(w)`` — start a new stream with window ``w`` (positions restart at 0).

The same ops drive a bare cache (push/push_chunk/reset), the Torch decoder
(decode one token / prefill a chunk / new cache) and third-party caches, so a
seed found on one implementation replays on all of them. ``SpecStream`` is
the oracle side: it feeds the same entries through ``pyspec.step``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence, Union

import numpy as np

import pyspec


# ``tokens``: how many tokens the op feeds (every target, strategy and finding counts with it).


@dataclass(frozen=True)
class Push:
    tokens = 1

    def to_json(self) -> list:
        return ["push"]


@dataclass(frozen=True)
class Chunk:
    n: int

    @property
    def tokens(self) -> int:
        return self.n

    def to_json(self) -> list:
        return ["chunk", self.n]


@dataclass(frozen=True)
class Reset:
    window: int
    tokens = 0

    def to_json(self) -> list:
        return ["reset", self.window]


Op = Union[Push, Chunk, Reset]


class OpError(ValueError):
    """An op list that cannot be parsed; the message names the op and its index."""


def op_from_json(raw: Any, index: int = 0) -> Op:
    """Parse ``["push"]``, ``["chunk", n]`` or ``["reset", w]``."""
    if not isinstance(raw, list) or not raw or not isinstance(raw[0], str):
        raise OpError(f"op #{index}: expected [\"push\"], [\"chunk\", n] or [\"reset\", w], got {raw!r}")
    kind, args = raw[0], raw[1:]
    nat = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0  # noqa: E731
    if kind == "push" and not args:
        return Push()
    if kind == "chunk" and len(args) == 1 and nat(args[0]):
        return Chunk(args[0])
    if kind == "reset" and len(args) == 1 and nat(args[0]) and args[0] >= 1:
        return Reset(args[0])
    raise OpError(f"op #{index}: malformed {raw!r} (chunk takes n >= 0, reset takes a window >= 1)")


def streams(window: int, ops: Sequence[Op]) -> list[tuple[int, list[tuple[int, Op]]]]:
    """The case split at its resets: ``[(window, [(op index, op), ...]), ...]``, one entry per
    stream (the first runs before any reset); the resets themselves are not listed."""
    out: list[tuple[int, list[tuple[int, Op]]]] = [(window, [])]
    for i, op in enumerate(ops):
        if isinstance(op, Reset):
            out.append((op.window, []))
        else:
            out[-1][1].append((i, op))
    return out


def ops_from_json(raw: Any) -> list[Op]:
    if not isinstance(raw, list):
        raise OpError(f"ops must be a list, got {type(raw).__name__}")
    return [op_from_json(r, i) for i, r in enumerate(raw)]


def ops_to_json(ops: Iterable[Op]) -> list[list]:
    return [op.to_json() for op in ops]


def format_ops(ops: Sequence[Op]) -> str:
    """Compact text form, e.g. ``push chunk:5 reset:3`` (what ``seeds add --ops`` reads)."""
    parts = []
    for op in ops:
        if isinstance(op, Push):
            parts.append("push")
        elif isinstance(op, Chunk):
            parts.append(f"chunk:{op.n}")
        else:
            parts.append(f"reset:{op.window}")
    return " ".join(parts)


def parse_ops(text: str) -> list[Op]:
    """Inverse of :func:`format_ops`; also accepts commas and JSON."""
    text = text.strip()
    if text.startswith("["):
        import json

        try:
            return ops_from_json(json.loads(text))
        except json.JSONDecodeError as e:
            raise OpError(f"ops: not valid JSON: {e}") from e
    ops: list[Op] = []
    for i, tok in enumerate(text.replace(",", " ").split()):
        name, _, arg = tok.partition(":")
        if name == "push" and not arg:
            ops.append(Push())
        elif name in ("chunk", "reset") and arg.isdigit():
            ops.append(op_from_json([name, int(arg)], i))
        else:
            raise OpError(f"op #{i}: cannot parse {tok!r}; write push, chunk:N or reset:W")
    return ops


# ---------------------------------------------------------------------------
# Payloads: deterministic, distinct per (stream epoch, position), exact in float32


#: Floats per key and per value in every cache-level target (small: the check is about
#: which entries a cache holds, and a wider payload only slows the oracle down).
PAYLOAD_WIDTH = 4


def payloads(epoch: int, positions: Any, width: int) -> tuple[np.ndarray, np.ndarray]:
    """``float32[n, width]`` keys and values pushed for ``positions`` in stream ``epoch``.

    Integers below 2**23 are exact in float32, so every implementation
    round-trips them bit-for-bit; the epoch term makes a stale entry left
    over from before a reset distinguishable from a fresh one at the same position.
    One vectorized call per op keeps the oracle off the fuzz loop's profile at large W.
    """
    pos = np.asarray(positions, dtype=np.int64).reshape(-1, 1)
    j = np.arange(width, dtype=np.int64)[None, :]
    base = (pos * 131 + (epoch * 1_000_003 + j * 7)) & 4_194_303  # == % 2**22: every term >= 0
    keys = base.astype(np.float32)
    return keys, np.negative(keys) - np.float32(1)


def payload(epoch: int, pos: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The key and value of one position: row 0 of :func:`payloads`."""
    keys, values = payloads(epoch, [pos], width)
    return keys[0], values[0]


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


@dataclass
class SpecStream:
    """The oracle's view of one run: the history length and ``pyspec.step`` applied to each entry.

    ``cache`` holds positions only; payloads are a pure function of
    ``(epoch, pos)``, so the expected contents are rebuilt on demand.
    """

    window: int
    width: int = PAYLOAD_WIDTH
    epoch: int = 0
    n: int = 0
    cache: list[int] = field(default_factory=list)
    after_reset: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise ValueError(f"window must be an int >= 1, got {self.window!r}")

    def new_entries(self, k: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """The next ``k`` entries of the stream (not yet applied)."""
        return self._entries(range(self.n, self.n + k))

    def apply(self, op: Op) -> set[str]:
        """Advance the oracle by ``op``; returns the phases it exercised."""
        before = self.n
        if isinstance(op, Reset):
            self.after_reset = self.n > 0 or self.after_reset
            self.window, self.epoch, self.n, self.cache = op.window, self.epoch + 1, 0, []
            return set()
        k = op.tokens
        self.cache = pyspec.push_chunk(self.window, self.cache, range(self.n, self.n + k))
        self.n += k
        return phases_of(op, before, self.n, self.window, self.after_reset)

    def expected(self) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """``lastWindow W history`` as ``(pos, key, value)`` entries in logical order."""
        return self._entries(self.cache)

    def _entries(self, positions) -> list[tuple[int, np.ndarray, np.ndarray]]:
        positions = list(positions)
        keys, values = payloads(self.epoch, positions, self.width)
        return list(zip(positions, keys, values))
