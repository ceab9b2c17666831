"""Target ``cuda-index`` (CPU, every machine): the CUDA kernels' index math, fuzzed against pyspec.

:class:`IndexSimRing` simulates the GPU cache in numpy, but every index it uses
comes from ``impl._cudaindex`` — the kernels' ``__host__ __device__`` functions
of ``csrc/ringkv_index.h`` compiled for the host, and the kernels' index loops
(``rkvh_*_plan``). Contents must equal pyspec's ``lastWindow``; in addition,
after every op, the decode kernel's slot set (for several split-K counts) must
be exactly the window of the newest query under the spec's ``inWindow``, no
append may write one slot twice or outside its (sequence, layer), and every
gathered slot's position must match ``rkv_slot_pos``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fuzz.config import DTYPES
from fuzz.oracle import SpecStream
from fuzz.targets.base import Target
from fuzz.targets.cache import AuditedCacheTarget
from impl.errors import Unavailable


#: Simulated batch / layers / KV heads, and which (sequence, layer) the stream drives.
SIM_B, SIM_L, SIM_H = 3, 2, 2
SIM_SEQ, SIM_LAYER = 1, 1
#: Split-K counts whose decode plans are audited after every op.
SIM_SPLITS = (1, 2, 3, 7)


def _index_lib():
    try:
        from impl._cudaindex import ffi, lib
    except ImportError as e:
        raise Unavailable(
            f"impl._cudaindex is not built ({e}); reinstall with `pip install -e .` (needs a C compiler)"
        ) from e
    return ffi, lib


class IndexSimRing:
    """The GPU ring of one (sequence, layer) inside a simulated ``[B][L][H][W][D]`` buffer,
    driven only by the kernels' index routines. Python target protocol (DESIGN §4)."""

    def __init__(self) -> None:
        self.ffi, self.lib = _index_lib()
        self._w: int | None = None
        self._n = 0
        self._d = 0
        self.k = self.v = self.pos = None  # flat row buffers, grown on demand, never cleared
        self._problems: list[str] = []

    # -- protocol
    def reset(self, window: int) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an int >= 1, got {window!r}")
        self._w, self._n = window, 0  # stale rows stay, as on the GPU (reset only zeroes n)

    def push(self, pos: int, key: Any, value: Any) -> None:
        self._append(pos, [(pos, key, value)])

    def push_chunk(self, entries: Any) -> None:
        entries = list(entries)
        self._append(self._n, entries)

    def contents(self) -> list:
        w, n = self._need_window(), self._n
        slots = self.ffi.new("int64_t[]", w)
        filled = int(self.lib.rkvh_gather_plan(n, w, slots))
        out = []
        for i in range(filled):
            rows = [self._row(h, int(slots[i])) for h in range(SIM_H)]
            out.append((int(self.pos[rows[0]]), self.k[rows].reshape(-1).copy(), self.v[rows].reshape(-1).copy()))
        return out

    # -- simulation
    def _need_window(self) -> int:
        if self._w is None:
            raise RuntimeError("IndexSimRing used before reset(window)")
        return self._w

    def _row(self, h: int, slot: int) -> int:
        w = self._need_window()
        row = int(self.lib.rkv_cache_row(SIM_SEQ, SIM_LAYER, h, slot, SIM_L, SIM_H, w))
        total = SIM_B * SIM_L * SIM_H * w
        owner = row // (SIM_H * w) if 0 <= row < total else None
        if owner != SIM_SEQ * SIM_L + SIM_LAYER or not 0 <= slot < w:
            self._problems.append(f"row {row} of head {h} slot {slot} is outside (seq {SIM_SEQ}, "
                                  f"layer {SIM_LAYER}) of a {SIM_B}x{SIM_L}x{SIM_H}x{w} cache")
            row = min(max(row, 0), total - 1)
        return row

    def _ensure(self, width: int) -> None:
        w = self._need_window()
        if width % SIM_H:
            raise ValueError(f"payload width {width} is not a multiple of {SIM_H} KV heads")
        d = width // SIM_H
        rows = SIM_B * SIM_L * SIM_H * w
        if self.k is None or d != self._d:
            self._d = d
            self.k = np.full((rows, d), np.nan, np.float32)
            self.v = np.full((rows, d), np.nan, np.float32)
            self.pos = np.full(rows, -1, np.int64)
        elif rows > len(self.pos):  # grow, keeping the stale rows
            grow = rows - len(self.pos)
            self.k = np.concatenate([self.k, np.full((grow, d), np.nan, np.float32)])
            self.v = np.concatenate([self.v, np.full((grow, d), np.nan, np.float32)])
            self.pos = np.concatenate([self.pos, np.full(grow, -1, np.int64)])

    def _append(self, pos0: int, entries: list) -> None:
        w, n = self._need_window(), self._n
        for j, e in enumerate(entries):
            if int(e[0]) != n + j:
                raise ValueError(f"entry {j} has position {e[0]}, expected {n + j} (positions out of order)")
        k = len(entries)
        if k == 0:
            return
        self._ensure(len(np.asarray(entries[0][1]).reshape(-1)))
        src = self.ffi.new("int64_t[]", k)
        dst = self.ffi.new("int64_t[]", k)
        kept = int(self.lib.rkvh_append_plan(pos0, k, w, src, dst, k))
        if kept > k:
            self._problems.append(f"append plan of a {k}-entry chunk writes {kept} entries")
            kept = k
        plan = [(int(src[i]), int(dst[i])) for i in range(kept)]
        slots = [d for _, d in plan]
        if len(set(slots)) != len(slots):
            self._problems.append(f"append plan writes a slot twice (write race): {plan}")
        # The kernel's threads run in any order; apply the writes last-first so that a
        # duplicate slot would keep the *older* entry and show up in the contents.
        for s, d in reversed(plan):
            if not 0 <= s < k:
                self._problems.append(f"append plan reads chunk entry {s} of {k}")
                continue
            p, key, value = entries[s]
            key = np.asarray(key, np.float32).reshape(SIM_H, -1)
            value = np.asarray(value, np.float32).reshape(SIM_H, -1)
            for h in range(SIM_H):
                row = self._row(h, d)
                self.k[row], self.v[row], self.pos[row] = key[h], value[h], int(p)
        self._n = n + k

    def audit(self, spec: SpecStream) -> str | None:
        """Decode-kernel view, slot positions and write bounds after an op."""
        if self._problems:
            return self._problems[0]
        w, n, lib = self._need_window(), self._n, self.lib
        if n != spec.n:
            return f"tokens seen {n} != spec {spec.n}"
        want = spec.positions()
        length = int(lib.rkv_len(n, w))
        if length != len(want):
            return f"rkv_len({n}, {w}) = {length}, spec window holds {len(want)}"
        for s in range(w):
            valid = bool(lib.rkv_slot_valid(n, w, s))
            if valid != (s < length):
                return f"rkv_slot_valid({n}, {w}, {s}) = {valid}"
            if valid:
                p = int(lib.rkv_slot_pos(n, w, s))
                stored = int(self.pos[self._row(0, s)])
                if p != stored:
                    return f"rkv_slot_pos({n}, {w}, {s}) = {p} but the slot holds position {stored}"
        t = n - 1
        for nsplit in SIM_SPLITS:
            buf = self.ffi.new("int64_t[]", max(w, 1) * 2)
            count = int(lib.rkvh_decode_plan(n, w, nsplit, buf, max(w, 1) * 2))
            slots = [int(buf[i]) for i in range(min(count, max(w, 1) * 2))]
            if count != length or sorted(slots) != list(range(length)):
                return f"decode plan with {nsplit} splits reads slots {slots}, want each of 0..{length - 1} once"
            seen = sorted(int(self.pos[self._row(0, s)]) for s in slots)
            if seen != want:
                return f"decode ({nsplit} splits) attends positions {seen} != spec lastWindow {want}"
            bad = [p for p in seen if not lib.rkv_in_window(w, t, p)]
            if bad:
                return f"decode attends positions {bad} outside the window of query {t}"
        if want and want[0] > 0 and lib.rkv_in_window(w, t, want[0] - 1):
            return f"rkv_in_window({w}, {t}, {want[0] - 1}) is true for an evicted position"
        return None


def make_cuda_index() -> Target:
    """``cuda-index``: the CUDA kernels' index math (host build), fuzzed against pyspec."""
    _index_lib()
    return AuditedCacheTarget("cuda-index", IndexSimRing, width_multiple=SIM_H, dtypes=DTYPES)
