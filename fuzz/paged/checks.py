"""What the paged checker asserts after every op (docs/paged.md "What a checker asserts"), on any cache
that speaks the Python paged protocol — only ``read``, ``table`` and ``free_blocks`` are needed; a cache
that also has ``length(seq)`` or ``refcount(block)`` has those checked too.

Correctness (a failure is a :class:`~fuzz.targets.base.Mismatch`):

* **reads** — every live sequence's ``read`` equals ``lastWindow (W-1)`` of its own history, so no op on
  one sequence changes what another reads (``paged_read_window``, ``paged_independent``);
* **tables** — ``ceil(n/B)`` entries, each a block ``0 .. N-1`` or ``None``; every block holding a
  position the next query needs is present, and for a cache with rollback every block a rollback may
  need again (freed only by the rule: ``paged_free_safe``); no table names one block twice;
* **sharing** — two tables share a block only at the same logical block, with the same identity, and
  only while both histories agree on every position of it the two have written; a block an op just
  wrote into is referenced by no other table entry (copy on write);
* **counts** — ``free_blocks() == N -`` the blocks the tables reference, and ``refcount(b)`` is the
  number of references (``paged_refcount``);
* an op that raised changed nothing (:meth:`Checker.unchanged`).

Efficiency (:data:`EFFICIENCY`, reported, never failed, except past the bound): blocks a sequence holds
that the rule would have freed (``blocks_beyond_rule``); a sequence holding more than
``ceil((W-1)/B) + 1`` blocks (``ceil((W+R-1)/B) + 1`` with rollback) is an :class:`OverBound` finding.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from fuzz.paged.oracle import PagedSpec, common_prefix
from fuzz.targets.base import Mismatch

#: The efficiency counters a paged run reports (:attr:`fuzz.targets.base.RunStats.efficiency`).
EFFICIENCY = ("blocks_beyond_rule", "hits_missed", "exhausted_early")


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


class Checker:
    """Audits one cache ``obj`` against ``spec`` after every op; remembers what it observed last (the
    tables, the free count), which is also what an op that raised must have left unchanged."""

    def __init__(self, name: str, obj: Any, spec: PagedSpec, crash: Callable, *, has_arrays: bool):
        self.name, self.obj, self.spec, self.crash = name, obj, spec, crash
        self.read = obj.read_arrays if has_arrays else tuple_reader(obj, spec.D)
        self.length = getattr(obj, "length", None) if callable(getattr(obj, "length", None)) else None
        self.refcount = getattr(obj, "refcount", None) if callable(getattr(obj, "refcount", None)) else None
        self.tables: dict[int, list] = {}
        self.refs: dict[Any, int] = {}
        self.free = spec.N
        self.efficiency = dict.fromkeys(EFFICIENCY, 0)
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
        """Every audit after op ``i``; ``touched`` the sequences it changed (their lengths and refcounts
        are read), ``wrote`` ``(seq, first position, end)`` of the entries it appended."""
        spec, obj = self.spec, self.obj
        B, N = spec.B, spec.N
        tables: dict[int, list] = {}
        refs: dict[Any, int] = {}
        where: dict[Any, list] = {}
        for s, q in spec.seqs.items():
            tbl = self._call(i, op, obj.table, s)
            if type(tbl) is not list:
                tbl = list(tbl)
            if len(tbl) != -(-q.n // B):
                self.fail(i, op, f"table(s{s}) has {len(tbl)} entries; a sequence of {q.n} tokens has "
                                 f"ceil({q.n}/{B}) = {-(-q.n // B)}")
            kf, nf = spec.keep_from(q), spec.needed_from(q)
            held = 0
            for j, b in enumerate(tbl):
                if b is None:
                    if j >= kf:
                        what = "holds a position the next query needs" if j >= nf else \
                            f"a rollback to {spec.floor(q)} (max_rollback {spec.R}) may need it again"
                        self.fail(i, op, f"logical block {j} of s{s} (positions {j * B}..{j * B + B - 1}, n = {q.n}) "
                                         f"{what}, but its table entry is none: freed before the rule allows")
                    continue
                if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 0 <= b < N:
                    self.fail(i, op, f"table(s{s})[{j}] = {b!r} is not a block id 0 .. {N - 1}")
                held += 1
                if b in refs and any(t == s for t, _ in where[b]):
                    self.fail(i, op, f"table(s{s}) names block {b} twice (logical blocks "
                                     f"{[jj for t, jj in where[b] if t == s][0]} and {j})")
                refs[b] = refs.get(b, 0) + 1
                where.setdefault(b, []).append((s, j))
            if held > spec.bound:
                self.fail(i, op, f"s{s} holds {held} blocks, more than the rule ever lets a sequence hold "
                                 f"(ceil(({spec.W + spec.R}-1)/{B}) + 1 = {spec.bound}): table {tbl}", OverBound)
            if kf and any(b is not None for b in tbl[:kf]):
                self.note("blocks_beyond_rule", i)
            tables[s] = tbl
        self._sharing(i, op, where, wrote, tables)
        free = self._call(i, op, obj.free_blocks)
        if free != N - len(refs):
            self.fail(i, op, f"free_blocks() = {free!r}, but the tables reference {len(refs)} of the {N} blocks "
                             f"(so {N - len(refs)} are free)")
        if self.refcount is not None:
            seen = {b for s in touched for tbl in (self.tables.get(s, ()), tables.get(s, ())) for b in tbl
                    if b is not None}
            for b in sorted(seen):
                rc = self._call(i, op, self.refcount, b)
                if rc != refs.get(b, 0):
                    self.fail(i, op, f"refcount({b}) = {rc!r}, but {refs.get(b, 0)} table entries reference it "
                                     f"({where.get(b, [])})")
        if self.length is not None:
            for s in touched:
                if s in spec.seqs:
                    n = self._call(i, op, self.length, s)
                    if n != spec.seqs[s].n:
                        self.fail(i, op, f"length(s{s}) = {n!r}, the spec's is {spec.seqs[s].n}")
        self.tables, self.refs, self.free = tables, refs, free
        self.reads(i, op)

    def _sharing(self, i: int, op: Any, where: dict, wrote: tuple, tables: dict) -> None:
        spec, B = self.spec, self.spec.B
        for b, users in where.items():
            if len(users) < 2:
                continue
            (s, j) = users[0]
            qs = spec.seqs[s]
            for t, jt in users[1:]:
                qt = spec.seqs[t]
                if jt != j:
                    self.fail(i, op, f"block {b} is logical block {j} of s{s} and logical block {jt} of s{t}: "
                                     "two tables share a block only where both hold the same positions")
                if qs.identity != qt.identity:
                    self.fail(i, op, f"block {b} is shared by s{s} (identity {qs.identity}) and s{t} (identity "
                                     f"{qt.identity}): a block is shared only between histories of one identity")
                upto = min(qs.n, qt.n, (j + 1) * B)
                if common_prefix(qs.segs, qt.segs) < upto:
                    self.fail(i, op, f"block {b} (logical block {j}) is shared by s{s} and s{t}, whose histories "
                                     f"differ before position {upto}: a shared block holds one content")
        for s, lo, hi in wrote:
            tbl = tables.get(s, ())
            for j in range(lo // B, min(-(-hi // B), len(tbl))):
                b = tbl[j]
                if b is not None and len(where[b]) > 1:
                    others = [f"s{t}[{jj}]" for t, jj in where[b] if (t, jj) != (s, j)]
                    self.fail(i, op, f"s{s} wrote positions {max(lo, j * B)}..{min(hi, (j + 1) * B) - 1} into block "
                                     f"{b}, which {', '.join(others)} also references: a shared block is never "
                                     "written (copy on write)")

    def reads(self, i: int, op: Any) -> None:
        spec = self.spec
        for s in spec.seqs:
            got = self._call(i, op, self.read, s)
            want = spec.expected(s)
            diff = compare(got, want)
            if diff is not None:
                self.fail(i, op, f"read(s{s}): {diff}")

    def unchanged(self, i: int, op: Any, error: BaseException) -> None:
        """After an op that raised: the tables, the free count and every read are as before."""
        before = (dict(self.tables), self.free)
        try:
            self.check(i, op)
        except Mismatch as e:
            self.fail(i, op, f"raised {type(error).__name__} ({error}) but changed the pool: {e.detail}")
        if (self.tables, self.free) != before:
            changed = [f"s{s}: {before[0].get(s)} -> {t}" for s, t in self.tables.items() if before[0].get(s) != t]
            self.fail(i, op, f"raised {type(error).__name__} ({error}) but changed the pool: "
                             + (", ".join(changed) or f"free blocks {before[1]} -> {self.free}"))

    def sweep(self, i: int, op: Any) -> None:
        """Every block's refcount (end of a case): an unreferenced block has refcount 0."""
        if self.refcount is None:
            return
        for b in range(self.spec.N):
            rc = self._call(i, op, self.refcount, b)
            if rc != self.refs.get(b, 0):
                self.fail(i, op, f"refcount({b}) = {rc!r}, but {self.refs.get(b, 0)} table entries reference it")

    # -- will an append find its blocks? -------------------------------------------
    def fits(self, items: list) -> bool:
        """Whether appending ``k`` tokens to each ``(seq, k)`` of ``items`` in order finds a free block
        every time the spec's sequential rule needs one, from the state observed last: a new logical
        block or a copy of a shared one takes a block, the rule's releases return those no other table
        references."""
        spec = self.spec
        B, W, R = spec.B, spec.W, spec.R
        need = sum(-(-k // B) + 1 for _, k in items)
        if need <= self.free:
            return True
        f = self.free
        refs = dict(self.refs)
        fresh = 0
        for s, k in items:
            q = spec.seqs[s]
            tbl = list(self.tables[s])
            n, hw = q.n, q.hw
            kf = spec.keep_from(q)
            for _ in range(k):
                j = n // B
                if j >= len(tbl):
                    tbl.append(None)
                x = tbl[j]
                if x is None or refs[x] > 1:
                    if f == 0:
                        return False
                    f -= 1
                    if x is not None:
                        refs[x] -= 1
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
                        refs[y] -= 1
                        if refs[y] == 0:
                            f += 1
                        tbl[jj] = None
                kf = max(kf, kf2)
        return True


def compare(got: tuple, want: tuple) -> Optional[str]:
    """``None`` when a read equals the expected entries (positions, then keys and values bit for bit)."""
    gp, gk, gv = got
    wp, wk, wv = want
    if gp.shape != wp.shape or gp.tobytes() != wp.tobytes():
        return f"positions {np.asarray(gp).tolist()} != lastWindow (W-1) of its history {wp.tolist()}"
    if gk.dtype == wk.dtype and gv.dtype == wv.dtype and gk.shape == wk.shape and gv.shape == wv.shape:
        if gk.tobytes() == wk.tobytes() and gv.tobytes() == wv.tobytes():
            return None
    elif gk.shape == wk.shape and gv.shape == wv.shape and np.array_equal(gk, wk) and np.array_equal(gv, wv):
        return None
    for r, p in enumerate(wp.tolist()):
        for label, g, w in (("key", gk, wk), ("value", gv, wv)):
            if r >= len(g) or not np.array_equal(g[r], w[r]):
                return (f"{label} of position {p}: got {np.asarray(g[r])[:4].tolist() if r < len(g) else None}..., "
                        f"want {w[r][:4].tolist()}... (another sequence's or a stale entry)")
    return "keys or values differ in shape"
