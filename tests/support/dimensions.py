"""Caches whose bug shows only along one dimension of the contract, for the campaign-dimension tests: each is
right for every single-instance stream of 4-float payloads, the only streams campaigns drew before issue 20.

* :class:`PackedRing` packs each key and value into a fixed 8-float row (an engine's ``head_dim`` baked into
  its layout): a wider payload is cut to its first 8 floats, silently.
* :class:`PooledRing` takes its slot storage from a pool shared by every ring of the same window (a buffer
  cache at module level): two live rings of one window overwrite each other.
"""

from __future__ import annotations

import numpy as np

ROW = 8
_POOL: dict[int, dict[str, np.ndarray]] = {}


class PackedRing:
    def __init__(self):
        self.w = self.n = 0
        self.pos = self.k = self.v = None

    def reset(self, window):
        self.w, self.n = window, 0
        self.pos = np.zeros(window, dtype=np.int64)
        self.k = np.zeros((window, ROW), dtype=np.float32)
        self.v = np.zeros((window, ROW), dtype=np.float32)
        self.width = None

    def push(self, pos, key, value):
        key, value = np.asarray(key, dtype=np.float32), np.asarray(value, dtype=np.float32)
        self.width = key.shape[0]
        s = pos % self.w
        m = min(ROW, key.shape[0])
        self.pos[s], self.k[s, :m], self.v[s, :m] = pos, key[:m], value[:m]
        self.n = pos + 1

    def push_chunk(self, entries):
        for e in entries:
            self.push(*e)

    def contents(self):
        if not self.n:
            return []
        width = self.width or ROW
        pad = max(0, width - ROW)
        out = []
        for p in range(max(0, self.n - self.w), self.n):
            s = p % self.w
            key = np.concatenate([self.k[s, :min(width, ROW)], np.zeros(pad, np.float32)])
            value = np.concatenate([self.v[s, :min(width, ROW)], np.zeros(pad, np.float32)])
            out.append((int(self.pos[s]), key, value))
        return out


class PooledRing:
    def __init__(self):
        self.w = self.n = 0
        self.slots = None

    def reset(self, window):
        self.w, self.n = window, 0
        self.slots = _POOL.setdefault(window, {"pos": np.zeros(window, dtype=np.int64), "kv": {}})

    def push(self, pos, key, value):
        s = pos % self.w
        self.slots["pos"][s] = pos
        self.slots["kv"][s] = (np.array(key, dtype=np.float32), np.array(value, dtype=np.float32))
        self.n = pos + 1

    def push_chunk(self, entries):
        for e in entries:
            self.push(*e)

    def contents(self):
        out = []
        for p in range(max(0, self.n - self.w), self.n):
            s = p % self.w
            k, v = self.slots["kv"][s]
            out.append((int(self.slots["pos"][s]), k, v))
        return out
