"""A preallocated slot ring, written the way inference engines write their sliding-window cache.

This is the *correct* implementation the Python ring mutants are copied from:
each mutant in :mod:`impl.mutants.catalogue` is this file's class source with
exactly one line replaced (a textual edit that fails loudly if the line is
missing), so a mutant is a realistic one-line bug in real code, not a toy.

Layout: ``W`` slots of preallocated arrays (positions, keys, values, zero
filled), a ``head`` (the oldest slot), a ``size`` (filled slots) and ``n``
(tokens seen: the absolute position of the next token). A chunk that fits in
the free slots is written in one pass without the eviction logic (the
prefill fast path engines take); a longer one goes token by token, skipping
the entries older than the window. It implements the
Python target protocol of DESIGN §4, so ``py:impl.mutants.slot_ring:SlotRing``
fuzzes it directly.
"""

from __future__ import annotations

import numpy as np


class SlotRing:
    def __init__(self):
        self.w = self.n = self.head = self.size = 0
        self.pos = self.k = self.v = None

    def reset(self, window):
        if self.pos is None or len(self.pos) != window:
            self.pos = np.zeros(window, dtype=np.int64)  # reuse the buffers when the window is unchanged
            self.k = np.zeros((window, 0), dtype=np.float32)
            self.v = np.zeros((window, 0), dtype=np.float32)
        self.w = window
        self.n = 0
        self.head = 0
        self.size = 0

    def _write(self, slot, p, key, value):
        key = np.asarray(key, dtype=np.float32).reshape(-1)
        if self.k.shape[1] != key.shape[0]:
            self.k = np.zeros((len(self.pos), key.shape[0]), dtype=np.float32)
            self.v = np.zeros((len(self.pos), key.shape[0]), dtype=np.float32)
        self.pos[slot] = p
        self.k[slot] = key
        self.v[slot] = np.asarray(value, dtype=np.float32).reshape(-1)

    def push(self, pos, key, value):
        p = self.n  # the absolute position of the new token, never the cache length
        if self.size < self.w:
            slot = (self.head + self.size) % self.w
            self._write(slot, p, key, value)
            self.size += 1
        else:
            self._write(self.head, p, key, value)
            self.head = (self.head + 1) % self.w
        self.n += 1

    def push_chunk(self, entries):
        entries = list(entries)
        if self.size + len(entries) <= self.w:  # the chunk fits in the free slots: nothing to evict
            for i, (_, key, value) in enumerate(entries):
                self._write((self.head + self.size + i) % self.w, self.n + i, key, value)
            self.size += len(entries)
            self.n += len(entries)
            return
        skip = max(0, len(entries) - self.w)  # entries older than the window never need a slot
        self.n += skip
        for e in entries[skip:]:
            self.push(*e)

    def contents(self):
        out = []
        for i in range(self.size):
            slot = (self.head + i) % self.w
            out.append((int(self.pos[slot]), self.k[slot], self.v[slot]))
        return out
