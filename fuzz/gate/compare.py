"""How two sets of logits are compared: against a tolerance (cached vs ``full()``), and at a claim's level
(candidate vs baseline). One place, so every step judges alike and a report says the same thing twice.

Each comparison returns ``None`` when it holds, else a one-line difference naming the position and the
size ("logits of position 9 differ by 3.1e-01 > 1e-10"). A NaN anywhere is a difference.

Claim levels (seed 000: "what kind of same is being claimed"): ``exact`` — bit-identical logits (two
kernels that reduce in another order are not exact; claim ``logits:TOL``); ``logits:TOL`` — the largest
absolute difference at most ``TOL``; ``greedy`` — the same argmax at every position, where a position
whose baseline top two are within twice the baseline's own tolerance is a genuine tie and either token
is a correct greedy choice; ``task`` — not checked here (needs the user's own evaluation).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from fuzz.gate.config import Claim


def _diff(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    d = np.abs(got - ref)
    return np.where(np.isnan(d), np.inf, d)


def maxdiff(got: np.ndarray, ref: np.ndarray) -> float:
    if got.shape != ref.shape:
        return float("inf")
    return float(_diff(got, ref).max()) if got.size else 0.0


def within(got: np.ndarray, ref: np.ndarray, tol: tuple[float, float], positions: Sequence[int] | None = None,
           what: str = "logits") -> str | None:
    """``|got - ref| <= atol + rtol * |ref|`` row by row (``positions[i]`` names row ``i``)."""
    if got.shape != ref.shape:
        return f"{what}: shape {got.shape} != reference {ref.shape}"
    atol, rtol = tol
    bad = ~(_diff(got, ref) <= atol + rtol * np.abs(ref))
    if not bad.any():
        return None
    rows = bad.reshape(bad.shape[0], -1).any(axis=1) if bad.ndim > 1 else bad
    i = int(np.argmax(rows))
    pos = positions[i] if positions is not None else i
    d = float(_diff(got[i], ref[i]).max())
    bound = f"{atol:g}" + (f" + {rtol:g}*|ref|" if rtol else "")
    return f"{what} of position {pos} differ by {d:.3g} > {bound}"


def agrees(cand: np.ndarray, base: np.ndarray, claim: Claim, base_tol: tuple[float, float],
           positions: Sequence[int] | None = None) -> str | None:
    """Candidate rows against baseline rows at the claim's level (``None`` for a ``task`` claim: not checked)."""
    if cand.shape != base.shape:
        return f"logits shape {cand.shape} != baseline {base.shape}"
    where = (lambda i: positions[i] if positions is not None else i)  # noqa: E731
    if claim.level == "exact":
        same = cand == base  # a NaN is never equal: a difference
        if same.all():
            return None
        rows = ~same.reshape(same.shape[0], -1).all(axis=1)
        i = int(np.argmax(rows))
        return (f"logits of position {where(i)} are not bit-identical (largest difference "
                f"{float(_diff(cand[i], base[i]).max()):.3g})")
    if claim.level == "logits":
        return within(cand, base, (claim.tol, 0.0), positions)
    if claim.level == "greedy":
        c2 = cand.reshape(-1, cand.shape[-1])
        b2 = base.reshape(-1, base.shape[-1])
        ca, ba = np.argmax(c2, axis=-1), np.argmax(b2, axis=-1)
        for i in np.nonzero(ca != ba)[0]:
            top2 = np.sort(b2[i])[-2:]
            if top2[1] - top2[0] <= 2 * (base_tol[0] + base_tol[1] * abs(top2[1])):
                continue  # a genuine tie in the baseline
            return f"greedy token at position {where(int(i))}: candidate {int(ca[i])}, baseline {int(ba[i])}"
        return None
    return None


def greedy_gap(row: np.ndarray) -> float:
    top2 = np.sort(row)[-2:]
    return float(top2[1] - top2[0])
