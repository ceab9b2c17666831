"""What every serving-engine adapter shares: the simulated KV store, token ids, argument checks.

The engines manage block *ids*, not tensors (their kernels write the tensors). So each adapter
keeps :class:`SimStore`, a ``[blocks][block_size]`` array of ``(pos, key[D], value[D])`` indexed by
the physical ids the engine hands out, writes each appended entry where the engine's slot mapping
puts it, and reads a sequence by gathering through the engine's own block table: a block the engine
freed, shared or reused too early shows up as a wrong read, exactly as it would on a GPU.

Errors are the C reference's typed exceptions (:mod:`impl.paged`, each with the ``pagedkv_status``
``code``), so a checker compares an adapter's failures with :class:`impl.paged.PagedC`'s by code.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable

import numpy as np

from impl.paged import (E_CONFIG, E_DUPLICATE_SEQ, E_NULL, E_POSITION, E_RANGE, E_UNKNOWN_SEQ, ConfigError,
                        DuplicateSequenceError, NullHandleError, PagedKVError, PoolExhaustedError, PositionError,
                        RangeError, UnknownSequenceError, WidthError)

__all__ = ["SimStore", "Unsupported", "TokenIds", "TOKEN_ID_BITS", "check_config", "as_entries", "PoolExhaustedError",
           "PagedKVError", "SeqRegistry"]

INT64_MAX = 2**63 - 1


class Unsupported(PagedKVError, NotImplementedError):
    """The engine has no such operation (the message names it and the adapter's ``ops``)."""

    def __init__(self, adapter: str, op: str, why: str):
        super().__init__(f"{adapter} does not support {op}: {why}", E_NULL, op)
        self.op = op


def _int(name: str, v: Any) -> int:
    if type(v) is int and -INT64_MAX - 1 <= v <= INT64_MAX:
        return v
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {v!r}")
    v = int(v)
    if not -INT64_MAX - 1 <= v <= INT64_MAX:
        raise RangeError(f"{name} {v} does not fit in int64", E_RANGE, "-")
    return v


def check_config(window: Any, block_size: Any, num_blocks: Any, width: Any) -> tuple[int, int, int, int]:
    args = tuple(_int(n, v) for n, v in (("window", window), ("block_size", block_size),
                                           ("num_blocks", num_blocks), ("width", width)))
    for n, v in zip(("window", "block_size", "num_blocks", "width"), args):
        if v < 1:
            raise ConfigError(f"configure: {n} {v} < 1 (window, block_size, num_blocks and width are >= 1)",
                              E_CONFIG, "configure")
    return args


_F32 = np.dtype(np.float32)


def _vec(name: str, x: Any, width: int) -> np.ndarray:
    if type(x) is np.ndarray and x.dtype == _F32 and x.shape == (width,):
        return x  # read only (hashed, copied into the store): no copy needed
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    a = np.ascontiguousarray(x, dtype=np.float32)
    if a.ndim != 1 or a.shape[0] != width:
        raise WidthError(f"{name} has shape {a.shape}, the pool's width is {width}", E_CONFIG, "-")
    return a


def as_entries(entries: Iterable, first: int, width: int, what: str) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """``entries`` as ``(pos, key f32[D], value f32[D])``; positions must be ``first, first+1, ...``."""
    out = []
    for i, e in enumerate(entries):
        p = _int(f"position of entry {i}", e[0])
        if p != first + i:
            raise PositionError(f"{what}: entry {i} has position {p}, expected {first + i} (the next position)",
                                E_POSITION, what)
        out.append((p, _vec(f"key of entry {i}", e[1], width), _vec(f"value of entry {i}", e[2], width)))
    return out


#: Token ids fit this many bits: vLLM 0.34.0 keeps a ``Request``'s token ids in ``vllm/v1/token_buffer.py``'s
#: ``TokenBuffer``, an ``array("i")`` (int32; a non-negative id has 31 bits), and every release is driven alike.
TOKEN_ID_BITS = 31


class TokenIds:
    """The token ids an engine sees for entries: payloads interned in the order a pool first sees them.

    Prefix caches key blocks by token ids, so the ids must be equal exactly when the payloads are:
    equal ``(key, value)`` bits (``-0.0`` is not ``0.0``, as the reference's content identity compares)
    get the same id, different ones never do. A digest cannot promise that in 31 bits (a 31-bit digest
    collides after some 50,000 distinct payloads: a false prefix hit); a table can: the ``i``-th
    distinct payload gets id ``i``. One table per pool (``configure`` makes a new one, with the
    engine's new block manager, whose hashes are all the ids ever reach), so

    * a seed replay sees the same ids: they follow the order of the case's own ops since ``configure``;
    * a shrunk case is a new case from ``configure``: its ids follow its own ops, and vLLM can observe
      only which payloads are equal (ids enter its block hashes, never its arithmetic);
    * the table holds one entry per distinct payload of one pool (the harness builds a pool per case).

    More than ``2**bits`` distinct payloads in one pool do not fit: :class:`~impl.engines.EngineIncompatible`
    naming the engine's API (a harness fault, never a finding)."""

    def __init__(self, engine: str, release: str, api: str, bits: int = TOKEN_ID_BITS):
        self._ids: dict[bytes, int] = {}
        self._next = itertools.count()  # next() is atomic: two threads never take the same id
        self._where = (engine, release, api)
        self.limit = 1 << bits

    def __call__(self, key: np.ndarray, value: np.ndarray) -> int:
        raw = key.tobytes() + value.tobytes()  # one width per pool: the split point is fixed
        got = self._ids.get(raw)
        if got is None:
            got = next(self._next)
            if got >= self.limit:
                from impl.engines import EngineIncompatible

                raise EngineIncompatible(*self._where, f"takes token ids below 2**{self.limit.bit_length() - 1}, and "
                                         f"this pool has seen {got:,} distinct payloads: one more has no id left")
            got = self._ids.setdefault(raw, got)  # a thread racing on the same payload: the first id stays
        return got

    def __len__(self) -> int:
        return len(self._ids)


class SimStore:
    """``[blocks][block_size]`` slots of ``(pos, key[D], value[D])`` indexed by physical block id.

    ``pos`` is -1 in a slot never written; a read through such a slot returns position -1 and
    zeros, which no correct history contains, so a read through a fresh or foreign block differs."""

    def __init__(self, blocks: int, block_size: int, width: int):
        self.B, self.D = block_size, width
        self.pos = np.full((blocks, block_size), -1, dtype=np.int64)
        self.keys = np.zeros((blocks, block_size, width), dtype=np.float32)
        self.vals = np.zeros((blocks, block_size, width), dtype=np.float32)
        self.writes_to: dict[int, int] = {}

    def write(self, block: int, pos: int, key: np.ndarray, value: np.ndarray) -> None:
        s = pos % self.B
        self.pos[block, s] = pos
        self.keys[block, s] = key
        self.vals[block, s] = value

    def gather(self, blocks: list[int], lo: int, hi: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Positions ``lo .. hi-1`` read through ``blocks`` (the logical-to-physical table)."""
        B = self.B
        out = []
        for p in range(lo, hi):
            b, s = blocks[p // B] if p // B < len(blocks) else -1, p % B
            if b < 0:
                out.append((-1, np.zeros(self.D, np.float32), np.zeros(self.D, np.float32)))
            else:
                out.append((int(self.pos[b, s]), self.keys[b, s].copy(), self.vals[b, s].copy()))
        return out


class SeqRegistry:
    """The adapter-side record of the live sequence ids and their lengths (checks in the header's order)."""

    def __init__(self):
        self.n: dict[int, int] = {}

    def exists(self, what: str, seq: Any) -> int:
        seq = _int("sequence id", seq)
        if seq < 0:
            raise RangeError(f"{what}: sequence id {seq} is negative", E_RANGE, what)
        if seq not in self.n:
            raise UnknownSequenceError(f"{what}: sequence {seq} does not exist", E_UNKNOWN_SEQ, what)
        return seq

    def absent(self, what: str, seq: Any) -> int:
        seq = _int("sequence id", seq)
        if seq < 0:
            raise RangeError(f"{what}: sequence id {seq} is negative", E_RANGE, what)
        if seq in self.n:
            raise DuplicateSequenceError(f"{what}: sequence {seq} already exists", E_DUPLICATE_SEQ, what)
        return seq


def not_configured(what: str) -> NullHandleError:
    return NullHandleError(f"{what}: no pool yet; call configure(window, block_size, num_blocks, width) first",
                           E_NULL, what)


def exhausted(what: str, seq: int, need: str, free: int, total: int) -> PoolExhaustedError:
    from impl.paged import E_EXHAUSTED

    return PoolExhaustedError(f"{what}: sequence {seq} {need} and the engine refused the allocation "
                              f"({free} of {total} blocks free); nothing changed", E_EXHAUSTED, what)


def check_prompt(what: str, entries: list, width: int) -> list:
    if not entries:
        raise RangeError(f"{what}: a prompt needs at least 1 entry", E_RANGE, what)
    return as_entries(entries, 0, width, what)

