"""Differential streams for the serving-engine adapters (impl/serving) against the C reference.

One seeded random op stream goes to an adapter and to :class:`impl.paged.PagedC`; after every op
each live sequence's ``read`` is compared, by the bits of its payloads, with the reference's *and*
with ``lastWindow (W-1)`` of the history this driver recorded itself (two references derived two
ways: a disagreement between those two is a reference bug, reported apart).

What the engines may legitimately do differently from the reference is recorded, not failed:

* physical ids and free counts (different allocators, different eviction orders);
* a refused allocation where the reference fitted (vLLM allocates a whole chunk's blocks at once):
  ``efficiency["refused"]``; the sequence is then freed on both sides to keep the streams in step;
* a prefix hit of another length than the reference's (the pools cached different blocks). A hit
  shorter than the longest one the spec allows against *the engine's own* cached blocks
  (``adapter.longest_valid_hit``) is ``efficiency["short_hit"]``; a hit that is not valid shows as a
  wrong read. After an admit both sides append the rest of the prompt, so the histories agree again;
* retention: the logical blocks an adapter still holds, against the freeing rule (a block ``j`` is
  released iff ``(j+1)·B <= n - W + 1``): one held beyond the rule is ``efficiency["held"]``, one
  released early ``correctness`` (it is also a wrong read).

Everything else that differs is a correctness divergence: a read, an op outcome (ok vs error, or the
error code), a write vLLM gave no slot (``stats.null_writes``), the full-attention group's read of
a hybrid adapter (``read_full``, the whole history).
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np

from impl.paged import E_EXHAUSTED, PagedC

TOKENS = (0.0, -0.0, 1.0, 2.5)


def _bits(entries) -> list:
    return [(int(p), np.asarray(k, np.float32).tobytes(), np.asarray(v, np.float32).tobytes()) for p, k, v in entries]


def _outcome(fn):
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001 - both sides raise impl.paged's typed errors (with .code)
        if not hasattr(e, "code"):
            raise
        return "error", e.code


class Divergences:
    def __init__(self):
        self.correctness: list[str] = []
        self.reference: list[str] = []
        self.efficiency: Counter = Counter()
        self.examples: dict[str, str] = {}
        self.counts: Counter = Counter()

    def eff(self, kind: str, where: str) -> None:
        self.efficiency[kind] += 1
        self.examples.setdefault(kind, where)

    def merge(self, other: "Divergences") -> None:
        self.correctness += other.correctness
        self.reference += other.reference
        self.efficiency.update(other.efficiency)
        for k, v in other.examples.items():
            self.examples.setdefault(k, v)
        self.counts.update(other.counts)


def run_diff(adapter, seed: int, ops: int = 60, shape: tuple | None = None, *, hybrid_factor: int = 1,
             check_tables: bool = True) -> Divergences:
    """One stream; ``shape = (W, B, N, D)`` or drawn. The adapter's pool gets ``N * hybrid_factor``
    blocks (a hybrid adapter's full-attention group shares the pool), the reference ``N``."""
    rng = random.Random(seed)
    W, B, N, D = shape or (rng.randint(1, 9), rng.randint(1, 4), rng.randint(2, 16), rng.randint(1, 3))
    ref = PagedC()
    ref.configure(W, B, N, D)
    adapter.configure(W, B, N * hybrid_factor, D)
    out = Divergences()
    hist: dict[int, list] = {}
    ids = (0, 1, 2, 3, 4)
    wl, bl = min(W, 16), min(B, 16)
    has_admit = "admit" in getattr(adapter, "ops", ())
    hybrid = "read_full" in getattr(adapter, "ops", ())
    nulls = 0

    def ent(pos, tok):
        return (pos, np.full(D, tok, np.float32), np.full(D, tok + 10, np.float32))

    def drop(s, where):
        """Free ``s`` on whichever side has it (streams back in step after an asymmetric refusal)."""
        for side in (adapter, ref):
            try:
                side.free(s)
            except Exception as e:  # noqa: BLE001
                if not hasattr(e, "code"):
                    raise
        hist.pop(s, None)

    def both(name, fa, fr, where, s=None, on_ok=None):
        a, r = _outcome(fa), _outcome(fr)
        if a[0] == r[0] == "ok":
            if on_ok:
                on_ok()
            return a, r
        if a[0] == r[0] == "error":
            if a[1] != r[1]:
                out.correctness.append(f"{where}: {name} failed with status {a[1]}, the reference with {r[1]}")
            return a, r
        if a[0] == "error" and a[1] == E_EXHAUSTED:
            out.eff("refused", f"{where}: {name}")
        elif r[0] == "error" and r[1] == E_EXHAUSTED:
            out.eff("reference_refused", f"{where}: {name}")
        else:
            out.correctness.append(f"{where}: {name}: adapter {a}, reference {r}")
        if s is not None:
            drop(s, where)
        return None, None

    for step in range(ops):
        op = rng.choice(("add", "append", "append", "append", "chunk", "chunk", "free", "admit", "admit", "bad"))
        live = sorted(hist)
        s = rng.choice(live) if live and op in ("append", "chunk", "free") and rng.random() < 0.9 else rng.choice(ids)
        where = f"seed {seed} (W={W} B={B} N={N} D={D}) op #{step} {op} on sequence {s}"
        n = len(hist.get(s, ()))
        out.counts[op] += 1
        if op == "add":
            both("add", lambda: adapter.add(s), lambda: ref.add(s), where,
                 on_ok=lambda: hist.__setitem__(s, []))
        elif op == "append":
            pos = n + (rng.choice((0, 0, 0, 0, 0, 1, -1)) if n else rng.choice((0, 0, 0, 1)))
            e = ent(pos, rng.choice(TOKENS))
            both("append", lambda: adapter.append(s, *e), lambda: ref.append(s, *e), where, s,
                 on_ok=lambda: hist[s].append(e))
        elif op == "chunk":
            k = rng.choice((0, 1, bl, wl, rng.randint(0, 2 * wl + bl), min(N * B, 40)))
            es = [ent(n + i + (i == k - 1 and rng.random() < 0.05), rng.choice(TOKENS)) for i in range(k)]
            both("append_chunk", lambda: adapter.append_chunk(s, es), lambda: ref.append_chunk(s, es), where, s,
                 on_ok=lambda: hist[s].extend(es))
        elif op == "free":
            both("free", lambda: adapter.free(s), lambda: ref.free(s), where, on_ok=lambda: hist.pop(s, None))
        elif op == "admit" and has_admit:
            src = rng.choice(live) if live else None
            toks = [float(np.asarray(e[1])[0]) for e in hist[src]] if src is not None and rng.random() < 0.8 else []
            toks = toks + [rng.choice(TOKENS) for _ in range(rng.randint(0 if toks else 1, wl + bl))]
            if len(toks) > 1 and rng.random() < 0.15:
                toks[rng.randrange(len(toks))] = rng.choice(TOKENS)
            tag = rng.choice((0, 0, 0, 1))
            prompt = [ent(i, t) for i, t in enumerate(toks)]
            best = None
            if s not in hist and hasattr(adapter, "longest_valid_hit"):
                best = adapter.longest_valid_hit(prompt, tag)
            a, r = both("admit", lambda: adapter.admit(s, prompt, tag), lambda: ref.admit(s, prompt, tag), where)
            if a is not None and a[0] == "ok":
                la, lr = a[1], r[1]
                out.counts["hits"] += la > 0
                if la != lr:
                    out.counts["hit_differs"] += 1
                if best is not None and la < best:
                    out.eff("short_hit" if W > 1 else "short_hit_W1", f"{where}: engine hit {la}, the spec allows {best} against its cache")
                hist[s] = list(prompt[:la])
                ra = _outcome(lambda: adapter.append_chunk(s, prompt[la:]))
                rr = _outcome(lambda: ref.append_chunk(s, prompt[lr:]))
                if ra[0] == rr[0] == "ok":
                    hist[s] = list(prompt)
                elif ra != rr:
                    kind = "refused" if ra == ("error", E_EXHAUSTED) else \
                        "reference_refused" if rr == ("error", E_EXHAUSTED) else None
                    if kind:
                        out.eff(kind, f"{where}: the rest of the prompt")
                    else:
                        out.correctness.append(f"{where}: rest of the prompt: adapter {ra}, reference {rr}")
                    drop(s, where)
                else:
                    drop(s, where)  # both refused: their histories differ by the hit; start afresh
        else:  # reads of an unknown or negative id
            bad = rng.choice((-1, 77))
            both("read", lambda: adapter.read(bad), lambda: ref.read(bad), where)
        # -- after every op ------------------------------------------------------------------
        if sorted(adapter.sequences()) != sorted(hist) or sorted(ref.sequences()) != sorted(hist):
            out.correctness.append(f"{where}: live sequences adapter {adapter.sequences()}, reference "
                                   f"{ref.sequences()}, driver {sorted(hist)}")
            break
        stats = getattr(adapter, "stats", None)
        if stats is not None and len(stats.null_writes) > nulls:
            out.correctness.append(f"{where}: the engine gave no slot to {stats.null_writes[nulls:][:3]}")
            nulls = len(stats.null_writes)
        for q, h in sorted(hist.items()):
            want = _bits(h[max(0, len(h) - W + 1):])
            got, rgot = _bits(adapter.read(q)), _bits(ref.read(q))
            if rgot != want:
                out.reference.append(f"{where}: PagedC's read of {q} is not lastWindow(W-1) of the history")
            if got != want:
                out.correctness.append(f"{where}: read of sequence {q} (n={len(h)}): positions "
                                       f"{[g[0] for g in got]}, want {[w[0] for w in want]}"
                                       + ("" if [g[0] for g in got] != [w[0] for w in want] else " (payloads differ)"))
            if hybrid and _bits(adapter.read_full(q)) != _bits(h):
                out.correctness.append(f"{where}: the full-attention group's read of {q} is not its history")
            if check_tables:
                tab = adapter.table(q)
                n_q = len(h)
                released = [(j + 1) * B <= n_q - W + 1 for j in range(len(tab))]
                if len(tab) != -(-n_q // B):
                    out.eff("table_length", f"{where}: table of {q} has {len(tab)} entries for n={n_q}")
                for j, b in enumerate(tab):
                    if b is None and not released[j]:
                        out.correctness.append(f"{where}: block {j} of {q} released while needed (n={n_q})")
                    elif b is not None and released[j]:
                        out.eff("held", f"{where}: block {j} of {q} held past the freeing rule (n={n_q})")
                if sum(b is not None for b in tab) > -(-(W - 1) // B) + 1:
                    out.eff("held_over_bound", f"{where}: {q} holds {sum(b is not None for b in tab)} blocks")
        if out.correctness:
            break
    return out
