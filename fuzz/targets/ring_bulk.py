"""Bulk mode: long streams checked step by step through ``ringkv_trace``, a block per FFI call.

The stateful targets compare ``contents()`` after each op — exact, but one
Python round trip per op. Here the C ring pushes a whole block and reports,
after every push, the positions of its window and a checksum of the stored
payloads (``csrc/ringkv.h``); numpy checks each row against the bulk mirror
``pyspec.bulk.window_positions`` and each checksum against the same formula
applied to the payloads that were pushed. Every step is checked, at C speed.

Any ``ringkv.h`` library runs it (``backend=``, or a ``ring=`` built on one), and
every campaign of a C target runs a bulk phase (:func:`bulk_phase`): one trace
per stream, windows drawn as the strategies draw them, at least
:data:`BULK_TOKENS` tokens, one stream crossing positions 2**15 and 2**16 (2**31
with ``--long``). Payloads are :func:`fuzz.oracle.payloads`' (the op loop's), so
a bulk failure is reduced to an ordinary op list (:func:`reduce_bulk_failure`:
``push x n`` at the smallest window and step that fail) and saved as a seed that
replays on every target. The op loop itself uses the same checks for a run of
pushes (:func:`check_traced_pushes`) and for ``ringkv_checksum`` after each op
(:func:`spec_checksum`).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from fuzz.ops import Case, Chunk, Push
from fuzz.oracle import SpecStream, describe_difference, history_table, payloads
from fuzz.targets.base import HARNESS, Crash, HarnessFault, rebuild, crash_from, failure_kind
from fuzz.targets.progress import DONE, OP, POS, RUN, UNWRITTEN, WINDOW, pushes_written
from pyspec.bulk import PAD, window_positions, window_rows

K1 = np.uint64(0x9E3779B97F4A7C15)
K2 = np.uint64(0xC2B2AE3D27D4EB4F)
M64 = 1 << 64


class BulkMismatch(AssertionError):
    """The ring disagreed with the bulk mirror; the message names the window, the step and both rows.
    ``window`` and ``step`` (the 0-based push, i.e. the position pushed) say where."""

    def __init__(self, message: str, window: int | None = None, step: int | None = None):
        super().__init__(message)
        self.window, self.step = window, step


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


# ---------------------------------------------------------------------------
# Checksums of a spec stream: prefix sums over the payload table


#: ``(epoch, width, dtype) -> (C1, C2)``: ``C1[k] = sum_{p<k} h(p)``, ``C2[k] = sum_{p<k} p h(p)`` (mod 2**64),
#: for the payload tables :func:`fuzz.oracle.history_table` shares; ``_LONG`` holds the last longer one.
_SUMS: dict[tuple[int, int, str], tuple[np.ndarray, np.ndarray]] = {}
_LONG: dict[tuple[int, int, str], tuple[np.ndarray, np.ndarray]] = {}


def _prefix_sums(epoch: int, width: int, dtype: str, rows: int) -> tuple[np.ndarray, np.ndarray]:
    key = (epoch, width, dtype)
    for cache in (_SUMS, _LONG):
        have = cache.get(key)
        if have is not None and have[0].shape[0] > rows:
            return have
    pos, keys, values = history_table(epoch, width, max(rows, 64), dtype)
    h = entry_hashes(keys, values)
    zero = np.zeros(1, np.uint64)
    sums = (np.concatenate([zero, np.cumsum(h, dtype=np.uint64)]),
            np.concatenate([zero, np.cumsum(pos.astype(np.uint64) * h, dtype=np.uint64)]))
    if 0 <= epoch < 64 and pos.shape[0] <= 1 << 16:
        _SUMS[key] = sums
    else:
        _LONG.clear()
        _LONG[key] = sums
    return sums


def window_checksums(epoch: int, width: int, dtype: str, w: int, last: np.ndarray) -> np.ndarray:
    """``uint64[m]``: ringkv.h's checksum of ``lastWindow w`` of stream ``epoch`` after the push of
    each position in ``last`` (int64): ``sum_p (p - s + 1) h(p)`` over ``s = max(0, last - w + 1) .. last``,
    which is ``S2 - s S1 + S1`` for ``S1 = sum h(p)``, ``S2 = sum p h(p)`` (mod 2**64)."""
    c1, c2 = _prefix_sums(epoch, width, dtype, int(last.max(initial=0)) + 1)
    hi = last + 1
    s = np.maximum(hi - w, 0)
    s1 = c1[hi] - c1[s]
    return c2[hi] - c2[s] - s.astype(np.uint64) * s1 + s1


def _window_sum(c1: np.ndarray, c2: np.ndarray, s: int, hi: int) -> int:
    """The checksum of positions ``s .. hi - 1`` from the prefix sums, as a Python int."""
    s1 = int(c1[hi]) - int(c1[s])
    return (int(c2[hi]) - int(c2[s]) - s * s1 + s1) % M64


def spec_checksum(spec: SpecStream) -> int:
    """What ``ringkv_checksum`` must give for the cache ``spec`` holds (0 for an empty one)."""
    n = spec.n
    if n == 0:
        return 0
    c1, c2 = _prefix_sums(spec.epoch, spec.width, spec.dtype, n)
    return _window_sum(c1, c2, max(n - spec.window, 0), n)


#: Runs up to this many pushes are checked row by row in Python (numpy's per-call cost dominates there).
_SHORT_RUN = 4


class TraceRaised(Exception):
    """The ring's trace call raised (a status on valid pushes) after ``step`` of its pushes had written their
    checksums: push ``step`` (0-based) is the one that failed. ``cause`` is what it raised."""

    def __init__(self, step: int, cause: BaseException):
        super().__init__(f"push {step} of the trace: {type(cause).__name__}: {cause}")
        self.step, self.cause = step, cause


def check_traced_pushes(ring: Any, spec: SpecStream, m: int, sums: np.ndarray | None = None) -> tuple[int, str] | None:
    """Push the next ``m`` entries of ``spec`` through one ``ringkv_trace`` and check the window and
    checksum after every push. ``None`` when all agree, else ``(k, why)`` for the ``k``-th push
    (0-based) that disagreed first. ``spec`` is not advanced (the caller applies the ops).

    ``sums`` (at least ``m + 1`` entries) is where the trace writes its checksums, e.g. shared memory a
    supervisor reads after a death (:mod:`fuzz.targets.progress`); it is filled with ``UNWRITTEN`` first,
    so a call that raises says which push failed (:class:`TraceRaised`)."""
    a, w = spec.n, spec.window
    _, keys, values = spec.new_entries(m)
    if sums is None:
        sums = np.empty(m + 1, np.uint64)
    sums[:m] = UNWRITTEN
    try:  # one spare row: a library that writes a row too long cannot reach past the buffer
        rows, sums = ring.trace(keys, values, np.empty((m + 1, w), np.int64), sums)
    except Exception as e:  # noqa: BLE001 - the caller decides whose failure it is
        raise TraceRaised(min(pushes_written(sums, m), m - 1), e) from e
    if m <= _SHORT_RUN:
        c1, c2 = _prefix_sums(spec.epoch, spec.width, spec.dtype, a + m)
        for k, (row, got) in enumerate(zip(rows.tolist(), sums.tolist())):
            p = a + k
            s = max(0, p - w + 1)
            want_row = list(range(s, p + 1)) + [PAD] * (w - (p + 1 - s))  # window_rows' row p, spelled out
            if row != want_row:
                return k, f"ringkv_trace: after the push of position {p}: {_row_diff(rows[k], want_row)}"
            want_sum = _window_sum(c1, c2, s, p + 1)
            if got != want_sum:
                return k, (f"ringkv_trace: after the push of position {p} the checksum is {got:#x}, spec "
                           f"{want_sum:#x} (positions agree: a cached key or value differs from the one pushed)")
        return None
    want = window_rows(a, m, w)
    bad_rows = np.flatnonzero((rows != want).any(axis=1))
    last = np.arange(a, a + m, dtype=np.int64)
    want_sums = window_checksums(spec.epoch, spec.width, spec.dtype, w, last)
    bad_sums = np.flatnonzero(sums != want_sums)
    k = min(int(bad_rows[0]) if bad_rows.size else m, int(bad_sums[0]) if bad_sums.size else m)
    if k == m:
        return None
    if bad_rows.size and bad_rows[0] == k:
        return k, f"ringkv_trace: after the push of position {a + k}: {_row_diff(rows[k], want[k])}"
    return k, (f"ringkv_trace: after the push of position {a + k} the checksum is {int(sums[k]):#x}, "
               f"spec {int(want_sums[k]):#x} (positions agree: a cached key or value differs from the one pushed)")


# ---------------------------------------------------------------------------
# One long stream through the trace, block by block


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
                raise BulkMismatch(f"W={self.w}: after push #{t + 1} (position {t}): {_row_diff(got[i], want)}",
                                   self.w, t)
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


def _row_diff(got: Any, want: Any) -> str:
    """How a trace row differs from the spec's, readable at any window (:func:`fuzz.oracle.describe_difference`)."""
    return describe_difference([int(x) for x in got if x != PAD], [int(x) for x in want if x != PAD],
                               what="window positions")


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
                segments: Iterable[int] | None = None, backend=None, dtype: str = "float32",
                slot=None, shared: np.ndarray | None = None) -> BulkResult:
    """Push ``n`` entries through a ring of window ``w``, checking the window and checksum after
    every push; the full contents (positions and payloads) are compared after the last push.

    ``segments``: lengths of the stretches between which the trace is cut (each is further
    cut into :func:`rows_per_call` calls); default :data:`SEGMENT`. ``ring``: reuse a
    ``CRing`` (it is reset to ``w``); ``backend``: any ``ringkv.h`` library
    (:func:`impl.ring.load_library`) for a new one. Raises :class:`BulkMismatch` at the first
    disagreement.

    Supervised (:mod:`fuzz.targets.progress`), ``slot`` gets the window and each segment's first
    position and length, and the segment's checksums are written into ``shared``, so the supervisor
    can name the push a death or a hang happened at.
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
    if slot is not None:
        slot[WINDOW] = w
    per_call = rows_per_call(w)
    exp = _Expect(w, per_call)
    ffi, lib, handle = ring.c_handle()
    rows_buf = np.empty((per_call + 1, w), dtype=np.int64)  # a spare row for a row written too long
    rows_p = ffi.cast("int64_t *", rows_buf.ctypes.data)
    start = time.perf_counter()
    a = 0
    for m in segments:
        keys, vals = payloads(epoch, np.arange(a, a + m, dtype=np.int64), width, dtype)
        want = exp.checksums(entry_hashes(keys, vals), a)
        tracked = shared is not None and m <= shared.shape[0]
        sums = shared[:m] if tracked else np.empty(m, dtype=np.uint64)
        if tracked:
            sums[:] = UNWRITTEN
        if slot is not None:  # the segment's positions a .. a + m - 1; with its checksums shared when tracked
            slot[POS], slot[RUN] = a, m if tracked else 0
        kp = ffi.cast("float *", keys.ctypes.data)
        vp = ffi.cast("float *", vals.ctypes.data)
        sp = ffi.cast("uint64_t *", sums.ctypes.data)
        for i in range(0, m, per_call):
            k = min(per_call, m - i)
            rc = lib.ringkv_trace(handle, k, kp + i * width, vp + i * width, rows_p, sp + i)
            if rc != 0:
                raise BulkMismatch(f"W={w}: ringkv_trace of {k} entries from position {a + i} failed: "
                                   f"{ffi.string(lib.ringkv_strerror(rc)).decode()} (status {rc})", w, a + i)
            exp.check_rows(rows_buf[:k], a + i)
        if not np.array_equal(sums, want):
            j = int(np.argmax(sums != want))
            raise BulkMismatch(f"W={w}: after push #{a + j + 1} (position {a + j}) the payload checksum is "
                               f"{int(sums[j]):#x}, spec {int(want[j]):#x} (positions agree: a cached key "
                               f"or value differs from the one pushed)", w, a + j)
        a += m
    _check_contents(ring, exp, n, epoch, width, dtype)
    return BulkResult(w, width, n, time.perf_counter() - start)


def _check_contents(ring, exp: _Expect, n: int, epoch: int, width: int, dtype: str) -> None:
    w = exp.w
    pos, keys, vals = ring.read()
    want = exp.row(n - 1) if n else np.zeros(0, np.int64)
    want = want[want != PAD]
    if not np.array_equal(pos, want):
        raise BulkMismatch(f"W={w}: after {n} pushes read(): {_row_diff(pos, want)}", w, max(n - 1, 0))
    wk, wv = payloads(epoch, want, width, dtype)
    if not (np.array_equal(keys, wk) and np.array_equal(vals, wv)):
        raise BulkMismatch(f"W={w}: after {n} pushes read() payloads differ from the pushed ones", w, max(n - 1, 0))


# ---------------------------------------------------------------------------
# The campaign's bulk phase


#: Tokens the bulk phase checks per campaign (at least).
BULK_TOKENS = 100_000
#: The widest window a bulk stream draws: a trace row holds the whole window, so a stream costs ``n x W`` positions
#: (at 4 097 and ~20 k tokens, 80 M: a fraction of a second); larger windows are the cases' and scale tours' (chunks).
BULK_WINDOW_MAX = 4097
#: The position every campaign's first bulk stream passes step by step (2**15 and 2**16 on the way).
CROSS = 1 << 16
#: ``--long``: one more stream past this position.
LONG_CROSS = 1 << 31
#: The longest stream a bulk failure is replayed through the op loop to confirm it: beyond it (only
#: ``--long`` gets there) the seed is the compact ``chunk:N push push``, saved unconfirmed, and replaying it
#: needs memory for N entries (the oracle keeps a stream's history as arrays).
PUSH_SEED_LIMIT = 1 << 20


@dataclass
class BulkPhase:
    """What a campaign's bulk phase checked: ``streams`` as ``(window, tokens)``, and the failure
    (the error and the reduced case) if one stream failed; ``stream`` is that stream."""

    tokens: int = 0
    seconds: float = 0.0
    streams: list[tuple[int, int]] = field(default_factory=list)
    error: BaseException | None = None
    case: Any = None
    stream: tuple[int, int] | None = None


class BulkCrash(Crash):
    """The ring died, aborted or hung in a supervised child during a bulk stream of window ``window``
    (``None``: before the first stream), at the push of position ``step``."""

    def __init__(self, target: str, window: int | None, step: int, detail: str, *, signal: str | None = None):
        super().__init__(target, None, None, detail, signal=signal)
        self.window, self.step = window, step
        where = "before its first stream" if window is None else f"at the push of position {step} (W={window})"
        self.args = (f"{target}: {signal + ' ' if signal else ''}in the bulk phase, {where}: {detail}",)

    def __reduce__(self):
        return rebuild, (type(self), (self.target, self.window, self.step, self.detail), {"signal": self.signal})


def bulk_streams(window_max: int, rng: random.Random, *, long: bool = False,
                 tokens: int = BULK_TOKENS) -> list[tuple[int, int]]:
    """``(window, length)`` of each bulk stream: windows drawn as the strategies draw them
    (:func:`fuzz.strategies.draw_window`); the first stream passes :data:`CROSS` by ``2W + 3``
    (so positions 2**15 and 2**16 are checked step by step), then streams of boundary-biased
    lengths until ``tokens`` are reached; with ``long`` one more passes :data:`LONG_CROSS`."""
    from fuzz.strategies import SMALL_WINDOW, draw_window

    w = draw_window(rng, min(window_max, SMALL_WINDOW))  # the crossing stream: a trace row costs W positions
    out = [(w, CROSS + 2 * w + 3)]
    total = out[0][1]
    while total < tokens:
        w = draw_window(rng, min(window_max, BULK_WINDOW_MAX))
        n = min(tokens - total, rng.choice([4096, 8192, 12288])) + rng.choice([w - 1, w, w + 1, 2 * w + 3])
        out.append((w, n))
        total += n
    if long:
        w = draw_window(rng, min(window_max, 8))
        out.append((w, LONG_CROSS + 2 * w + 3))
    return out


def _segments(w: int, n: int, rng: random.Random) -> list[int]:
    """Trace cuts biased to the window edges, then whole :data:`SEGMENT` blocks."""
    cuts = []
    left = n
    for _ in range(rng.randint(0, 4)):
        c = min(left, rng.choice([0, 1, max(w - 1, 0), w, w + 1, 2 * w + 3, rng.randint(0, 3 * w + 3)]))
        cuts.append(c)
        left -= c
    cuts += [SEGMENT] * (left // SEGMENT) + ([left % SEGMENT] if left % SEGMENT else [])
    return cuts


def run_bulk(target: Any, config: Any, campaign_seed: int) -> BulkPhase:
    """The bulk streams of a campaign (:func:`bulk_streams`) through one ring of ``target`` (a reset between
    streams), every step checked by :func:`check_trace`; unreduced: the first failure is ``error`` (a
    :class:`BulkMismatch` naming window and step, or what the stream raised, as a finding) and ``stream``.
    Supervised, ``target.op_slot`` says which stream, segment and push is running."""
    rng = random.Random(campaign_seed * 0x9E3779B1 + 0xB01C)
    wmax = min(config.window_max, target.window_max or config.window_max)
    out = BulkPhase()
    slot, shared = target.op_slot, target.trace_sums
    try:
        ring = target.new_cache()
    except Exception as e:  # noqa: BLE001
        raise HarnessFault(target.name, f"cannot build the cache: {type(e).__name__}: {e}") from e
    start = time.perf_counter()
    for epoch, (w, n) in enumerate(bulk_streams(wmax, rng, long=getattr(config, "long", False))):
        if slot is not None:
            slot[OP], slot[DONE] = epoch, out.tokens
        try:
            check_trace(w, n, ring=ring, epoch=epoch, segments=_segments(w, n, rng), dtype=target.dtype,
                        slot=slot, shared=shared)
        except BulkMismatch as e:
            out.tokens += e.step or 0
            out.error, out.stream = e, (w, n)
            break
        except Exception as e:  # noqa: BLE001 - a status error on a valid call: the stream is the case
            out.error, out.stream = crash_from(target.name, None, None, e), (w, n)
            break
        out.tokens += n
        out.streams.append((w, n))
    out.seconds = time.perf_counter() - start
    return out


def probe_trace(target: Any, w: int, n: int) -> BaseException | None:
    """How ``n`` pushes into a fresh ring of ``target`` at window ``w`` fail through the trace (a
    :class:`BulkMismatch`, or what the stream raised, as a finding), or ``None`` when every step agrees."""
    try:
        check_trace(w, n, ring=target.new_cache(), dtype=target.dtype, slot=target.op_slot,
                    shared=target.trace_sums)
    except BulkMismatch as e:
        return e
    except Exception as e:  # noqa: BLE001
        return crash_from(target.name, None, None, e)
    return None


def bulk_phase(target: Any, config: Any, campaign_seed: int) -> BulkPhase | None:
    """The bulk phase of a campaign of ``target`` (``None`` for a target without ``ringkv_trace``):
    ``target.bulk`` runs the streams (:func:`run_bulk`; an isolated target runs them in its child,
    where a death becomes a :class:`BulkCrash` naming window and step), then the first failure is
    reduced by :func:`reduce_bulk_failure` to an ordinary op list. ``seconds`` counts both."""
    if not getattr(target, "traced", False):
        return None
    start = time.perf_counter()
    out = target.bulk(config, campaign_seed)
    e = out.error
    if e is not None and failure_kind(e) != HARNESS:
        if getattr(e, "window", None) is not None and getattr(e, "step", None) is not None:
            out.error, out.case = reduce_bulk_failure(target, e)
        elif out.stream is not None:
            w, n = out.stream
            out.case = Case(w, (Push(),) * min(n, PUSH_SEED_LIMIT))
        else:  # died before its first stream: the smallest stream is the case
            out.case = Case(1, (Push(),))
    out.seconds = time.perf_counter() - start
    return out


def reduce_bulk_failure(target: Any, error: BulkMismatch | BulkCrash) -> tuple[BaseException, Any]:
    """An ordinary op list that fails like the bulk stream did, as small as it can be made:
    ``push x (t + 1)`` for the earliest failing step ``t`` at the smallest window that fails the
    same way (tried with fresh rings through ``target.probe_trace``, stream epoch 0: what a case's
    first stream pushes; a crash only by a crash), then, when it is shorter, ``chunk:(t - 1) push
    push`` (the chunk fills the ring, the two pushes reach the failing step through ``ringkv_push``
    and ``ringkv_trace``). The op list is run through the target's op loop, and its own error is
    returned with it; if no op list reproduces the failure (the trace disagreed only after a long
    history of its own), the bulk error is returned with ``push x (t + 1)``, which is still what the
    stream pushed. Past :data:`PUSH_SEED_LIMIT` tokens the compact form is returned unconfirmed."""
    w, t = error.window, error.step
    if w is None or t is None:
        raise error
    kind = failure_kind(error)
    best_w, best_t = w, t
    budget = 16 * (t + 1) + 1_000_000
    for cand in range(1, w):
        if budget <= 0:
            break
        budget -= t + 1
        e = target.probe_trace(cand, t + 1)
        if e is not None and failure_kind(e) == kind and getattr(e, "window", None) == cand \
                and getattr(e, "step", None) is not None:
            best_w, best_t = cand, e.step
            break
    if best_t + 1 > PUSH_SEED_LIMIT:  # only --long gets here: an op list that long is not run in memory
        return error, Case(best_w, (Chunk(best_t - 1), Push(), Push()))
    candidates = []
    if best_t >= 2:
        candidates.append(Case(best_w, (Chunk(best_t - 1), Push(), Push())))
    candidates.append(Case(best_w, (Push(),) * (best_t + 1)))
    for case in candidates:
        try:
            target.run(case)
        except Exception as e:  # noqa: BLE001 - whatever the op loop raises is this case's finding
            if failure_kind(e) != HARNESS:
                return e, case
    return error, candidates[-1]
