"""The conventions of transformers' sliding-window caches, pinned from the source, as pure functions.

Every function here answers, for a layer with window ``W`` that has seen
``n`` tokens and is now updated with a chunk of ``k`` tokens (positions
``n .. n+k-1``):

* ``returned`` — the positions of the K/V rows that ``update`` hands to
  attention, in row order (``None`` marks an unfilled, all-zero slot of a
  static buffer, which the attention mask hides);
* ``stored`` — the positions the layer holds afterwards, in row order.

They are plain position arithmetic over ``0 .. n+k-1`` (this adapter imports
neither ``pyspec`` nor ``fuzz``, DESIGN §2); :func:`last` is the tail the
docstrings call ``lastWindow``. The harness (:mod:`fuzz.targets.hf.conventions`)
restates each one with ``pyspec.last_window`` — the cache after ``n`` tokens
is ``lastWindow W history`` (DESIGN §1) — and asserts that both agree.
Line numbers refer to ``transformers/cache_utils.py`` of the release named.

Version-independent requirement (:func:`required_for_attention`): whatever a
layer stores, the rows it returns must contain every key some query of the
chunk attends to, ``max(0, n-W+1) .. n+k-1``; otherwise attention *cannot*
be right, whatever the mask does.
"""

from __future__ import annotations

from typing import Optional

Positions = list[Optional[int]]


def last(w: int, end: int) -> list[int]:
    """Positions ``max(0, end-w) .. end-1``: the last ``min(w, end)`` of ``0 .. end-1`` (``lastWindow w``)."""
    return list(range(max(0, end - w), end))


def required_for_attention(n: int, k: int, window: int) -> list[int]:
    """Keys the queries ``n .. n+k-1`` attend to (union of their windows, DESIGN §1)."""
    return list(range(max(0, n - window + 1), n + k))


# ---------------------------------------------------------------------------
# transformers >= 5 (pinned: 5.24.0), per-layer caches


def dynamic_layer(n: int, k: int, window: int) -> tuple[Positions, Positions]:
    """``DynamicSlidingWindowLayer.update`` (5.24.0, cache_utils.py lines 196-275).

    * Lines 239-247: ``full = cat(stored, chunk)``; the layer keeps
      ``full[:, :, -W + 1:]`` — **``lastWindow (W-1)``** of the history, not ``W``:
      the next query brings its own key, so ``W - 1`` old keys are all it needs.
    * Line 249: it returns ``full``: ``lastWindow (W-1) history ++ chunk``
      (for a single decoded token that is exactly ``lastWindow W``).
    * Lines 261-271, ``get_mask_sizes`` (called before ``update``): offset
      ``max(n - W + 1, 0)``, length ``min(n, W-1) + k`` — the same rows.

    Deviation for ``W = 1`` (finding ``docs/findings/hf-sliding-window-1.md``):
    ``-W + 1 == 0`` and ``full[:, :, 0:]`` keeps *everything*; this function
    states the convention the code intends (``lastWindow 0 = []``).
    """
    returned = last(window - 1, n) + list(range(n, n + k))
    stored = last(window - 1, n + k)
    return returned, stored


def dynamic_layer_mask_rows(n: int, k: int, window: int) -> list[int]:
    """Rows that ``DynamicSlidingWindowLayer.get_mask_sizes(k)`` advertises (5.24.0 lines 261-271)."""
    offset = max(n - window + 1, 0)
    length = (window - 1 + k) if n >= window else (n + k)
    return list(range(offset, offset + length))


def static_layer(n: int, k: int, window: int) -> tuple[Positions, Positions]:
    """``StaticSlidingWindowLayer.update`` (5.24.0, cache_utils.py lines 524-660), with
    ``max_cache_len >= W`` so the buffer has ``M = W`` slots (line 540).

    * Stored (lines 586-620): **``lastWindow W``** of the history, oldest first,
      in the first ``min(n+k, W)`` slots; the rest are zeros (``reset`` zeroes, lines 84-95, 657-659).
    * Returned:
      - full (``n >= W``) and ``k == 1`` (lines 569-585): the buffer after the
        roll, i.e. ``lastWindow W (history ++ [x])``;
      - full and ``k > 1`` (lines 587-590, 620): ``buffer[1:] ++ chunk`` =
        ``lastWindow (W-1) history ++ chunk``;
      - filling up past ``W`` (lines 592-598): ``history ++ chunk`` (everything);
      - still within ``W`` (lines 599-614): the whole ``W``-slot buffer,
        ``history ++ chunk`` then zero slots (``None``), hidden by the mask.
    * ``get_mask_sizes`` (lines 626-642) advertises exactly these rows.

    Deviation for ``k == 0`` once full (finding
    ``docs/findings/hf-static-sliding-empty-update.md``): lines 587-590 build
    ``W - 1`` rows and ``copy_`` them into ``W`` slots (a broadcast for ``W = 2``,
    an error otherwise); this function states the intended no-op.
    """
    hist = list(range(n))
    chunk = list(range(n, n + k))
    total = n + k
    stored: Positions = last(window, total)
    stored = stored + [None] * (window - len(stored))
    if n >= window:
        if k == 1:
            returned: Positions = last(window, total)
        else:
            returned = last(window - 1, n) + chunk
    elif total > window:
        returned = hist + chunk
    else:
        returned = hist + chunk + [None] * (window - total)
    return returned, stored


def static_layer_mask_rows(n: int, k: int, window: int) -> tuple[int, int]:
    """``(offset, length)`` from ``StaticSlidingWindowLayer.get_mask_sizes(k)`` (5.24.0 lines 626-642)."""
    offset = max(n - window + 1, 0)
    if n >= window:
        length = window + k - 1
    elif n + k > window:
        length = n + k
    else:
        length = window
    return offset, length


# ---------------------------------------------------------------------------
# transformers 4.45 (pinned: 4.45.2), whole-model caches


def legacy_dynamic(n: int, k: int, window: int) -> tuple[Positions, Positions]:
    """``DynamicCache.update`` (4.45.2, cache_utils.py lines 397-440): no eviction at all.

    Line 436 concatenates every chunk; the sliding window is applied only by
    the model's attention mask. Stored = returned = the whole history
    (``lastWindow ∞``); the window plays no part in the cache.
    """
    everything: Positions = list(range(n + k))
    return everything, list(everything)


def legacy_static(n: int, k: int, window: int) -> tuple[Positions, Positions]:
    """``HybridCache._sliding_update`` (4.45.2, cache_utils.py lines 1632-1658; the same code as
    ``SlidingWindowCache.update``, lines 1296-1341), buffer of ``W`` slots.

    What the code intends (its comments, lines 1307-1315 and 1226-1233): a chunk
    longer than ``W`` is a *prefill* — it returns the chunk itself and stores its
    last ``W`` rows; otherwise rows are written at ``cache_position`` clamped to
    ``W - 1`` after rolling the buffer by one once position ``W - 1`` is reached,
    so that the buffer holds ``lastWindow W`` with zero slots while not full.
    This function states that intent; where the code does something else
    (``docs/findings/hf-445-sliding-cache.md``), the harness reports it.
    """
    chunk = list(range(n, n + k))
    stored: Positions = last(window, n + k)
    stored = stored + [None] * (window - len(stored))
    if k > window:
        return chunk, stored
    return list(stored), stored
