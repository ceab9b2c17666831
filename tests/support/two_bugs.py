"""Protocol caches with independent bugs: what the distinct-findings tests drive
(``py:tests.support.two_bugs:NAME``; worker processes import them by that name).

Each bug shows in cases the other never reaches first, so a campaign that stops at its first finding
reports one of them; one that keeps going (DESIGN §4, distinct findings) reports both.
"""

from __future__ import annotations

from typing import Any


class ListCache:
    """A correct sliding-window cache over a Python list (the base the bugs below are written into)."""

    def __init__(self) -> None:
        self.window, self.items = 1, []

    def reset(self, window: int) -> None:
        self.window, self.items = window, []

    def keep(self) -> int:
        return self.window

    def push(self, pos: int, key: Any, value: Any) -> None:
        self.items.append((pos, key, value))
        del self.items[:max(0, len(self.items) - self.keep())]

    def push_chunk(self, entries: Any) -> None:
        for e in entries:
            self.push(*e)

    def contents(self) -> list:
        return list(self.items)


class EvictionAndReset(ListCache):
    """Bug 1, at eviction: keeps W + 1 entries once the window is full. Bug 2, on reset: the newest entry of
    the old stream stays readable at the front of the new one until its first push."""

    def __init__(self) -> None:
        super().__init__()
        self.stale = None

    def keep(self) -> int:
        return self.window + 1

    def reset(self, window: int) -> None:
        self.stale = self.items[-1] if self.items else None
        super().reset(window)

    def push(self, pos: int, key: Any, value: Any) -> None:
        self.stale = None
        super().push(pos, key, value)

    def contents(self) -> list:
        return ([self.stale] if self.stale is not None else []) + super().contents()


class EvictionOnly(ListCache):
    """Bug 1 alone: keeps W + 1 entries once the window is full (one bug, hit by every long enough case)."""

    def keep(self) -> int:
        return self.window + 1


class CrashAndEviction(ListCache):
    """Two bugs of two outcome kinds: raises on a chunk of exactly 3 entries (a crash), and keeps W + 1
    entries once the window is full (a mismatch)."""

    def keep(self) -> int:
        return self.window + 1

    def push_chunk(self, entries: Any) -> None:
        entries = list(entries)
        if len(entries) == 3:
            raise IndexError("chunk of 3: slot table overrun")
        super().push_chunk(entries)
