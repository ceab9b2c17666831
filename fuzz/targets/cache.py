"""``CacheTarget``: the op loop and contents check for any cache implementing the Python target protocol.

:class:`CacheTarget` drives any object implementing the Python target
protocol of DESIGN §4 (``reset``/``push``/``push_chunk``/``contents``), which
is how ``pyring``, ``ring-c``, ``c:PATH.so``, ``py:module:Class`` and the
cache-level third-party adapters are all fuzzed by the same loop.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import importlib

import numpy as np

from fuzz.ops import PAYLOAD_WIDTH, Op, Push, Reset, SpecStream
from fuzz.targets.base import Mismatch, RunStats, Target, TargetError

PROTOCOL_METHODS = ("reset", "push", "push_chunk", "contents")


def check_protocol(obj: Any, where: str) -> None:
    """Fail with a message naming the missing method of the Python target protocol."""
    missing = [m for m in PROTOCOL_METHODS if not callable(getattr(obj, m, None))]
    if missing:
        raise TypeError(
            f"{where} does not implement the target protocol: missing {', '.join(missing)} "
            f"(needs reset(window), push(pos, key, value), push_chunk(entries), contents())"
        )


def compare_contents(actual: Any, expected: Sequence[tuple], atol: float = 0.0) -> str | None:
    """``None`` when ``actual`` equals ``expected`` entry by entry, else a one-line difference.

    Positions are compared as a list, payloads as two stacked arrays (one numpy
    comparison per op, not one per entry); the entry-by-entry walk that names the
    first differing position runs only once a difference is known.
    """
    try:
        actual = list(actual)
    except TypeError:
        return f"contents() returned {type(actual).__name__}, not a list of (pos, key, value)"
    got = [int(e[0]) for e in actual]
    want = [p for p, _, _ in expected]
    if got != want:
        return f"positions {got} != spec lastWindow {want}"
    if not expected:
        return None
    for idx in (1, 2):
        try:
            g = np.stack([np.asarray(_to_numpy(e[idx]), dtype=np.float64).reshape(-1) for e in actual])
        except ValueError:  # ragged: some entry has another width
            return _first_difference(actual, expected, atol)
        w = np.stack([e[idx] for e in expected]).astype(np.float64)
        if g.shape != w.shape or not _same(g, w, atol):
            return _first_difference(actual, expected, atol)
    return None


def _same(g: np.ndarray, w: np.ndarray, atol: float) -> bool:
    # atol == 0: exact (array_equal is far cheaper than allclose)
    return np.array_equal(g, w) if atol == 0 else np.allclose(g, w, rtol=0.0, atol=atol)


def _first_difference(actual: list, expected: Sequence[tuple], atol: float) -> str:
    for (p, k, v), e in zip(expected, actual):
        for label, want_arr, got_arr in (("key", k, e[1]), ("value", v, e[2])):
            g = np.asarray(_to_numpy(got_arr), dtype=np.float64).reshape(-1)
            w = want_arr.astype(np.float64)
            if g.shape != w.shape or not _same(g, w, atol):
                return f"{label} of position {p}: got {g[:4].tolist()}..., want {w[:4].tolist()}..."
    raise AssertionError("unreachable: the stacked payloads differ but no entry does")


def _to_numpy(x: Any) -> Any:
    if hasattr(x, "detach"):  # torch tensor, without importing torch here
        return x.detach().cpu().numpy()
    return x


class CacheTarget(Target):
    """Fuzz any Python-protocol cache: every op is applied to it and to :class:`SpecStream`,
    and ``contents()`` must equal ``lastWindow W history`` after each one."""

    def __init__(self, name: str, factory: Callable[[], Any], *, width: int = PAYLOAD_WIDTH,
                 max_window: int | None = None, atol: float = 0.0):
        self.name, self.factory, self.width = name, factory, width
        self.max_window, self.atol = max_window, atol

    def run(self, window: int, ops: Sequence[Op]) -> RunStats:
        cache = self.factory()
        spec = SpecStream(window, self.width)
        stats = RunStats()
        cache.reset(window)
        self._check(cache, spec, -1, None)
        for i, op in enumerate(ops):
            if isinstance(op, Reset):
                cache.reset(op.window)
            elif isinstance(op, Push):
                pos, key, value = spec.new_entries(1)[0]
                cache.push(pos, key, value)
            else:
                cache.push_chunk(spec.new_entries(op.n))
            stats.phases |= spec.apply(op)
            stats.steps += op.tokens
            self._check(cache, spec, i, op)
        return stats

    def _check(self, cache: Any, spec: SpecStream, i: int, op: Op | None) -> None:
        diff = compare_contents(cache.contents(), spec.expected(), self.atol)
        if diff is not None:
            raise Mismatch(self.name, i, op, diff)


class AuditedCacheTarget(CacheTarget):
    """:class:`CacheTarget` plus ``cache.audit(spec)`` (a one-line problem or ``None``)."""

    def _check(self, cache: Any, spec: SpecStream, i: int, op: Op | None) -> None:
        super()._check(cache, spec, i, op)
        problem = cache.audit(spec)
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
