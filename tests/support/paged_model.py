"""The test suite's own model of a paged pool: the semantics of docs/paged.md written out literally.

This is not pyspec (``pyspec/paged.py`` is written separately); it is a small, independent model
the ``tests/test_paged_c_*`` suites hold the C pool to, op by op. It stores real slots and reads
through its tables, and asserts on itself that every read is ``lastWindow (W-1)`` of the history,
so a model bug cannot silently agree with an implementation bug.

Payloads are compared by their bits (``float32`` bytes), as the prefix cache's content identity
is: ``-0.0`` and ``0.0`` are different entries. Errors are raised as :class:`ModelError` with the
``pagedkv_status`` code the header documents, checked in the header's order.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

# pagedkv_status, as csrc/pagedkv.h numbers them
OK, E_NULL, E_CONFIG, E_NOMEM, E_UNKNOWN, E_DUPLICATE, E_POSITION, E_EXHAUSTED, E_CAPACITY, E_RANGE = range(10)


class ModelError(Exception):
    def __init__(self, code: int, what: str):
        super().__init__(f"{what} (status {code})")
        self.code = code


def entry(pos: int, key, value) -> tuple[int, bytes, bytes]:
    """An entry as the model keeps it: the position and the float32 bits of key and value."""
    return (int(pos), np.asarray(key, dtype=np.float32).tobytes(), np.asarray(value, dtype=np.float32).tobytes())


@dataclass
class Seq:
    n: int = 0
    tag: int = 0
    table: list = field(default_factory=list)  # physical block or None, per logical block
    history: list = field(default_factory=list)  # every entry appended, positions 0 .. n-1


class Model:
    """A pool of ``N`` blocks of ``B`` slots, window ``W``, width ``D``."""

    def __init__(self, W: int, B: int, N: int, D: int):
        if min(W, B, N, D) < 1:
            raise ModelError(E_CONFIG, "config < 1")
        self.W, self.B, self.N, self.D = W, B, N, D
        self.ref = [0] * N
        self.free = list(range(N))  # least recently freed first
        self.slots = [[None] * B for _ in range(N)]
        self.ident: list = [None] * N  # content identity of a full block, kept while free, lost when taken
        self.seqs: dict[int, Seq] = {}

    # -- helpers ------------------------------------------------------------
    def _seq(self, s: int) -> Seq:
        if s < 0:
            raise ModelError(E_RANGE, f"sequence id {s}")
        if s not in self.seqs:
            raise ModelError(E_UNKNOWN, f"sequence {s}")
        return self.seqs[s]

    def _absent(self, s: int) -> None:
        if s < 0:
            raise ModelError(E_RANGE, f"sequence id {s}")
        if s in self.seqs:
            raise ModelError(E_DUPLICATE, f"sequence {s}")

    def _take(self) -> int:
        x = self.free.pop(0)
        self.ident[x] = None  # evicted
        self.ref[x] = 1
        return x

    def _unref(self, x: int) -> None:
        self.ref[x] -= 1
        if self.ref[x] == 0:
            self.free.append(x)

    def _append_one(self, s: int, e) -> None:
        q, B = self.seqs[s], self.B
        j = q.n // B
        if j == len(q.table) or q.table[j] is None:
            if not self.free:
                raise ModelError(E_EXHAUSTED, f"sequence {s} needs a block")
            if j == len(q.table):
                q.table.append(None)
            q.table[j] = self._take()
        elif self.ref[q.table[j]] > 1:
            if not self.free:
                raise ModelError(E_EXHAUSTED, f"sequence {s} needs a copy")
            old, new = q.table[j], self._take()
            self.slots[new] = list(self.slots[old])
            self.ref[old] -= 1
            q.table[j] = new
        self.slots[q.table[j]][q.n % B] = e
        q.history.append(e)
        q.n += 1
        if q.n % B == 0:
            self.ident[q.table[j]] = (q.tag, tuple(q.history[:q.n]))
        for jj, x in enumerate(q.table):
            if x is not None and (jj + 1) * B <= q.n - self.W + 1:
                q.table[jj] = None
                self._unref(x)

    # -- the ops --------------------------------------------------------------
    def add(self, s: int) -> None:
        self._absent(s)
        self.seqs[s] = Seq()

    def append_chunk(self, s: int, entries: list) -> None:
        q = self._seq(s)
        for i, e in enumerate(entries):
            if e[0] != q.n + i:
                raise ModelError(E_POSITION, f"entry {i} at {e[0]}, next is {q.n + i}")
        saved = copy.deepcopy((self.ref, self.free, self.slots, self.ident, q))
        try:
            for e in entries:
                self._append_one(s, e)
        except ModelError:
            self.ref, self.free, self.slots, self.ident, self.seqs[s] = saved
            raise

    def append(self, s: int, e) -> None:
        self.append_chunk(s, [e])

    def fork(self, src: int, dst: int) -> None:
        if src < 0 or dst < 0:
            raise ModelError(E_RANGE, "negative id")
        q = self._seq(src)
        self._absent(dst)
        self.seqs[dst] = Seq(q.n, q.tag, list(q.table), list(q.history))
        for x in q.table:
            if x is not None:
                self.ref[x] += 1

    def free_seq(self, s: int) -> None:
        q = self._seq(s)
        for x in q.table:
            if x is not None:
                self._unref(x)
        del self.seqs[s]

    def read(self, s: int) -> list:
        q = self._seq(s)
        lo = max(0, q.n - self.W + 1)
        got = [self.slots[q.table[p // self.B]][p % self.B] for p in range(lo, q.n)]
        assert got == q.history[lo:], "the model's own read is not lastWindow (W-1) of its history"
        return got

    def table(self, s: int) -> list:
        return list(self._seq(s).table)

    def admit(self, s: int, prompt: list, tag: int = 0) -> int:
        if not prompt:
            raise ModelError(E_RANGE, "empty prompt")
        self._absent(s)
        B, W = self.B, self.W
        want = lambda j: (tag, tuple(prompt[:(j + 1) * B]))  # noqa: E731 - content identity of prompt block j

        def cached(j):
            xs = [x for x in range(self.N) if self.ident[x] == want(j)]
            live = [x for x in xs if self.ref[x] > 0]
            return (live or xs or [None])[0]

        best = 0
        for L in range(0, len(prompt), B):  # L <= m-1, a multiple of B
            if all(cached(j) is not None for j in range(max(0, L - W + 1) // B, L // B)):
                best = L
        q = Seq(best, tag, [None] * (best // B), list(prompt[:best]))
        for j in range(max(0, best - W + 1) // B, best // B):
            x = cached(j)
            if self.ref[x] == 0:
                self.free.remove(x)
            self.ref[x] += 1
            q.table[j] = x
        self.seqs[s] = q
        return best

    def refcounts_consistent(self) -> bool:
        """Refcounts equal references; a block is free iff unreferenced."""
        refs = [0] * self.N
        for q in self.seqs.values():
            for x in q.table:
                if x is not None:
                    refs[x] += 1
        return refs == self.ref and sorted(self.free) == [x for x in range(self.N) if refs[x] == 0]


# ---------------------------------------------------------------------------
# Differential streams: one random op stream applied to the model and to a pool object
# implementing the Python paged protocol, every observable compared after every op.


def observe_pool(pool, ids) -> dict:
    """Everything a checker can see of a protocol pool (``PagedC``), bits of payloads included."""
    out = {"free": pool.free_blocks(), "refs": [pool.refcount(x) for x in range(pool.config[2])], "seqs": {}}
    for s in ids:
        out["seqs"][s] = (pool.length(s), pool.identity(s), pool.table(s),
                          [entry(p, k, v) for p, k, v in pool.read(s)])
    return out


def observe_model(m: Model) -> dict:
    return {"free": len(m.free), "refs": list(m.ref),
            "seqs": {s: (q.n, q.tag, list(q.table), m.read(s)) for s, q in sorted(m.seqs.items())}}


def _outcome(fn):
    """``("ok", result)`` or ``("error", status code)`` of one call."""
    try:
        return "ok", fn()
    except ModelError as e:
        return "error", e.code
    except Exception as e:  # noqa: BLE001 - the implementation's typed exceptions carry .code
        if not hasattr(e, "code"):
            raise
        return "error", e.code


TOKENS = (0.0, -0.0, 1.0, 2.5)


def run_stream(pool, seed: int, ops: int = 60, shape: tuple | None = None) -> dict:
    """A seeded random stream on ``pool`` and on the model; raises ``AssertionError`` naming the
    seed and op at the first difference. Returns counts of what the stream exercised."""
    import random

    rng = random.Random(seed)
    W, B, N, D = shape or (rng.randint(1, 7), rng.randint(1, 4), rng.randint(1, 10), rng.randint(1, 3))
    model = Model(W, B, N, D)
    pool.configure(W, B, N, D)
    wl, bl = min(W, 16), min(B, 16)  # lengths of chunks and prompts, bounded for huge shapes
    ids = (0, 1, 2, 3, 4, 2**40)
    seen = {"hits": 0, "errors": set(), "forks": 0}

    def ent(pos, tok):
        return (pos, np.full(D, tok, dtype=np.float32), np.full(D, tok + 10, dtype=np.float32))

    def history_tokens(s):
        return [np.frombuffer(k, dtype=np.float32)[0] for _, k, _ in model.seqs[s].history]

    for step in range(ops):
        op, s = rng.choice(("add", "append", "append", "chunk", "chunk", "fork", "free", "admit", "bad")), rng.choice(ids)
        live = sorted(model.seqs)
        if op in ("append", "chunk", "fork", "free") and live and rng.random() < 0.85:
            s = rng.choice(live)
        n = model.seqs[s].n if s in model.seqs else 0
        if op == "add":
            calls = (lambda: model.add(s), lambda: pool.add(s))
        elif op == "append":
            pos = n + rng.choice((0, 0, 0, 0, 1, -1))
            e = ent(pos, rng.choice(TOKENS))
            calls = (lambda: model.append(s, entry(*e)), lambda: pool.append(s, *e))
        elif op == "chunk":
            k = rng.choice((0, 1, bl, wl, rng.randint(0, 2 * wl + bl), min(N * B, 64)))
            es = [ent(n + i + (i == k - 1 and rng.random() < 0.1), rng.choice(TOKENS)) for i in range(k)]
            calls = (lambda: model.append_chunk(s, [entry(*e) for e in es]), lambda: pool.append_chunk(s, es))
        elif op == "fork":
            d = rng.choice(ids)
            calls = (lambda: model.fork(s, d), lambda: pool.fork(s, d))
            seen["forks"] += 1
        elif op == "free":
            calls = (lambda: model.free_seq(s), lambda: pool.free(s))
        elif op == "admit":
            src = rng.choice(live) if live else None
            toks = history_tokens(src) if src is not None and rng.random() < 0.7 else []
            toks = toks + [rng.choice(TOKENS) for _ in range(rng.randint(0 if toks else 1, wl + bl))]
            if len(toks) > 1 and rng.random() < 0.2:
                toks[rng.randrange(len(toks))] = rng.choice(TOKENS)  # a prompt that diverges somewhere
            tag = rng.choice((0, 0, 0, 1))
            es = [ent(i, t) for i, t in enumerate(toks)]
            calls = (lambda: model.admit(s, [entry(*e) for e in es], tag), lambda: pool.admit(s, es, tag))
        else:  # reads of unknown or negative ids
            bad = rng.choice((-1, 77, s))
            calls = (lambda: model.read(bad), lambda: pool.read(bad))
        want, got = _outcome(calls[0]), _outcome(calls[1])
        if op == "read" or op == "bad":
            want, got = (want[0], None if want[0] == "ok" else want[1]), (got[0], None if got[0] == "ok" else got[1])
        where = f"seed {seed} (W={W} B={B} N={N} D={D}), op #{step} {op} on sequence {s}"
        assert got == want, f"{where}: implementation {got}, model {want}"
        if op == "admit" and want[0] == "ok" and want[1] > 0:
            seen["hits"] += 1
        if want[0] == "error":
            seen["errors"].add(want[1])
        assert model.refcounts_consistent(), f"{where}: the model's own refcounts"
        assert sorted(pool.sequences()) == sorted(model.seqs), f"{where}: live sequences"
        assert observe_pool(pool, sorted(model.seqs)) == observe_model(model), f"{where}: observable state differs"
    return seen
