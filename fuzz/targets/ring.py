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

from fuzz.ops import Push
from fuzz.oracle import PAYLOAD_WIDTH, SpecStream
from fuzz.targets.base import Mismatch, Target, TargetError
from fuzz.targets.cache import CacheTarget, crash_from
from fuzz.targets.ring_bulk import check_traced_pushes, spec_checksum
from fuzz.targets.ring_errors import CContract


class CRingTarget(CacheTarget):
    """A ``ringkv.h`` library (``backend``; ``None``: the one compiled at install) as a campaign target.

    A run of ``k`` consecutive pushes goes through ``ringkv_push`` for its first push and one
    ``ringkv_trace`` for the other ``k - 1``: every ``push x n`` op list exercises both, and a
    trace failure reduced to ``push x n`` replays through the trace it was found in.
    """

    traced = True

    def __init__(self, name: str, backend: Any = None, *, width: int = PAYLOAD_WIDTH, dtype: str = "float32"):
        super().__init__(name, self.new_cache, width=width, dtype=dtype, errors=CContract())
        self.backend = backend

    def new_cache(self) -> Any:
        from impl.ring import CRing

        return CRing(self.width, backend=self.backend)

    def _push_run(self, raw: Any, cache: Any, spec: SpecStream, ops: tuple, a: int, stats: Any) -> int:
        b = a
        while b < len(ops) and type(ops[b]) is Push:
            b += 1
        m = b - a
        if m == 0:
            return 0
        try:
            failed = check_traced_pushes(raw, spec, m)
        except Exception as e:  # noqa: BLE001 - ringkv_trace failed on valid pushes
            raise crash_from(self.name, a, ops[a], e) from e
        if failed is not None:
            k, why = failed
            raise Mismatch(self.name, a + k, ops[a + k], why)
        phases = stats.phases
        for op in ops[a:b]:
            phases |= spec.apply(op)
        stats.tokens += m
        self._check(raw, cache, spec, b - 1, ops[b - 1])
        return m

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
