"""``CacheTarget``: the op loop and contents check for any cache, and the one adapter from the tuple
protocol of DESIGN §4 to the arrays the loop runs on.

The loop hands a cache arrays and reads arrays back: the oracle's entries are
slices of :class:`~fuzz.oracle.SpecStream`'s history (positions ``int64[n]``,
keys and values ``float32[n, width]``), a chunk is pushed with one
``push_arrays`` call, and the contents come back from ``read_arrays`` and are
compared with ``lastWindow W history`` by array equality — positions, then
payloads — after every op. The entry that differs is looked for only once a
difference is known.

A cache that speaks only the tuple protocol (``reset``/``push``/``push_chunk``/
``contents``: every ``py:`` class, ``pyring``, the Python mutants) is wrapped in
:class:`TupleCache` at this boundary; :class:`impl.ring.CRing` (``ring-c``, every
``c:`` library) speaks the array protocol itself.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import numpy as np

from fuzz.ops import Case, Op, Push, Reset
from fuzz.oracle import PAYLOAD_WIDTH, SpecStream
from fuzz.targets.base import Crash, HarnessFault, Mismatch, RunStats, Target, TargetError

PROTOCOL_METHODS = ("reset", "push", "push_chunk", "contents")
#: What a cache needs beyond ``reset``/``push`` to be driven with arrays directly.
ARRAY_METHODS = ("push_arrays", "read_arrays")

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


def check_protocol(obj: Any, where: str) -> None:
    """Fail with a message naming the missing method of the Python target protocol."""
    missing = [m for m in PROTOCOL_METHODS if not callable(getattr(obj, m, None))]
    if missing:
        raise TypeError(
            f"{where} does not implement the target protocol: missing {', '.join(missing)} "
            f"(needs reset(window), push(pos, key, value), push_chunk(entries), contents())"
        )


class UnreadableContents(ValueError):
    """``contents()`` returned something that is not a list of ``(pos, key, value)`` of the pushed width."""


class TupleCache:
    """A tuple-protocol cache (DESIGN §4) seen through the array protocol: the one adapter.

    Chunks become lists of ``(pos, key, value)`` with ``int`` positions and 1-D rows;
    ``contents()`` becomes positions ``int64[m]`` and payloads ``float64[m, width]``
    (float64, so a payload that is not exactly what was pushed cannot round onto it).
    """

    def __init__(self, cache: Any, width: int):
        self.cache, self.width = cache, width

    def reset(self, window: int) -> None:
        self.cache.reset(window)

    def push(self, pos: int, key: np.ndarray, value: np.ndarray) -> None:
        self.cache.push(pos, key, value)

    def push_arrays(self, positions: np.ndarray, keys: np.ndarray, values: np.ndarray) -> None:
        self.cache.push_chunk([(p, keys[i], values[i]) for i, p in enumerate(positions.tolist())])

    def read_arrays(self) -> Arrays:
        contents = self.cache.contents()
        try:
            entries = list(contents)
        except TypeError:
            raise UnreadableContents(f"contents() returned {type(contents).__name__}, "
                                     "not a list of (pos, key, value)") from None
        width = self.width
        pos = np.array([int(e[0]) for e in entries], dtype=np.int64)
        rows = []
        for label, idx in (("key", 1), ("value", 2)):
            out = np.empty((len(entries), width), dtype=np.float64)
            for i, e in enumerate(entries):
                x = e[idx]
                if hasattr(x, "detach"):  # a torch tensor, without importing torch here
                    x = x.detach().cpu().numpy()
                row = np.asarray(x, dtype=np.float64).reshape(-1)
                if row.shape[0] != width:
                    raise UnreadableContents(f"{label} of position {int(e[0])} has {row.shape[0]} floats, "
                                             f"the pushed one had {width}")
                out[i] = row
            rows.append(out)
        return pos, rows[0], rows[1]


def array_cache(cache: Any, width: int) -> Any:
    """``cache`` itself when it speaks the array protocol, else wrapped in :class:`TupleCache`."""
    if all(callable(getattr(cache, m, None)) for m in ARRAY_METHODS):
        return cache
    return TupleCache(cache, width)


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    """Array equality: bit for bit when the dtypes agree, by value across dtypes (exact upcast)."""
    if got.shape != want.shape:
        return False
    if got.dtype == want.dtype:
        return got.tobytes() == want.tobytes()
    return bool(np.array_equal(got, want))


def compare_arrays(got: Arrays, want: Arrays) -> str | None:
    """``None`` when the contents ``got`` equal ``want`` (positions, then keys and values), else a
    one-line difference naming the first differing position."""
    gp, gk, gv = got
    wp, wk, wv = want
    if not _same(gp, wp):
        return f"positions {gp.tolist()} != spec lastWindow {wp.tolist()}"
    if _same(gk, wk) and _same(gv, wv):
        return None
    for i, p in enumerate(wp.tolist()):
        for label, g, w in (("key", gk[i], wk[i]), ("value", gv[i], wv[i])):
            if not _same(g, w):
                return f"{label} of position {p}: got {g[:4].tolist()}..., want {w[:4].tolist()}..."
    raise AssertionError("unreachable: the payload arrays differ but no row does")


class CacheTarget(Target):
    """Fuzz any cache: every op is applied to it and to :class:`SpecStream`, and its contents
    must equal ``lastWindow W history`` after each one.

    The outcome boundary of DESIGN §4: an exception raised by a call into the cache
    (``reset``/``push``/``push_arrays``/``read_arrays``) on a spec-valid op is a
    :class:`~fuzz.targets.base.Crash` naming the op; building the cache or anything the
    harness does itself (the oracle, the comparison) that raises is a
    :class:`~fuzz.targets.base.HarnessFault`. Both ``try`` blocks cost nothing until they catch.
    """

    publishes_ops = True

    def __init__(self, name: str, factory: Callable[[], Any], *, width: int = PAYLOAD_WIDTH,
                 window_max: int | None = None):
        self.name, self.factory, self.width = name, factory, width
        self.window_max = window_max

    def run(self, case: Case) -> RunStats:
        try:
            return self._run(case)
        except (Mismatch, Crash, HarnessFault):
            raise
        except Exception as e:  # noqa: BLE001 - not raised by the cache: the harness failed
            raise HarnessFault(self.name, f"{type(e).__name__} in the harness: {e}") from e

    def _run(self, case: Case) -> RunStats:
        try:
            raw = self.factory()
        except Exception as e:  # noqa: BLE001
            raise HarnessFault(self.name, f"cannot build the cache: {type(e).__name__}: {e}") from e
        cache = array_cache(raw, self.width)
        spec = SpecStream(case.window, self.width)
        stats = RunStats()
        phases = stats.phases
        slot = self.op_slot
        try:
            cache.reset(case.window)
            got = cache.read_arrays()
        except UnreadableContents as e:
            raise Mismatch(self.name, -1, None, str(e)) from None
        except Exception as e:  # noqa: BLE001 - the cache raised on a spec-valid op
            raise _crash(self.name, -1, None, e) from e
        self._check(raw, got, spec, -1, None)
        for i, op in enumerate(case.ops):
            if slot is not None:
                slot[1] = i
            kind = type(op)
            entry = None if kind is Reset else spec.next_entry() if kind is Push else spec.new_entries(op.n)
            try:
                if kind is Reset:
                    cache.reset(op.window)
                elif kind is Push:
                    cache.push(*entry)
                else:
                    cache.push_arrays(*entry)
                got = cache.read_arrays()
            except UnreadableContents as e:
                raise Mismatch(self.name, i, op, str(e)) from None
            except Exception as e:  # noqa: BLE001 - the cache raised on a spec-valid op
                raise _crash(self.name, i, op, e) from e
            phases |= spec.apply(op)
            stats.tokens += op.tokens
            self._check(raw, got, spec, i, op)
        return stats

    def _check(self, raw: Any, got: Arrays, spec: SpecStream, i: int, op: Op | None) -> None:
        diff = compare_arrays(got, spec.expected())
        if diff is not None:
            raise Mismatch(self.name, i, op, diff)


def _crash(name: str, i: int, op: Op | None, e: Exception) -> Crash:
    return Crash(name, i, op, f"raised {type(e).__name__}: {e}")


class AuditedCacheTarget(CacheTarget):
    """:class:`CacheTarget` plus ``cache.audit(spec)`` (a one-line problem or ``None``)."""

    def _check(self, raw: Any, got: Arrays, spec: SpecStream, i: int, op: Op | None) -> None:
        super()._check(raw, got, spec, i, op)
        try:
            problem = raw.audit(spec)
        except Exception as e:  # noqa: BLE001 - the audit reads the implementation's own state
            raise _crash(self.name, i, op, e) from e
        if problem is not None:
            raise Mismatch(self.name, i, op, problem)


def make_py_class(path: str) -> Target:
    """``--target py:module.path:ClassName``: the user's class, checked for the protocol's methods now."""
    spec = "py:" + path
    mod, sep, cls = path.rpartition(":")
    if not sep or not mod or not cls:
        raise TargetError(f"{spec}: expected py:module.path:ClassName")
    try:
        module = importlib.import_module(mod)
    except Exception as e:  # noqa: BLE001 - any import failure is the user's to see
        raise TargetError(f"{spec}: cannot import {mod!r}: {type(e).__name__}: {e}") from e
    factory = getattr(module, cls, None)
    if factory is None:
        raise TargetError(f"{spec}: module {mod!r} has no attribute {cls!r}")
    try:
        check_protocol(factory, spec)
    except TypeError as e:
        raise TargetError(str(e)) from e
    return CacheTarget(spec, factory)
