"""Wrong paged caches the paged checker must catch: one per paged bug class, written in Python.

Each is :class:`impl.mutants.paged_pool.BlockPool` (a correct pool with every optional op) with one
edit (``WRONG``: name -> (old, new)), built by :func:`impl.mutants.paged_mutants.py_paged_class`,
plus :class:`SharedAllocatorPool`, whose pools share one allocator through a class attribute (state
shared between instances). ``expected`` says which outcome the checker must report.
"""

from __future__ import annotations

from impl.mutants.paged_mutants import py_paged_class
from impl.mutants.paged_pool import BlockPool

#: name -> (old text of impl/mutants/paged_pool.py, new text, the outcome kind the checker reports)
WRONG: dict[str, tuple[str, str, str]] = {
    "frees-first-needed": (
        "        return max(0, floor - W + 1) // B",
        "        return max(0, floor - W + 2) // B", "mismatch"),
    "frees-by-cache-length": (
        "        floor = max(s.hw - self.max_rollback, s.base)\n        return max(0, floor - W + 1) // B",
        "        floor = min(s.n, W - 1)\n        return max(0, floor - W + 1) // B", "efficiency"),
    "fork-no-cow": (
        "        elif self.ref[s.table[j]] > 1:  # copy on write: a shared block is never written",
        "        elif False:  # no copy on write", "mismatch"),
    "fork-no-refcount": (
        "        for b in d.table:\n            if b is not None:\n                self.ref[b] += 1",
        "        pass", "mismatch"),
    "stale-table-entry": (
        "                self._release(s.table[jj])\n                s.table[jj] = None",
        "                self._release(s.table[jj])", "mismatch"),
    "hit-skips-first-block": (
        "            if None not in found:\n                break",
        "            if None not in found[1:]:  # the window's first block is not looked at\n"
        "                found = [x for x in found if x is not None]\n                first = L // B - len(found)\n"
        "                break", "mismatch"),
    "hit-ignores-identity": (
        "            prev = self._block_key(prev, identity, np.array([e[0] for e in blk]),",
        "            prev = self._block_key(prev, 0, np.array([e[0] for e in blk]),", "mismatch"),
    "batch-by-longest": (
        "            for seq, pos, key, value in items:\n                self._append(self.seqs[seq], pos, key, value)\n",
        "            top = max(self.seqs[it[0]].n for it in items)\n"
        "            for seq, pos, key, value in items:\n"
        "                self.seqs[seq].hw = max(self.seqs[seq].hw, top + 1)\n"
        "                self._append(self.seqs[seq], pos, key, value)\n", "mismatch"),
}


def wrong(name: str) -> type:
    """The wrong pool ``name`` of :data:`WRONG`, as a class."""
    old, new, _ = WRONG[name]
    return py_paged_class(f"test-{name}", old, new)


class SharedAllocatorPool(BlockPool):
    """Every pool of this class with one configuration shares one allocator (reference counts and free list in a
    class attribute, as a process-wide block manager would): a pool built for the next case starts with the
    blocks the sequences of earlier pools still hold."""

    _allocators: dict = {}

    def configure(self, window: int, block_size: int, num_blocks: int, width: int) -> None:
        super().configure(window, block_size, num_blocks, width)
        key = (window, block_size, num_blocks, width)
        if key not in SharedAllocatorPool._allocators:
            SharedAllocatorPool._allocators[key] = (self.ref, self.free_list)
        self.ref, self.free_list = SharedAllocatorPool._allocators[key]


class NoRollbackBlockPool(BlockPool):
    """BlockPool declaring only fork and admit (the strategies then draw no spec step and no batch call)."""

    paged_ops = ("fork", "admit")


class MinimalPool:
    """A paged pool written apart from BlockPool, with only the protocol's required methods: tables as tuples,
    reads as lists of plain-list payloads, an error class of its own — what a user's cache may look like."""

    class Full(Exception):
        pass

    def configure(self, window, block_size, num_blocks, width):
        self.W, self.B, self.N = window, block_size, num_blocks
        self.slots = {}  # (block, slot) -> (pos, key list, value list)
        self.refs = [0] * num_blocks
        self.free_q = list(range(num_blocks))
        self.tabs, self.n = {}, {}

    def add(self, seq):
        if seq in self.tabs:
            raise KeyError(seq)
        self.tabs[seq], self.n[seq] = [], 0

    def _one(self, seq, pos, key, value):
        if pos != self.n[seq]:
            raise ValueError(pos)
        j, tab = pos // self.B, self.tabs[seq]
        if j == len(tab):
            if not self.free_q:
                raise MinimalPool.Full("no block")
            b = self.free_q.pop(0)
            self.refs[b] = 1
            tab.append(b)
        self.slots[(tab[j], pos % self.B)] = (pos, [float(x) for x in key], [float(x) for x in value])
        self.n[seq] += 1
        for jj in range(len(tab)):
            if tab[jj] is not None and (jj + 1) * self.B <= self.n[seq] - self.W + 1:
                self.refs[tab[jj]] -= 1
                if self.refs[tab[jj]] == 0:
                    self.free_q.append(tab[jj])
                tab[jj] = None

    def append(self, seq, pos, key, value):
        self._one(seq, pos, key, value)

    def append_chunk(self, seq, entries):
        import copy

        saved = copy.deepcopy((self.slots, self.refs, self.free_q, self.tabs, self.n))
        try:
            for e in entries:
                self._one(seq, *e)
        except Exception:
            self.slots, self.refs, self.free_q, self.tabs, self.n = saved
            raise

    def free(self, seq):
        for b in self.tabs.pop(seq):
            if b is not None:
                self.refs[b] -= 1
                if self.refs[b] == 0:
                    self.free_q.append(b)
        del self.n[seq]

    def read(self, seq):
        n = self.n[seq]
        return [self.slots[(self.tabs[seq][q // self.B], q % self.B)] for q in range(max(0, n - self.W + 1), n)]

    def table(self, seq):
        return tuple(self.tabs[seq])

    def free_blocks(self):
        return len(self.free_q)
