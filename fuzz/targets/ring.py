"""The C ring as fuzz targets: ``ring-c`` (compiled at install) and ``c:PATH.so`` (bring your own).

Both are a :class:`CRingTarget`: the op loop and contents check of every cache
(:class:`~fuzz.targets.cache.CacheTarget`) over :class:`impl.ring.CRing`, plus the
rest of ``csrc/ringkv.h`` — ``ringkv_checksum`` after every op, a run of pushes
through ``ringkv_trace`` (every step's window and checksum), every documented
error (:class:`~fuzz.targets.ring_errors.CContract`), and the campaign's bulk
phase (:func:`fuzz.targets.ring_bulk.bulk_phase`). ``c:PATH.so`` only swaps the
backend for a library loaded in cffi ABI mode.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fuzz.config import DTYPES
from fuzz.ops import Push
from fuzz.oracle import PAYLOAD_WIDTH, SpecStream
from fuzz.targets.base import Mismatch, Target, TargetError, crash_from
from fuzz.targets.cache import CacheTarget
from fuzz.targets.progress import OP, RUN
from fuzz.targets.ring_bulk import BulkPhase, TraceRaised, check_traced_pushes, probe_trace, run_bulk, spec_checksum
from fuzz.targets.ring_errors import CContract


class CRingTarget(CacheTarget):
    """A ``ringkv.h`` library (``backend``; ``None``: the one compiled at install) as a campaign target.

    A run of ``k`` consecutive pushes goes through ``ringkv_push`` for its first push and one
    ``ringkv_trace`` for the other ``k - 1``: every ``push x n`` op list exercises both, and a
    trace failure reduced to ``push x n`` replays through the trace it was found in.
    """

    traced = True
    #: ``ringkv.h`` promises independent handles: several threads, each with its own handle, at once.
    thread_safe = True

    def __init__(self, name: str, backend: Any = None, *, width: int = PAYLOAD_WIDTH, dtype: str = "float32"):
        super().__init__(name, self.new_cache, width=width, dtype=dtype, errors=CContract(), dtypes=DTYPES)
        self.backend = backend

    def new_cache(self, width: int | None = None) -> Any:
        """A handle created at ``width`` (default: the target's): every width a case names gets its own."""
        from impl.ring import CRing

        return CRing(width or self.width, backend=self.backend)

    def bulk(self, config: Any, campaign_seed: int) -> BulkPhase:
        """The campaign's bulk streams through this library, unreduced (:func:`fuzz.targets.ring_bulk.run_bulk`)."""
        return run_bulk(self, config, campaign_seed)

    def probe_trace(self, w: int, n: int) -> BaseException | None:
        """How ``n`` pushes at window ``w`` fail through the trace, or ``None``
        (:func:`~fuzz.targets.ring_bulk.probe_trace`)."""
        return probe_trace(self, w, n)

    def _push_run(self, raw: Any, cache: Any, spec: SpecStream, ops: tuple, a: int, stats: Any) -> int:
        """Pushes ``a .. b-1`` (the run after a push) through ``ringkv_trace``, every step checked. Supervised,
        the trace writes its checksums into the shared :attr:`trace_sums` and the slot says which ops it
        covers, so a death inside it names the push that was running (:mod:`fuzz.targets.progress`); a
        run longer than that buffer is traced in pieces."""
        b = a
        while b < len(ops) and type(ops[b]) is Push:
            b += 1
        if b == a:
            return 0
        slot, shared = self.op_slot, self.trace_sums
        piece = b - a if shared is None else shared.shape[0] - 1
        phases = stats.phases
        for p in range(a, b, piece):
            m = min(piece, b - p)
            if slot is not None:
                slot[OP], slot[RUN] = p, m
            try:
                failed = check_traced_pushes(raw, spec, m, None if shared is None else shared[:m + 1])
            except TraceRaised as e:  # ringkv_trace failed on valid pushes
                raise crash_from(self.name, p + e.step, ops[p + e.step], e.cause) from e.cause
            if slot is not None:
                slot[RUN] = 0
            if failed is not None:
                k, why = failed
                raise Mismatch(self.name, p + k, ops[p + k], why)
            for op in ops[p:p + m]:
                phases |= spec.apply(op)
        stats.tokens += b - a
        if slot is not None:
            slot[OP] = b - 1
        self._check(raw, cache, spec, b - 1, ops[b - 1])
        return b - a

    def _check(self, raw: Any, cache: Any, spec: SpecStream, i: int, op: Any) -> None:
        super()._check(raw, cache, spec, i, op)
        try:
            got = raw.checksum()
        except Exception as e:  # noqa: BLE001 - ringkv_checksum failed on a valid ring
            raise crash_from(self.name, i, op, e) from e
        want = spec_checksum(spec)
        if got != want:
            raise Mismatch(self.name, i, op, f"ringkv_checksum {got:#x}, spec {want:#x} (the contents read back "
                                             "agree: the checksum of the stored bytes does not)")


def make_ring_c() -> Target:
    """Target ``ring-c``: the library built from ``csrc/ringkv.c`` by ``pip install``."""
    from impl.ring import api_backend

    return CRingTarget("ring-c", api_backend())


def make_c_library(path: str) -> Target:
    """Target ``c:PATH``: any shared library implementing ``csrc/ringkv.h``.

    Raises :class:`~fuzz.targets.base.TargetError` (a usage error) naming the path and,
    when a function is missing, the symbol."""
    from impl.ring import LibraryError, load_library

    if not path:
        raise TargetError("c:PATH: give the path of a shared library, e.g. c:csrc/build/libringkv.so")
    p = Path(path)
    if not p.exists():
        raise TargetError(f"c:{path}: no such file")
    if not p.is_file():
        raise TargetError(f"c:{path}: not a file")
    # dlopen searches the library path for a name without a slash (and Path drops a leading "./"):
    # the absolute path loads exactly the file that was named.
    where = os.path.abspath(path)
    try:
        backend = load_library(where)
    except LibraryError as e:
        raise TargetError(f"c:{path}: {e}") from e
    return CRingTarget(f"c:{path}", backend)
