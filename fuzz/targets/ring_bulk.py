"""Bulk mode: long streams checked step by step through ``ringkv_trace``, a block per FFI call.

The stateful targets compare ``contents()`` after each op — exact, but one
Python round trip per op. Here the C ring pushes a whole block and reports,
after every push, the positions of its window and a checksum of the stored
payloads (``csrc/ringkv.h``); numpy checks each row against the bulk mirror
``pyspec.bulk.window_positions`` and each checksum against the same formula
applied to the payloads that were pushed. Every step is checked, at C speed.

Payloads are :func:`fuzz.oracle.payloads`' (the op loop's), so a
bulk failure replays as an ordinary op list.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from fuzz.oracle import payloads
from pyspec.bulk import PAD, window_positions

K1 = np.uint64(0x9E3779B97F4A7C15)
K2 = np.uint64(0xC2B2AE3D27D4EB4F)


class BulkMismatch(AssertionError):
    """The ring disagreed with the bulk mirror; the message names the window, the step and both rows."""


def entry_hashes(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``uint64[n]``: ringkv.h's ``h(e) = sum_j (2j+1)(K1 kbits_j + K2 vbits_j) mod 2^64`` per row.

    By linearity ``h = K1 * (kbits . c) + K2 * (vbits . c)`` with ``c_j = 2j+1``; for
    width <= 1024 the dot products stay below 2**53, so float64 BLAS computes them exactly.
    """
    width = keys.shape[1]
    c = np.arange(1, 2 * width, 2, dtype=np.uint64)
    if width <= 1024:
        cf = c.astype(np.float64)
        kd = (keys.view(np.uint32).astype(np.float64) @ cf).astype(np.uint64)
        vd = (values.view(np.uint32).astype(np.float64) @ cf).astype(np.uint64)
    else:
        kd = (keys.view(np.uint32).astype(np.uint64) * c).sum(axis=1, dtype=np.uint64)
        vd = (values.view(np.uint32).astype(np.uint64) * c).sum(axis=1, dtype=np.uint64)
    return K1 * kd + K2 * vd


class _Expect:
    """Expected rows and checksums for one stream of window ``w``, fed block by block.

    Rows come from ``window_positions``: the fill phase (``t < w - 1``) row by row,
    and a block of ``rows`` full-window rows starting at step ``t`` as the mirror's
    block starting at step ``w - 1`` plus ``t - w + 1`` — once the window is full the
    mirror's rows are translates (``test_ring_bulk`` checks this identity against
    ``window_positions`` itself), so no ``n x W`` table is ever materialized.
    """

    def __init__(self, w: int, rows: int):
        self.w = w
        self.fill = window_positions(w - 1, w)                       # rows t = 0 .. w-2
        self.steady = np.ascontiguousarray(window_positions(w - 1 + rows, w)[w - 1:])
        self._neq = np.empty((rows, w), dtype=bool)
        self.tail = np.zeros(0, dtype=np.uint64)      # hashes of the last <= w-1 positions

    def row(self, t: int) -> np.ndarray:
        """The expected row after ``t + 1`` pushes."""
        return self.fill[t] if t < self.w - 1 else self.steady[0] + (t - self.w + 1)

    def check_rows(self, rows: np.ndarray, a: int) -> None:
        """``rows[i]`` must be the window after ``a + i + 1`` pushes. Clobbers ``rows``."""
        m, w = rows.shape[0], self.w
        k = max(0, min(m, w - 1 - a))                 # rows still in the fill phase
        if k and not np.array_equal(rows[:k], self.fill[a:a + k]):
            self._fail_rows(rows[:k], a)
        if k < m:
            steady, off = rows[k:], a + k - (w - 1)
            np.subtract(steady, off, out=steady)
            neq = self._neq[:m - k]
            np.not_equal(steady, self.steady[:m - k], out=neq)
            if neq.any():
                np.add(steady, off, out=steady)
                self._fail_rows(steady, a + k)

    def _fail_rows(self, got: np.ndarray, t0: int) -> None:
        for i in range(got.shape[0]):
            want = self.row(t0 + i)
            if not np.array_equal(got[i], want):
                t = t0 + i
                raise BulkMismatch(f"W={self.w}: after push #{t + 1} (position {t}) the window is "
                                   f"{_row(got[i])}, spec lastWindow {_row(want)}")
        raise AssertionError("unreachable: a block failed but no row differs")

    def checksums(self, h: np.ndarray, a: int) -> np.ndarray:
        """Expected checksums after pushes of positions ``a .. a+len(h)-1`` (``h``: their hashes)."""
        w, m = self.w, h.shape[0]
        hs = np.concatenate([self.tail, h])
        base = a - self.tail.shape[0]
        q = np.arange(base, a + m, dtype=np.uint64)
        c1 = np.concatenate([np.zeros(1, np.uint64), np.cumsum(hs, dtype=np.uint64)])
        c2 = np.concatenate([np.zeros(1, np.uint64), np.cumsum(q * hs, dtype=np.uint64)])
        t = np.arange(a, a + m, dtype=np.int64)
        s = np.maximum(t + 1 - w, 0)                  # oldest position in the window
        hi, lo = t - base + 1, s - base
        s1 = c1[hi] - c1[lo]
        s2 = c2[hi] - c2[lo]
        self.tail = hs[max(0, hs.shape[0] - (w - 1)):] if w > 1 else self.tail[:0]
        # sum_p (p - s + 1) h(p) = S2 - s*S1 + S1   (mod 2^64)
        return s2 - s.astype(np.uint64) * s1 + s1


def _row(r: np.ndarray) -> str:
    vals = [int(x) for x in r if x != PAD]
    if len(vals) > 8:
        return f"[{vals[0]}, {vals[1]}, ..., {vals[-2]}, {vals[-1]}] ({len(vals)} entries)"
    return str(vals)


@dataclass
class BulkResult:
    w: int
    width: int
    tokens: int
    seconds: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("inf")


def rows_per_call(w: int) -> int:
    """Rows per ``ringkv_trace`` call: about 512 KiB of positions, so the C writes and
    the numpy check of a block stay in cache."""
    return max(16, min(8192, 65536 // w))


SEGMENT = 16384  # tokens whose payloads and checksums numpy computes at once


def check_trace(w: int, n: int, *, width: int = 16, epoch: int = 0, ring=None,
                 segments: Iterable[int] | None = None, backend=None) -> BulkResult:
    """Push ``n`` entries through a ring of window ``w``, checking the window and checksum after
    every push; the full contents (positions and payloads) are compared after the last push.

    ``segments``: lengths of the stretches between which the trace is cut (each is further
    cut into :func:`rows_per_call` calls); default :data:`SEGMENT`. ``ring``: reuse a
    ``CRing`` (it is reset to ``w``). Raises :class:`BulkMismatch` at the first disagreement.
    """
    from impl.ring import CRing, E_RANGE, CountError

    if ring is None:
        ring = CRing(width, backend=backend)
    width = ring.width
    if segments is None:
        segments = [SEGMENT] * (n // SEGMENT) + ([n % SEGMENT] if n % SEGMENT else [])
    segments = list(segments)
    if sum(segments) != n or any(s < 0 for s in segments):
        raise CountError(f"segments {segments[:8]} must be >= 0 and sum to n={n}", E_RANGE, "check_trace")
    ring.reset(w)
    per_call = rows_per_call(w)
    exp = _Expect(w, per_call)
    ffi, lib, handle = ring.c_handle()
    rows_buf = np.empty((per_call, w), dtype=np.int64)
    rows_p = ffi.cast("int64_t *", rows_buf.ctypes.data)
    start = time.perf_counter()
    a = 0
    for m in segments:
        keys, vals = payloads(epoch, np.arange(a, a + m, dtype=np.int64), width)
        want = exp.checksums(entry_hashes(keys, vals), a)
        sums = np.empty(m, dtype=np.uint64)
        kp = ffi.cast("float *", keys.ctypes.data)
        vp = ffi.cast("float *", vals.ctypes.data)
        sp = ffi.cast("uint64_t *", sums.ctypes.data)
        for i in range(0, m, per_call):
            k = min(per_call, m - i)
            rc = lib.ringkv_trace(handle, k, kp + i * width, vp + i * width, rows_p, sp + i)
            if rc != 0:
                raise BulkMismatch(f"W={w}: ringkv_trace of {k} entries from position {a + i} failed: "
                                   f"{ffi.string(lib.ringkv_strerror(rc)).decode()} (status {rc})")
            exp.check_rows(rows_buf[:k], a + i)
        if not np.array_equal(sums, want):
            j = int(np.argmax(sums != want))
            raise BulkMismatch(f"W={w}: after push #{a + j + 1} (position {a + j}) the payload checksum is "
                               f"{int(sums[j]):#x}, spec {int(want[j]):#x} (positions agree: a cached key "
                               f"or value differs from the one pushed)")
        a += m
    _check_contents(ring, exp, n, epoch, width)
    return BulkResult(w, width, n, time.perf_counter() - start)


def _check_contents(ring, exp: _Expect, n: int, epoch: int, width: int) -> None:
    w = exp.w
    pos, keys, vals = ring.read()
    want = exp.row(n - 1) if n else np.zeros(0, np.int64)
    want = want[want != PAD]
    if not np.array_equal(pos, want):
        raise BulkMismatch(f"W={w}: after {n} pushes read() gives {_row(pos)}, spec {_row(want)}")
    wk, wv = payloads(epoch, want, width)
    if not (np.array_equal(keys, wk) and np.array_equal(vals, wv)):
        raise BulkMismatch(f"W={w}: after {n} pushes read() payloads differ from the pushed ones")
