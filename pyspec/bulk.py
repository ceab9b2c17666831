"""Bulk mirror: the expected window after *every* push of a stream, at once (numpy).

For a stream of positions ``0..n-1`` and window ``W``, row ``t`` is the cache
after ``t + 1`` pushes: ``positions_last_window(W, t + 1)``, left-aligned,
padded with ``-1``. It is tested against the list mirror (``run``/``step``),
so throughput checking through a C trace call stays tied to the spec.
:func:`last_window` is ``lastWindow`` itself on the rows of an array.
"""

from __future__ import annotations

import numpy as np

PAD = -1


def window_positions(n: int, w: int) -> np.ndarray:
    """``int64[n, w]``: row ``t`` = positions of ``lastWindow w [0..t]``, padded with ``PAD``."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"stream length must be an int >= 0, got {n!r}")
    return window_rows(0, n, w)


def window_rows(first: int, n: int, w: int) -> np.ndarray:
    """``int64[n, w]``: rows ``first .. first + n - 1`` of ``window_positions(first + n, w)``, without
    the rows before them (the window after each push of a run that starts at position ``first``)."""
    if isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 1:
        raise ValueError(f"window must be an int >= 1, got {w!r}")
    if first < 0 or n < 0:
        raise ValueError(f"first position and count must be >= 0, got {first!r} and {n!r}")
    t = np.arange(first, first + n, dtype=np.int64)[:, None]
    length = np.minimum(t + 1, w)             # min w (t + 1) entries after t + 1 pushes
    start = t + 1 - length                    # oldest surviving position
    j = np.arange(w, dtype=np.int64)[None, :]
    return np.where(j < length, start + j, PAD)


def window_lengths(n: int, w: int) -> np.ndarray:
    """``int64[n]``: cache length after each push, ``min w (t + 1)`` (Lean ``lastWindow_length``)."""
    return np.minimum(np.arange(1, n + 1, dtype=np.int64), w)


def last_window(w: int, hs: np.ndarray) -> np.ndarray:
    """Lean ``KVWindow.lastWindow w hs := hs.drop (hs.length - w)`` on the rows of an array: the last
    ``min w n`` rows, as a view (Lean's ``Nat`` subtraction truncates at 0, hence ``max``).

    The array twin of :func:`pyspec.spec.last_window`: the harness keeps a stream's history
    as arrays (positions, keys, values) and reads what a cache must hold with this, once per op.
    """
    if isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 0:
        raise ValueError(f"window must be a natural number (int >= 0), got {w!r}")
    n = hs.shape[0]
    return hs[max(n - w, 0):]
