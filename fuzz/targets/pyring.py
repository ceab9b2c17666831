"""Target ``pyring``: pyspec's ring model (``pyspec.Ring``) as a protocol cache."""

from __future__ import annotations

from typing import Any

import pyspec
from fuzz.targets.base import Target
from fuzz.targets.cache import CacheTarget
from fuzz.targets.ring_errors import py_contract_for


class PyRing:
    """The pyspec ``Ring`` model as a protocol cache (target ``pyring``).

    Fuzzing it against ``last_window`` is a genuine differential check: the
    ring reads slots ``(head + i) % W`` while the list model drops from the front.
    A push or chunk at a position other than the next one raises ``ValueError`` before
    anything changes (``validates_positions``: campaigns check it with bad calls).
    """

    validates_positions = True

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


def make_pyring() -> Target:
    return CacheTarget("pyring", PyRing, errors=py_contract_for(PyRing))
