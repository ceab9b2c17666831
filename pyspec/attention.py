"""The spec-mask attention reference, vectorised (numpy, float64): what every engine's attention output
is compared with.

Lean ``attention_eq`` and ``chunk_attention_eq`` say that attention over the cache equals attention
over the full history with each key masked by ``inWindow w t p`` (``p <= t < p + w``, DESIGN §1:
the window counts the query itself). This module computes the right-hand side for many queries at
once — the full history, the spec's mask, float64 — so an engine's output can be held to it whatever
its cache did. It never looks at an engine's own window parameter: the window is the spec's ``W``.

Optional parts the engines have: grouped-query attention (``kv_heads`` dividing ``heads``), a
softmax scale, tanh soft-capping of the scores, attention sinks (the first ``sinks`` positions are
always visible, StreamingLLM; Lean ``sinkWindow``), and a per-row key mask (padding: a key that a
row does not have is never attended). The per-query loop of the list mirror
(:func:`pyspec.spec.masked_fold`) is the twin this is tested against.
"""

from __future__ import annotations

from typing import Optional

import numpy as np


def window_mask(q_pos: np.ndarray, k_pos: np.ndarray, window: Optional[int], sinks: int = 0) -> np.ndarray:
    """``bool[Tq, Tk]``: key ``k`` is visible to query ``q`` — causal, and ``inWindow window t p``
    (``window=None``: full attention), or one of the first ``sinks`` positions."""
    t = np.asarray(q_pos, dtype=np.int64)[:, None]
    p = np.asarray(k_pos, dtype=np.int64)[None, :]
    visible = p <= t
    if window is not None:
        if window < 1:
            raise ValueError(f"window must be >= 1 (or None for full attention), got {window!r}")
        visible = visible & ((t < p + window) | (p < sinks))
    return visible


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, q_pos: np.ndarray, k_pos: np.ndarray,
              window: Optional[int], *, scale: Optional[float] = None, softcap: Optional[float] = None,
              sinks: int = 0, key_valid: Optional[np.ndarray] = None) -> np.ndarray:
    """Masked attention in float64.

    ``q``: ``[Tq, H, D]``; ``k``, ``v``: ``[Tk, Hkv, D]`` with ``H % Hkv == 0`` (query head ``h`` reads
    kv head ``h // (H // Hkv)``); positions ``q_pos[Tq]``, ``k_pos[Tk]``; ``key_valid[Tk]`` marks the keys
    that exist (padding is ``False``). Returns ``[Tq, H, Dv]``. A query that sees no key (only possible
    with padding) gets zeros — engines differ there, so callers compare only rows that see a key.
    """
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ValueError(f"q, k, v must be [T, heads, dim], got shapes {q.shape}, {k.shape}, {v.shape}")
    tq, heads, dim = q.shape
    tk, kv_heads, _ = k.shape
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"query heads {heads} must be a multiple of kv heads {kv_heads}")
    scale = dim ** -0.5 if scale is None else scale
    rep = heads // kv_heads
    kk = np.repeat(k, rep, axis=1)  # [Tk, H, D]
    vv = np.repeat(v, rep, axis=1)
    scores = np.einsum("qhd,khd->hqk", q, kk) * scale
    if softcap is not None:
        scores = softcap * np.tanh(scores / softcap)
    mask = window_mask(q_pos, k_pos, window, sinks)
    if key_valid is not None:
        mask = mask & np.asarray(key_valid, dtype=bool)[None, :]
    scores = np.where(mask[None, :, :], scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(mask[None, :, :], np.exp(scores - top), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return np.einsum("hqk,khd->qhd", w, vv)


def visible_counts(q_pos: np.ndarray, k_pos: np.ndarray, window: Optional[int], sinks: int = 0,
                   key_valid: Optional[np.ndarray] = None) -> np.ndarray:
    """``int64[Tq]``: how many keys each query sees (0 marks rows no engine agrees on)."""
    mask = window_mask(q_pos, k_pos, window, sinks)
    if key_valid is not None:
        mask = mask & np.asarray(key_valid, dtype=bool)[None, :]
    return mask.sum(axis=1)
