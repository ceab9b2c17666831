"""The C ring's observable state in one tuple, so a test can assert that a refused call changed nothing."""

from __future__ import annotations

from impl import ring as R
from fuzz.oracle import payload


def ring_state(r: R.CRing) -> tuple:
    """Length, next position, window, checksum, and the contents (positions and payload bytes)."""
    pos, k, v = r.read()
    return (len(r), r.next_position(), r.window, r.checksum(), pos.tolist(), k.tobytes(), v.tobytes())


def filled_ring(w: int = 5, n: int = 7, width: int = 4) -> R.CRing:
    """A ring of window ``w`` after ``n`` single pushes of the op loop's payloads."""
    r = R.CRing(width)
    r.reset(w)
    for p in range(n):
        r.push(p, *payload(0, p, width))
    return r
