"""Mirror of ``csrc/pagedkv_index.h``: the paged pool's index math, one function per C twin, same name.

What the C reference pool (``csrc/pagedkv.c``) and the CUDA gather kernel
(``csrc/pagedkv_cuda.cu``) compute about positions and blocks, written in Python's unbounded
integers: window ``w >= 1`` (keys a query attends to, itself included), block size ``b >= 1``,
tokens seen ``n >= 0``. The next query (position ``n``) needs positions
``max(0, n-w+1) .. n-1`` (``lastWindow (w-1)`` of the history); logical block ``j`` holds
positions ``j*b .. j*b+b-1``; the freeing rule releases block ``j`` once ``(j+1)*b <= n-w+1``
(DESIGN §1 "Paged caches", docs/paged.md).

The header's domain is enforced (a bad argument raises naming it), so a caller outside it learns
so here rather than getting a number C would not promise. Standard library only; the tests check
the compiled header against these functions exhaustively on small scopes, and these functions
against the semantics' own wording (brute force over positions and blocks).
"""

from __future__ import annotations

from typing import Sequence

from pyspec.spec import _nat, _tsub


def _pos(name: str, value: int) -> int:
    if _nat(name, value) < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def pkv_logical_block(pos: int, b: int) -> int:
    """Logical block of position ``pos``: ``pos div b``."""
    return _nat("pos", pos) // _pos("block size", b)


def pkv_block_slot(pos: int, b: int) -> int:
    """Slot of position ``pos`` inside its block: ``pos mod b``."""
    return _nat("pos", pos) % _pos("block size", b)


def pkv_table_len(n: int, b: int) -> int:
    """Length of a block table after ``n`` tokens: ``ceil(n / b)``."""
    return -(-_nat("n", n) // _pos("block size", b))


def pkv_first_needed(n: int, w: int) -> int:
    """Oldest position the next query needs: ``max(0, n - (w-1))``."""
    return _tsub(_nat("n", n), _pos("window", w) - 1)


def pkv_needed_len(n: int, w: int) -> int:
    """Positions the next query needs besides itself: ``min(n, w-1)``."""
    return n - pkv_first_needed(n, w)


def pkv_first_kept_block(n: int, w: int, b: int) -> int:
    """First logical block the freeing rule keeps: ``first_needed div b``; every block below it is released."""
    return pkv_first_needed(n, w) // _pos("block size", b)


def pkv_block_released(n: int, w: int, b: int, j: int) -> bool:
    """Whether the freeing rule has released logical block ``j`` after ``n`` tokens."""
    return _nat("j", j) < pkv_first_kept_block(n, w, b)


def pkv_max_blocks(w: int, b: int) -> int:
    """Blocks a sequence may hold at once: ``ceil((w-1)/b) + 1`` (the efficiency bound)."""
    return -(-(_pos("window", w) - 1) // _pos("block size", b)) + 1


def pkv_table_cap(w: int, b: int, num_blocks: int) -> int:
    """Entries of a sequence's live-table ring: ``min(pkv_max_blocks(w, b), num_blocks)``."""
    return min(pkv_max_blocks(w, b), _pos("num_blocks", num_blocks))


def pkv_ring_index(j: int, cap: int) -> int:
    """Where logical block ``j`` lives in a live-table ring of ``cap`` entries: ``j mod cap``."""
    return _nat("j", j) % _pos("cap", cap)


def pkv_starts_block(n: int, b: int) -> bool:
    """Whether the append at position ``n`` starts a new logical block (``n mod b == 0``)."""
    return _nat("n", n) % _pos("block size", b) == 0


def _needed_index(n: int, w: int, i: int) -> int:
    if not 0 <= _nat("i", i) < pkv_needed_len(n, w):
        raise ValueError(f"i must be < the {pkv_needed_len(n, w)} needed entries of n={n}, w={w}; got {i}")
    return pkv_first_needed(n, w) + i


def pkv_gather_live(n: int, w: int, b: int, i: int) -> int:
    """Live-table entry (0 = the first kept block) the ``i``-th needed entry is read through."""
    return pkv_logical_block(_needed_index(n, w, i), b) - pkv_first_kept_block(n, w, b)


def pkv_gather_slot(n: int, w: int, b: int, i: int) -> int:
    """Slot, inside its physical block, of the ``i``-th needed entry."""
    return pkv_block_slot(_needed_index(n, w, i), b)


def pkv_pool_row(p: int, s: int, b: int) -> int:
    """Row of slot ``s`` of physical block ``p`` in a pool laid out ``[N][b][D]``."""
    if not 0 <= _nat("slot", s) < _pos("block size", b):
        raise ValueError(f"slot must be < block size {b}, got {s}")
    return _nat("block", p) * b + s


def pkv_dense_row(q: int, i: int, w: int) -> int:
    """Row of needed entry ``i`` of sequence ``q`` in a dense gather buffer laid out ``[S][w-1][D]``."""
    if not 0 <= _nat("i", i) < _pos("window", w) - 1:
        raise ValueError(f"i must be < w-1 = {w - 1}, got {i}")
    return _nat("q", q) * (w - 1) + i


def pkv_gather_row(n: int, w: int, b: int, live: Sequence[int], i: int) -> int:
    """Pool row dense row ``i`` (``0 <= i < w-1``) of a sequence reads, or ``-1`` past its needed entries."""
    if not 0 <= _nat("i", i) < _pos("window", w) - 1:
        raise ValueError(f"i must be < w-1 = {w - 1}, got {i}")
    if i >= pkv_needed_len(n, w):
        return -1
    return pkv_pool_row(live[pkv_gather_live(n, w, b, i)], pkv_gather_slot(n, w, b, i), b)
