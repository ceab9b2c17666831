"""What the paged checker asserts after every op (docs/paged.md "What a checker asserts"), on any cache
that speaks the Python paged protocol — only ``read``, ``table`` and ``free_blocks`` are needed.

A cache whose ``paged_queries`` lists ``length`` (its ``n_s``) or ``refcount`` (table entries per block) has those
checked too. Correctness (a failure is a :class:`~fuzz.targets.base.Mismatch`):

* **reads** — every live sequence's ``read`` equals ``lastWindow (W-1)`` of its own history, so no op on
  one sequence changes what another reads (``paged_read_window``, ``paged_independent``);
* **tables** — ``ceil(n/B)`` entries, each a block ``0 .. N-1`` or ``None``; every block holding a
  position the next query needs is present, and for a cache with rollback every block a rollback may
  need again (freed only by the rule: ``paged_free_safe``); no table names one block twice;
* **sharing** — two tables share a block only at the same logical block, with the same identity, and
  only while both histories agree on every position of it the two have written; a block an op just
  wrote into is referenced by no other table entry (copy on write);
* **counts** — ``free_blocks() == N -`` the blocks the tables reference (and, where ``paged_queries``
  lists ``held_elsewhere``, the blocks it returns: tables of another attention group in the same pool,
  disjoint from these), and ``refcount(b)`` is the number of references (``paged_refcount``);
* an op that raised changed nothing (:meth:`Checker.unchanged`).

Efficiency (:data:`EFFICIENCY`, reported, never failed, except past the bound): blocks a sequence holds
that the rule would have freed (``blocks_beyond_rule``); a sequence holding more than
``ceil((W-1)/B) + 1`` blocks (``ceil((W+R-1)/B) + 1`` with rollback) is an :class:`OverBound` finding.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from fuzz.oracle import describe_difference, payload_difference
from fuzz.paged.oracle import PagedSpec, common_prefix
from fuzz.targets.base import Mismatch

#: The efficiency counters a paged run reports (:attr:`fuzz.targets.base.RunStats.efficiency`).
EFFICIENCY = ("blocks_beyond_rule", "hits_missed", "exhausted_early")


F32, I64 = np.dtype(np.float32), np.dtype(np.int64)


class OverBound(Mismatch):
    """A sequence holds more blocks than the rule ever lets it (an efficiency finding: saved, exit 1)."""

    efficiency = True


class Unreadable(ValueError):
    """``read`` returned something that is not a list of ``(pos, key, value)``."""


def tuple_reader(obj: Any, width: int) -> Callable[[int], tuple]:
    """``read(seq)`` of the tuple protocol as positions ``int64[m]`` and keys/values ``[m, width]`` arrays."""

    def read(seq: int) -> tuple:
        got = obj.read(seq)
        try:
            entries = list(got)
            pos = np.array([int(e[0]) for e in entries], dtype=np.int64)
            rows = []
            for idx in (1, 2):
                out = np.empty((len(entries), width), dtype=np.float32)
                for i, e in enumerate(entries):
                    x = e[idx]
                    if hasattr(x, "detach"):
                        x = x.detach().cpu().numpy()
                    a = np.asarray(x)
                    if a.shape != (width,):
                        raise Unreadable(f"entry {i} of read({seq}) has a {'key' if idx == 1 else 'value'} of shape "
                                         f"{a.shape}, the pool's width is {width}")
                    if a.dtype != np.float32 and not np.array_equal(a.astype(np.float32), a):
                        raise Unreadable(f"entry {i} of read({seq}) is not the float32 payload appended")
                    out[i] = a
                rows.append(out)
        except Unreadable:
            raise
        except (TypeError, ValueError, IndexError) as e:
            raise Unreadable(f"read({seq}) returned {type(got).__name__}, not a list of (pos, key, value): {e}") \
                from None
        return pos, rows[0], rows[1]

    return read


def table_reader(obj: Any, width: int) -> Callable[[int], np.ndarray]:
    """``table(seq)`` as an ``int64`` array, ``-1`` for none (a cache's own ``table_array`` when it has one)."""
    fast = getattr(obj, "table_array", None)
    if callable(fast):
        return fast

    def table(seq: int) -> np.ndarray:
        tbl = obj.table(seq)
        try:
            tbl = list(tbl)
        except TypeError:
            raise Unreadable(f"table(s{seq}) returned {type(tbl).__name__}, not a list of block ids") from None
        out = np.empty(len(tbl), dtype=np.int64)
        for j, b in enumerate(tbl):
            if b is None:
                out[j] = -1
            elif isinstance(b, (int, np.integer)) and not isinstance(b, bool) and b >= 0:
                out[j] = b
            else:
                raise Unreadable(f"table(s{seq})[{j}] = {b!r} is neither a block id (an int >= 0) nor None")
        return out

    return table


class Checker:
    """Audits one cache ``obj`` against ``spec`` after every op; remembers what it observed last (the
    tables as ``int64`` arrays, ``-1`` for none; the references per block; the free count), which is
    also what an op that raised must have left unchanged. Tables are audited as arrays (a long
    sequence's table is mostly none: no per-entry Python)."""

    def __init__(self, name: str, obj: Any, spec: PagedSpec, crash: Callable, *, has_arrays: bool):
        self.name, self.obj, self.spec, self.crash = name, obj, spec, crash
        self.read = obj.read_arrays if has_arrays else tuple_reader(obj, spec.D)
        self.table = table_reader(obj, spec.D)
        #: A cache's byte-level fast paths (``table_blob``, ``read_blob``: :class:`fuzz.paged.fastc.CheckedPagedC`).
        self.tblob = getattr(obj, "table_blob", None) if callable(getattr(obj, "table_blob", None)) else None
        self.rblob = getattr(obj, "read_blob", None) if has_arrays and callable(getattr(obj, "read_blob", None)) \
            else None
        # length(seq) and refcount(block) are not in the protocol: checked where the class says they mean n_s and
        # the number of table entries referencing the block (``paged_queries``), never guessed from a name.
        extras = getattr(obj, "paged_queries", ())
        self.length = obj.length if "length" in extras and callable(getattr(obj, "length", None)) else None
        self.refcount = obj.refcount if "refcount" in extras and callable(getattr(obj, "refcount", None)) else None
        # held_elsewhere(): the pool blocks held by tables this protocol does not read (a hybrid model's
        # full-attention group sharing the pool with the sliding one); they are neither free nor in a table.
        self.elsewhere = obj.held_elsewhere if "held_elsewhere" in extras and \
            callable(getattr(obj, "held_elsewhere", None)) else None
        self.tables: dict[int, np.ndarray] = {}
        #: Block -> how many table entries reference it (absent: none), as last observed.
        self.counts: dict[int, int] = {}
        #: Per live sequence: its table's bytes and the ``(logical block, block)`` pairs it holds, as last audited.
        self.tbytes: dict[int, bytes] = {}
        self.held: dict[int, list] = {}
        self.free = spec.N
        self.efficiency = dict.fromkeys(EFFICIENCY, 0)
        #: A sequence past the block bound seen by the audit in progress (raised once the rest passed).
        self.over: Optional[str] = None
        #: The first op index at which each efficiency observation was made.
        self.first: dict[str, int] = {}

    def note(self, kind: str, i: int) -> None:
        self.efficiency[kind] += 1
        self.first.setdefault(kind, i)

    def fail(self, i: int, op: Any, detail: str, cls: type = Mismatch) -> None:
        raise cls(self.name, i, op, detail)

    # -- calls into the cache ------------------------------------------------
    def _call(self, i: int, op: Any, fn: Callable, *args: Any) -> Any:
        try:
            return fn(*args)
        except Unreadable as e:
            raise Mismatch(self.name, i, op, str(e)) from None
        except Exception as e:  # noqa: BLE001 - the cache raised on a spec-valid call
            raise self.crash(i, op, e) from e

    # -- the audits --------------------------------------------------------------
    def check(self, i: int, op: Any, touched: tuple = (), wrote: tuple = ()) -> None:
        """Every audit after op ``i``; ``touched`` the sequences it changed (their lengths and the refcounts of
        their blocks are read), ``wrote`` ``(seq, first position, end)`` of the entries it appended.

        Every live table and every live read is fetched after every op. A table whose bytes are those it had
        after the last op, of a sequence the op did not touch (so its history is unchanged too), passed every
        audit then and is not audited again; a read is compared with the expected one's bytes first (the
        difference is looked for only once there is one)."""
        spec = self.spec
        N = spec.N
        tables, held, seen = {}, {}, self.tbytes
        self.over = None
        new_bytes = {}
        table, read, tblob, rblob = self.table, self.read, self.tblob, self.rblob
        try:
            for s, q in spec.seqs.items():
                tb = tblob(s) if tblob is not None and s not in touched else None
                if tb is not None and seen.get(s) == tb:
                    tables[s], held[s] = self.tables[s], self.held[s]
                else:
                    tbl = table(s)
                    tb = tbl.tobytes()
                    if s not in touched and seen.get(s) == tb:
                        tables[s], held[s] = self.tables[s], self.held[s]
                    else:
                        tables[s], held[s] = tbl.copy(), self._audit(i, op, s, q, tbl)
                new_bytes[s] = tb
                want = q.want
                if want is None:
                    want = spec.expected_bytes(s)
                if rblob is not None and rblob(s) == want[4]:
                    continue
                gp, gk, gv = read(s)
                if gk.dtype is F32 and gv.dtype is F32 and gp.dtype is I64 and gp.tobytes() == want[1] \
                        and gk.tobytes() == want[2] and gv.tobytes() == want[3]:
                    continue
                diff = compare((gp, gk, gv), want[0])
                if diff is not None:
                    self.fail(i, op, f"read(s{s}): {diff}")
        except Mismatch:
            raise
        except Unreadable as e:
            raise Mismatch(self.name, i, op, str(e)) from None
        except Exception as e:  # noqa: BLE001 - the cache raised on a spec-valid table or read
            raise self.crash(i, op, e) from e
        counts: dict[int, int] = {}
        for hl in held.values():
            for _, b in hl:
                counts[b] = counts.get(b, 0) + 1
        if counts and max(counts.values()) > 1:
            self._sharing(i, op, counts, held, touched, wrote)
        free = self._call(i, op, self.obj.free_blocks)
        other = set(self._call(i, op, self.elsewhere)) if self.elsewhere is not None else set()
        if other & counts.keys():
            self.fail(i, op, f"blocks {sorted(other & counts.keys())[:8]} are in a sliding table and held by another "
                             "group too (held_elsewhere)")
        if free != N - len(counts) - len(other):
            more = f" and {len(other)} are held elsewhere" if other else ""
            self.fail(i, op, f"free_blocks() = {free!r}, but the tables reference {len(counts)} of the {N} blocks"
                             f"{more} (so {N - len(counts) - len(other)} are free)")
        if touched:
            refcount, length = self.refcount, self.length
            try:
                if refcount is not None:
                    blocks = set()
                    for t in touched:
                        for hl in (self.held.get(t, ()), held.get(t, ())):
                            for _, b in hl:
                                blocks.add(b)
                    for b in blocks:
                        rc = refcount(b)
                        if rc != counts.get(b, 0):
                            self.fail(i, op, f"refcount({b}) = {rc!r}, but {counts.get(b, 0)} table entries "
                                             f"reference it ({self._users(b, held)})")
                if length is not None:
                    for t in touched:
                        if t in spec.seqs:
                            n = length(t)
                            if n != spec.seqs[t].n:
                                self.fail(i, op, f"length(s{t}) = {n!r}, the spec's is {spec.seqs[t].n}")
            except Mismatch:
                raise
            except Exception as e:  # noqa: BLE001 - the cache raised on a spec-valid query
                raise self.crash(i, op, e) from e
        self.tables, self.held, self.counts, self.free, self.tbytes = tables, held, counts, free, new_bytes
        if self.over is not None:  # every correctness audit passed: the blocks past the bound are the finding
            self.fail(i, op, self.over, OverBound)

    def _audit(self, i: int, op: Any, s: int, q: Any, tbl: np.ndarray) -> list:
        """One table against the rule; returns the ``(logical block, block)`` pairs it holds."""
        spec = self.spec
        B, N = spec.B, spec.N
        if len(tbl) != -(-q.n // B):
            self.fail(i, op, f"table(s{s}) has {len(tbl)} entries; a sequence of {q.n} tokens has "
                             f"ceil({q.n}/{B}) = {-(-q.n // B)}")
        kf = spec.keep_from(q)
        tail = tbl[kf:].tolist()
        if tail and (min(tail) < 0 or max(tail) >= N):
            j = kf + next(j for j, b in enumerate(tail) if b < 0 or b >= N)
            if tbl[j] >= N:
                self.fail(i, op, f"table(s{s})[{j}] = {int(tbl[j])} is not a block id 0 .. {N - 1}")
            what = f"is kept by the freeing rule (({j}+1)*{B} > n-W+1 = {q.n - spec.W + 1})" \
                if j >= spec.needed_from(q) else \
                f"may be needed again by a rollback to {spec.floor(q)} (max_rollback {spec.R})"
            self.fail(i, op, f"logical block {j} of s{s} (positions {j * B}..{j * B + B - 1}, n = {q.n}) "
                             f"{what}, but its table entry is none: freed before the rule allows")
        held = list(enumerate(tail, kf))
        if kf and (tbl[:kf].max() if kf > 32 else max(tbl[:kf].tolist())) >= 0:
            self.note("blocks_beyond_rule", i)
            extra = [(j, b) for j, b in enumerate(tbl[:kf].tolist()) if b >= 0]
            if max(b for _, b in extra) >= N:
                j, b = max(extra, key=lambda e: e[1])
                self.fail(i, op, f"table(s{s})[{j}] = {b} is not a block id 0 .. {N - 1}")
            held = extra + held
        if len(held) > spec.bound and self.over is None:  # judged after the correctness audits (end of check)
            self.over = (f"s{s} holds {len(held)} blocks, more than the rule ever lets a sequence hold "
                         f"(ceil(({spec.W + spec.R}-1)/{B}) + 1 = {spec.bound}): table {_tb(tbl)}")
        if len(held) > 1 and len({b for _, b in held}) != len(held):
            b = next(b for _, b in held if sum(1 for _, c in held if c == b) > 1)
            self.fail(i, op, f"table(s{s}) names block {b} twice (logical blocks {[j for j, c in held if c == b]})")
        return held

    @staticmethod
    def _users(b: int, held: dict) -> str:
        return ", ".join(f"s{s}[{j}]" for s, hl in held.items() for j, c in hl if c == b) or "none"

    def _sharing(self, i: int, op: Any, counts: dict, held: dict, touched: tuple, wrote: tuple) -> None:
        """Shared blocks: one logical block, one identity, one content; none of them just written into.
        Only pairs with a touched sequence can have changed (the others passed when they last changed)."""
        spec, B = self.spec, self.spec.B
        for s, lo, hi in wrote:
            if hi <= lo or s not in held:
                continue
            for j, b in held[s]:
                if lo // B <= j <= (hi - 1) // B and counts[b] > 1:
                    self.fail(i, op, f"s{s} wrote positions {lo}..{hi - 1} into block {b}, which is also referenced as "
                                     f"{self._users(b, held)}: a shared block is never written (copy on write)")
        if not touched and i >= 0:
            return
        owner: dict[int, list] = {}
        for s, hl in held.items():
            for j, b in hl:
                if counts[b] > 1:
                    owner.setdefault(b, []).append((s, j))
        deepest: dict[tuple, int] = {}
        for b, users in owner.items():
            s0, j0 = users[0]
            for s, j in users[1:]:
                if j != j0:
                    self.fail(i, op, f"block {b} is logical block {j0} of s{s0} and logical block {j} of s{s}: "
                                     "two tables share a block only where both hold the same positions")
            for a in range(len(users)):
                for c in range(a + 1, len(users)):
                    pair = (users[a][0], users[c][0])
                    if pair[0] in touched or pair[1] in touched or i < 0:
                        deepest[pair] = max(deepest.get(pair, -1), j0)
        for (s, t), j in deepest.items():
            qs, qt = spec.seqs[s], spec.seqs[t]
            if qs.identity != qt.identity:
                self.fail(i, op, f"s{s} (identity {qs.identity}) and s{t} (identity {qt.identity}) share blocks: "
                                 "a block is shared only between histories of one identity")
            upto = min(qs.n, qt.n, (j + 1) * B)
            if common_prefix(qs.segs, qt.segs) < upto:
                self.fail(i, op, f"s{s} and s{t} share logical block {j}, but their histories differ before "
                                 f"position {upto}: a shared block holds one content")

    def reads(self, i: int, op: Any) -> None:
        spec = self.spec
        read = self.read
        for s in spec.seqs:
            try:
                gp, gk, gv = read(s)
            except Unreadable as e:
                raise Mismatch(self.name, i, op, str(e)) from None
            except Exception as e:  # noqa: BLE001 - the cache raised on a spec-valid read
                raise self.crash(i, op, e) from e
            want, pb, kb, vb = spec.expected_bytes(s)
            if gk.dtype is F32 and gv.dtype is F32 and gp.dtype is I64 and gp.tobytes() == pb \
                    and gk.tobytes() == kb and gv.tobytes() == vb:
                continue
            diff = compare((gp, gk, gv), want)
            if diff is not None:
                self.fail(i, op, f"read(s{s}): {diff}")

    def unchanged(self, i: int, op: Any, error: BaseException) -> None:
        """After an op that raised: the tables, the free count and every read are as before."""
        before, free = self.tables, self.free
        from fuzz.targets.base import Crash

        try:
            self.check(i, op, tuple(self.spec.seqs))
        except (Mismatch, Crash) as e:
            self.fail(i, op, f"raised {type(error).__name__} ({error}) but changed the pool: {e.detail}")
        changed = [f"s{s}: {_tb(before[s])} -> {_tb(t)}" for s, t in self.tables.items()
                   if s not in before or not np.array_equal(before[s], t)]
        if changed or free != self.free:
            self.fail(i, op, f"raised {type(error).__name__} ({error}) but changed the pool: "
                             + (", ".join(changed) or f"free blocks {free} -> {self.free}"))

    def sweep(self, i: int, op: Any) -> None:
        """Every block's refcount (end of a case): an unreferenced block has refcount 0."""
        if self.refcount is None:
            return
        for b in range(self.spec.N):
            rc = self._call(i, op, self.refcount, b)
            if rc != self.counts.get(b, 0):
                self.fail(i, op, f"refcount({b}) = {rc!r}, but {self.counts.get(b, 0)} table entries reference it")

    # -- will an append find its blocks? -------------------------------------------
    def fits(self, items: list) -> bool:
        """Whether appending ``k`` tokens to each ``(seq, k)`` of ``items`` in order finds a free block
        every time the spec's sequential rule needs one, from the state observed last: a new logical
        block or a copy of a shared one takes a block, the rule's releases return those no other table
        references."""
        spec = self.spec
        B, W, R = spec.B, spec.W, spec.R
        if len(items) == 1:
            if -(-items[0][1] // B) + 1 <= self.free:
                return True
        elif sum(-(-k // B) + 1 for _, k in items) <= self.free:
            return True
        f = self.free
        refs: dict = {}  # overlay on self.refs
        fresh = 0

        def rc(x: Any) -> int:
            return refs[x] if x in refs else self.counts.get(x, 0)

        for s, k in items:
            q = spec.seqs[s]
            n, hw = q.n, q.hw
            kf = spec.keep_from(q)
            # only logical blocks from the first one the rule keeps can be written or released from here on
            tbl: list = [None] * kf + [None if b < 0 else b for b in self.tables[s][kf:].tolist()]
            for _ in range(k):
                j = n // B
                if j >= len(tbl):
                    tbl.append(None)
                x = tbl[j]
                if x is None or rc(x) > 1:
                    if f == 0:
                        return False
                    f -= 1
                    if x is not None:
                        refs[x] = rc(x) - 1
                    fresh += 1
                    x = ("new", fresh)
                    refs[x] = 1
                    tbl[j] = x
                n += 1
                hw = max(hw, n)
                floor = max(hw - R, q.base) if R else n
                kf2 = max(0, floor - W + 1) // B
                for jj in range(kf, min(kf2, len(tbl))):
                    y = tbl[jj]
                    if y is not None:
                        refs[y] = rc(y) - 1
                        if refs[y] == 0:
                            f += 1
                        tbl[jj] = None
                kf = max(kf, kf2)
        return True


def _tb(tbl: np.ndarray) -> str:
    """A table as the protocol writes it (``None`` for none), shortened."""
    out = [None if b < 0 else int(b) for b in tbl.tolist()]
    return str(out) if len(out) <= 12 else f"[... {len(out) - 8} entries ..., " + str(out[-8:])[1:]


def compare(got: tuple, want: tuple) -> Optional[str]:
    """``None`` when a read equals the expected entries (positions, then keys and values bit for bit)."""
    gp, gk, gv = got
    wp, wk, wv = want
    if gp.shape != wp.shape or gp.tobytes() != wp.tobytes():
        return describe_difference(np.asarray(gp).tolist(), wp.tolist(), spec="lastWindow (W-1) of its history")
    if gk.dtype == wk.dtype and gv.dtype == wv.dtype and gk.shape == wk.shape and gv.shape == wv.shape:
        if gk.tobytes() == wk.tobytes() and gv.tobytes() == wv.tobytes():
            return None
    elif gk.shape == wk.shape and gv.shape == wv.shape and np.array_equal(gk, wk) and np.array_equal(gv, wv):
        return None
    if gk.shape != wk.shape or gv.shape != wv.shape:
        return f"keys or values differ in shape: got {tuple(gk.shape)}, spec {tuple(wk.shape)}"
    return payload_difference(wp, (("key", gk, wk), ("value", gv, wv))) + " (another sequence's or a stale entry)"
