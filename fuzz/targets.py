"""Targets: what a campaign drives, and the check that holds each one to the spec.

A :class:`Target` runs one test case — a window and an op list — and raises
:class:`Mismatch` at the first op after which it disagrees with the oracle.
:class:`CacheTarget` does that for any object implementing the Python target
protocol of DESIGN §4 (``reset``/``push``/``push_chunk``/``contents``), which
is how ``pyring``, ``ring-c``, ``c:PATH.so``, ``py:module:Class`` and the
cache-level third-party adapters are all fuzzed by the same loop.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

import pyspec
from fuzz.ops import PAYLOAD_WIDTH, Op, Push, Reset, SpecStream, format_ops

PROTOCOL_METHODS = ("reset", "push", "push_chunk", "contents")


class Mismatch(AssertionError):
    """The target disagreed with the spec; the message says after which op and how."""

    def __init__(self, target: str, index: int, op: Op | None, detail: str):
        self.target, self.index, self.op, self.detail = target, index, op, detail
        where = "after reset" if op is None else f"after op #{index} ({format_ops([op])})"
        super().__init__(f"{target}: {where}: {detail}")


class TargetUnavailable(RuntimeError):
    """The target cannot run on this machine (missing library, no GPU, ...); says why."""


@dataclass
class RunStats:
    steps: int = 0
    phases: set[str] = field(default_factory=set)


class Target(ABC):
    """One implementation under test. ``name`` is what ``--target`` takes."""

    name: str = "?"
    #: ``cache`` targets compare contents; ``model`` targets also compare logits.
    kind: str = "cache"
    #: The largest window the target accepts (``None``: no limit of its own).
    max_window: int | None = None
    #: Largest stream length per case the campaign should generate (model targets are slower).
    max_tokens: int | None = None

    def accepts(self, window: int, ops: Sequence[Op]) -> str | None:
        """``None`` if the case fits this target, else why not (e.g. a window above ``max_window``)."""
        if self.max_window is None:
            return None
        widest = max([window] + [op.window for op in ops if isinstance(op, Reset)])
        if widest > self.max_window:
            return f"window {widest} exceeds {self.name}'s maximum {self.max_window}"
        return None

    @abstractmethod
    def run(self, window: int, ops: Sequence[Op]) -> RunStats:
        """Drive a fresh stream through ``ops``; raise :class:`Mismatch` on disagreement."""

    def versions(self) -> dict[str, str]:
        """Versions of third-party code this target exercises (for campaign reports)."""
        return {}


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


class PyRing:
    """The pyspec ``Ring`` model as a protocol cache (target ``pyring``).

    Fuzzing it against ``last_window`` is a genuine differential check: the
    ring reads slots ``(head + i) % W`` while the list model drops from the front.
    """

    def __init__(self) -> None:
        self._ring: pyspec.Ring | None = None
        self._next = 0

    def reset(self, window: int) -> None:
        self._ring, self._next = pyspec.Ring.empty(window), 0

    def push(self, pos: int, key: Any, value: Any) -> None:
        if self._ring is None:
            raise RuntimeError("PyRing.push before reset(window)")
        if pos != self._next:
            raise ValueError(f"PyRing.push: position {pos} is not the next position {self._next}")
        self._ring, self._next = self._ring.push((pos, key, value)), self._next + 1

    def push_chunk(self, entries: Any) -> None:
        entries = list(entries)
        for k, e in enumerate(entries):
            if e[0] != self._next + k:
                raise ValueError(f"PyRing.push_chunk: entry {k} has position {e[0]}, expected {self._next + k}")
        for e in entries:
            self.push(*e)

    def contents(self) -> list:
        return [] if self._ring is None else self._ring.to_list()
