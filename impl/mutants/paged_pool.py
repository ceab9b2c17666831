"""``BlockPool``: a paged sliding-window pool as serving engines write it, in plain Python.

Mutable arrays (``[N, B]`` positions, ``[N, B, D]`` keys and values), reference counts, a free
list taken least-recently-freed first, and a map from a full block's content identity (a chained
hash of the identity tag and every entry up to the block's end, as vLLM and SGLang chain block
hashes) to the cached blocks. It implements the whole paged protocol of DESIGN §4 and
docs/paged.md *including every optional op*: ``fork``, ``admit``, ``rollback`` (speculative
decoding: ``max_rollback`` tokens may be withdrawn, so the freeing rule keeps that much more) and
``append_batch`` (a ragged batch step, all-or-nothing).

It is the base of the ``py-paged`` mutants (:mod:`impl.mutants.catalogue`: one line of this file
replaced), and the only implementation here of ``rollback`` and ``append_batch``, which the C
reference (``csrc/pagedkv.h``) does not have — so the paged checker's paths for them run against
something correct. Nothing here imports the oracle: it is an implementation under test.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any, Iterable

import numpy as np


class PoolExhausted(RuntimeError):
    """The op needs a free block and none is free (nothing changed)."""


class UnknownSequence(KeyError):
    """No sequence with this id."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown sequence"


class BadOp(ValueError):
    """A duplicate sequence, a position that is not the next one, a bad rollback or a bad payload."""


class _Seq:
    __slots__ = ("n", "hw", "base", "identity", "table", "keys")

    def __init__(self, identity: int = 0):
        self.n = self.hw = self.base = 0
        self.identity = identity
        self.table: list = []
        self.keys: list = []  # content identity of each full block of the history


class BlockPool:
    """The paged protocol over mutable arrays (module docstring)."""

    #: The most tokens one rollback may withdraw from a sequence's high-water mark (docs/paged.md).
    max_rollback = 4
    #: What an append that finds the pool empty raises.
    exhausted_error = PoolExhausted
    #: ``length(seq)`` is ``n_s``, ``refcount(block)`` the table entries referencing it (checked by the harness).
    paged_queries = ("length", "refcount")

    def __init__(self) -> None:
        self.cfg = None

    # -- configuration and plumbing ---------------------------------------
    def configure(self, window: int, block_size: int, num_blocks: int, width: int) -> None:
        for name, v in (("window", window), ("block_size", block_size), ("num_blocks", num_blocks),
                        ("width", width)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise BadOp(f"{name} must be an int >= 1, got {v!r}")
        self.cfg = (window, block_size, num_blocks, width)
        self.pos = np.full((num_blocks, block_size), -1, dtype=np.int64)
        self.k = np.zeros((num_blocks, block_size, width), dtype=np.float32)
        self.v = np.zeros((num_blocks, block_size, width), dtype=np.float32)
        self.ref = [0] * num_blocks
        self.free_list = list(range(num_blocks))
        self.cached: dict[int, bytes] = {}  # block -> content identity
        self.seqs: dict[int, _Seq] = {}

    def _get(self, seq: Any) -> _Seq:
        if self.cfg is None:
            raise BadOp("call configure(window, block_size, num_blocks, width) first")
        if seq not in self.seqs:
            raise UnknownSequence(f"sequence {seq!r} does not exist")
        return self.seqs[seq]

    def _new(self, seq: Any) -> None:
        if self.cfg is None:
            raise BadOp("call configure(window, block_size, num_blocks, width) first")
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise BadOp(f"sequence ids are ints >= 0, got {seq!r}")
        if seq in self.seqs:
            raise BadOp(f"sequence {seq} already exists")

    def _row(self, x: Any, what: str) -> np.ndarray:
        a = np.asarray(x, dtype=np.float32)
        if a.ndim != 1 or a.shape[0] != self.cfg[3]:
            raise BadOp(f"{what} must be a 1-D array of width {self.cfg[3]}, got shape {a.shape}")
        return a

    def _keep_from(self, s: _Seq) -> int:
        """First logical block the rule keeps: every block below it holds only positions before
        ``floor - W + 1``, where ``floor`` is the lowest length a rollback may return to."""
        W, B = self.cfg[0], self.cfg[1]
        floor = max(s.hw - self.max_rollback, s.base)
        return max(0, floor - W + 1) // B

    def _release(self, b: int) -> None:
        self.ref[b] -= 1
        if self.ref[b] == 0:
            self.free_list.append(b)

    def _take(self) -> int:
        if not self.free_list:
            raise PoolExhausted("pool exhausted: every block is in use")
        b = self.free_list.pop(0)
        self.cached.pop(b, None)  # taken for another use: its content identity is evicted
        self.ref[b] = 1
        return b

    def _block_key(self, prev: bytes, identity: int, pos: np.ndarray, k: np.ndarray, v: np.ndarray) -> bytes:
        h = hashlib.sha256(prev)
        h.update(int(identity).to_bytes(8, "little", signed=True))
        h.update(pos.astype(np.int64).tobytes())
        h.update(k.tobytes())
        h.update(v.tobytes())
        return h.digest()

    # -- ops --------------------------------------------------------------------
    def add(self, seq: int) -> None:
        self._new(seq)
        self.seqs[seq] = _Seq()

    def _append(self, s: _Seq, pos: Any, key: Any, value: Any) -> None:
        B = self.cfg[1]
        if isinstance(pos, bool) or not isinstance(pos, (int, np.integer)) or pos != s.n:
            raise BadOp(f"position {pos!r} is not the next position {s.n}")
        key, value = self._row(key, "key"), self._row(value, "value")
        j, i = s.n // B, s.n % B
        if j == len(s.table) or s.table[j] is None:
            b = self._take()
            if j == len(s.table):
                s.table.append(b)
            else:
                s.table[j] = b
        elif self.ref[s.table[j]] > 1:  # copy on write: a shared block is never written
            b = self._take()
            old = s.table[j]
            self.pos[b, :i], self.k[b, :i], self.v[b, :i] = self.pos[old, :i], self.k[old, :i], self.v[old, :i]
            self.ref[old] -= 1
            s.table[j] = b
        else:
            b = s.table[j]
            self.cached.pop(b, None)  # rewritten after a rollback: no longer the content it was cached as
        self.pos[b, i], self.k[b, i], self.v[b, i] = s.n, key, value
        s.n += 1
        s.hw = max(s.hw, s.n)
        if i == B - 1:  # the block is full: it gets the content identity of the prefix
            prev = s.keys[j - 1] if j else b"root"
            key_j = self._block_key(prev, s.identity, self.pos[b], self.k[b], self.v[b])
            del s.keys[j:]
            s.keys.append(key_j)
            self.cached[b] = key_j
        for jj in range(self._keep_from(s)):
            if jj < len(s.table) and s.table[jj] is not None:
                self._release(s.table[jj])
                s.table[jj] = None

    def _atomic(self, run) -> None:
        """Run ``run()``; if it raises, put every piece of state back as it was."""
        saved = (self.pos.copy(), self.k.copy(), self.v.copy(), list(self.ref), list(self.free_list),
                 dict(self.cached), copy.deepcopy(self.seqs))
        try:
            run()
        except BaseException:
            self.pos, self.k, self.v, self.ref, self.free_list, self.cached, self.seqs = saved
            raise

    def append(self, seq: int, pos: int, key: Any, value: Any) -> None:
        # One append validates, then takes its block (which may raise) before it changes anything.
        self._append(self._get(seq), pos, key, value)

    def append_chunk(self, seq: int, entries: Iterable) -> None:
        self._get(seq)
        entries = list(entries)

        def run() -> None:
            s = self.seqs[seq]
            for e in entries:
                self._append(s, *e)

        self._atomic(run)

    def append_batch(self, items: Iterable) -> None:
        """A ragged batch step: ``(seq, pos, key, value)`` each appended at its own sequence's next position,
        all-or-nothing."""
        items = list(items)
        for it in items:
            self._get(it[0])

        def run() -> None:
            for seq, pos, key, value in items:
                self._append(self.seqs[seq], pos, key, value)

        self._atomic(run)

    def rollback(self, seq: int, r: int) -> None:
        """Withdraw the last ``r`` tokens: reads are then ``lastWindow (W-1)`` of the shortened history."""
        s = self._get(seq)
        B = self.cfg[1]
        if isinstance(r, bool) or not isinstance(r, int) or r < 0 or r > s.n:
            raise BadOp(f"rollback of {r!r} tokens from a sequence of {s.n}")
        floor = max(s.hw - self.max_rollback, s.base)
        if s.n - r < floor:
            raise BadOp(f"rollback to {s.n - r} passes below {floor} (high-water mark {s.hw}, max_rollback "
                        f"{self.max_rollback})")
        s.n -= r
        keep = -(-s.n // B)
        for b in s.table[keep:]:
            if b is not None:
                self._release(b)
        del s.table[keep:]
        del s.keys[s.n // B:]

    def fork(self, src: int, dst: int) -> None:
        a = self._get(src)
        self._new(dst)
        d = _Seq(a.identity)
        d.n, d.hw, d.base, d.table, d.keys = a.n, a.hw, a.base, list(a.table), list(a.keys)
        for b in d.table:
            if b is not None:
                self.ref[b] += 1
        self.seqs[dst] = d

    def free(self, seq: int) -> None:
        s = self._get(seq)
        for b in s.table:
            if b is not None:
                self._release(b)
        del self.seqs[seq]

    def admit(self, seq: int, entries: Iterable, identity: int = 0) -> int:
        self._new(seq)
        W, B = self.cfg[0], self.cfg[1]
        entries = list(entries)
        if not entries:
            raise BadOp("admit needs a prompt of at least one entry")
        for i, e in enumerate(entries):
            if e[0] != i:
                raise BadOp(f"prompt entry {i} has position {e[0]}")
        keys, prev = [], b"root"
        for j in range((len(entries) - 1) // B):
            blk = entries[j * B:(j + 1) * B]
            prev = self._block_key(prev, identity, np.array([e[0] for e in blk]),
                                   np.stack([self._row(e[1], "key") for e in blk]),
                                   np.stack([self._row(e[2], "value") for e in blk]))
            keys.append(prev)
        by_key: dict[bytes, int] = {}
        for b, kb in sorted(self.cached.items()):
            by_key.setdefault(kb, b)
        for L in range(len(keys) * B, -1, -B):
            first = max(0, L - W + 1) // B
            found = [by_key.get(keys[j]) for j in range(first, L // B)]
            if None not in found:
                break
        s = _Seq(identity)
        s.n = s.hw = s.base = L
        s.table = [None] * first + found
        s.keys = keys[:L // B]
        for b in found:
            if self.ref[b] == 0:
                self.free_list.remove(b)
            self.ref[b] += 1
        self.seqs[seq] = s
        return L

    # -- queries ------------------------------------------------------------------
    def read(self, seq: int) -> list:
        s = self._get(seq)
        W, B = self.cfg[0], self.cfg[1]
        out = []
        for q in range(max(0, s.n - W + 1), s.n):
            b = s.table[q // B]
            out.append((int(self.pos[b, q % B]), self.k[b, q % B].copy(), self.v[b, q % B].copy()))
        return out

    def table(self, seq: int) -> list:
        return list(self._get(seq).table)

    def free_blocks(self) -> int:
        return len(self.free_list)

    def refcount(self, block: int) -> int:
        return self.ref[block]

    def length(self, seq: int) -> int:
        return self._get(seq).n
