"""transformers' pinned cache conventions, restated from the spec and held to the adapter's statement.

:mod:`impl.hf.conventions` (the adapter) states what each release's sliding
cache returns and stores as plain position arithmetic, with the version,
file and line citations. This module restates every one of them with
``pyspec.last_window`` — the oracle's ``lastWindow`` (DESIGN §1: the cache
after ``n`` tokens is ``lastWindow W history``) — and :func:`check` asserts
that both statements agree, so the relation of every convention to the spec
is checked by the harness rather than assumed by the adapter.

The HF targets (:mod:`fuzz.targets.hf.caches`, :mod:`fuzz.targets.hf.models`) call
:func:`check` for every update they drive; ``tests/test_hf_conventions.py``
runs it over a grid of ``(n, k, W)``.
"""

from __future__ import annotations

from typing import Callable

import pyspec
from impl.hf import conventions as pinned
from impl.hf.conventions import Positions

Convention = Callable[[int, int, int], tuple[Positions, Positions]]


def _padded(window: int, positions: list) -> Positions:
    return positions + [None] * (window - len(positions))


def dynamic_layer(n: int, k: int, window: int) -> tuple[Positions, Positions]:
    """5.x ``DynamicSlidingWindowLayer``: stores ``lastWindow (W-1)``, returns that of the history ++ chunk."""
    returned = pyspec.last_window(window - 1, range(n)) + list(range(n, n + k))
    return returned, pyspec.last_window(window - 1, range(n + k))


def static_layer(n: int, k: int, window: int) -> tuple[Positions, Positions]:
    """5.x ``StaticSlidingWindowLayer`` with ``W`` slots: stores ``lastWindow W`` (zero slots after it)."""
    hist, chunk = list(range(n)), list(range(n, n + k))
    stored = _padded(window, pyspec.last_window(window, range(n + k)))
    if n >= window:
        if k == 1:
            return pyspec.last_window(window, range(n + k)), stored
        return pyspec.last_window(window - 1, hist) + chunk, stored
    if n + k > window:
        return hist + chunk, stored
    return _padded(window, hist + chunk), stored


def legacy_dynamic(n: int, k: int, window: int) -> tuple[Positions, Positions]:
    """4.45 ``DynamicCache``: no eviction, ``lastWindow ∞`` (the whole history) both ways."""
    everything = pyspec.last_window(n + k, range(n + k))
    return everything, list(everything)


def legacy_static(n: int, k: int, window: int) -> tuple[Positions, Positions]:
    """4.45 ``HybridCache`` sliding layer (intended): ``lastWindow W`` padded to ``W`` slots; a chunk
    longer than ``W`` is a prefill that returns itself."""
    stored = _padded(window, pyspec.last_window(window, range(n + k)))
    if k > window:
        return list(range(n, n + k)), stored
    return list(stored), stored


#: (cache API, cache kind) -> (the adapter's pinned statement, the spec-derived restatement).
CONVENTIONS: dict[tuple[str, str], tuple[Convention, Convention]] = {
    ("layers", "dynamic"): (pinned.dynamic_layer, dynamic_layer),
    ("layers", "static"): (pinned.static_layer, static_layer),
    ("legacy", "dynamic"): (pinned.legacy_dynamic, legacy_dynamic),
    ("legacy", "static"): (pinned.legacy_static, legacy_static),
}


class ConventionDrift(AssertionError):
    """The adapter's pinned convention no longer says what the spec-derived restatement says."""


def check(api: str, kind: str, n: int, k: int, window: int) -> tuple[Positions, Positions]:
    """The adapter's ``(returned, stored)`` for ``(api, kind)``, after asserting it equals the spec's."""
    adapter, spec = CONVENTIONS[(api, kind)]
    got, want = adapter(n, k, window), spec(n, k, window)
    if got != want:
        raise ConventionDrift(f"impl.hf.conventions.{adapter.__name__}(n={n}, k={k}, W={window}) = {got}, "
                              f"but restated with pyspec.last_window it is {want}")
    return got
