"""mlx-lm's rotating KV caches, driven the way its model files drive them (``mlx[cpu]`` on Linux).

A sliding layer of an mlx-lm model does, per forward call of ``N`` tokens
(``mlx_lm/models/gemma3_text.py``, ``Gemma3Model.__call__`` and ``Attention.__call__``):

1. ``mask = create_attention_mask(h, cache, window_size=sliding_window)`` — *before* the cache is
   updated (``mlx_lm.models.base``; it asks ``cache.make_mask(N, window_size=...)`` where the cache has one);
2. ``keys, values = cache.update_and_fetch(keys, values)`` (``[B, Hkv, N, D]``, RoPE already applied);
3. ``scaled_dot_product_attention(queries, keys, values, cache=cache, scale=..., mask=mask)``.

:class:`Stepper` is exactly that, one call per op. The window convention (DESIGN §6), one rule for
every release: the spec's ``W`` is ``RotatingKVCache(max_size=W)`` and ``window_size=W``, as the model
files build a sliding layer from an HF config's ``sliding_window = W``: ``gemma3_text.py``
``Model.make_cache``: ``RotatingKVCache(max_size=self.args.sliding_window, keep=0)``; ``llama.py``
``Model.make_cache``: ``RotatingKVCache(max_size=self.model.sliding_window) if layer.use_sliding``; the mask
``create_attention_mask(h, cache[...], window_size=self.sliding_window)`` beside it. Attention sinks:
``make_prompt_cache(model, max_kv_size)`` builds ``RotatingKVCache(max_size=max_kv_size, keep=4)``
(``mlx_lm/models/cache.py``) for a model without ``make_cache`` and masks with no window — the spec's
``sinkWindow keep max_size``.

Feature detection looks at signatures and attributes (``make_mask``, ``window_size`` of
``create_attention_mask``, ``BatchRotatingKVCache.prepare``/``finalize``/``extract``), never version numbers.

Releases whose ``create_attention_mask(h, cache=None, return_array=False)`` takes no window (mlx-lm 0.26, 0.27)
are driven as their own model files drive a sliding layer (0.27.1 ``gemma3_text.py``, ``Gemma3Model.__call__``:
``sliding_window_mask = create_attention_mask(h, cache)`` with ``cache`` the model's list of layer caches, whose
first is a sliding layer's ``RotatingKVCache``; the helper reads the window from ``cache[0].max_size``; then
``Attention.__call__``: ``if isinstance(mask, mx.array) and mask.shape[-1] != keys.shape[-2]: mask = mask[...,
-keys.shape[-2]:]``). The mapping is the same (``max_size = W``); a mask window other than ``max_size`` (the
``wide`` view) cannot be asked for there (:attr:`Features.mask_window`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence

import numpy as np

from impl.engines import EngineIncompatible, installed

DIST, EXTRA = "mlx-lm", "mlx"
#: How an unavailable target says the installed release lacks the class altogether (the matrix writes n/a).
LACKS = "the release has no"
HEADS, KV_HEADS, DIM = 2, 1, 8


def rotating_max_size(window: int) -> int:
    """The spec's ``W`` as ``RotatingKVCache(max_size=...)`` (mlx-lm's model files: ``max_size=sliding_window``)."""
    return int(window)


def mask_window_size(window: int) -> int:
    """The spec's ``W`` as ``create_attention_mask(..., window_size=...)`` (the model files: ``sliding_window``)."""
    return int(window)


def release() -> str:
    rel = installed(DIST, EXTRA)
    installed("mlx", EXTRA)
    return rel


@dataclass(frozen=True)
class Features:
    release: str
    mlx: str
    #: ``create_attention_mask`` takes ``window_size``; else it takes the list of layer caches and reads the
    #: window from the first one's ``max_size`` (mlx-lm 0.26, 0.27: module docstring).
    mask_window: bool
    #: ``BatchRotatingKVCache`` exists.
    batch: bool
    #: ``BatchRotatingKVCache.prepare(lengths=, right_padding=)`` and ``finalize()``: right-padded prompts.
    right_padding: bool
    #: ``BatchRotatingKVCache.extract(i)``: a row as a single cache (contents of a batch row).
    extract: bool


@lru_cache(maxsize=1)
def features() -> Features:
    from importlib import metadata

    rel = release()
    try:
        from mlx_lm.models import base, cache
    except Exception as e:  # noqa: BLE001 - an install whose modules do not import
        raise EngineIncompatible("mlx-lm", rel, "mlx_lm.models.cache", f"{type(e).__name__}: {e}") from e
    if not hasattr(cache, "RotatingKVCache") or "keep" not in inspect.signature(cache.RotatingKVCache).parameters:
        raise EngineIncompatible("mlx-lm", rel, "RotatingKVCache(max_size, keep)", "no such class or parameter")
    params = inspect.signature(base.create_attention_mask).parameters
    mask_window = "window_size" in params
    if not mask_window and list(params)[:2] != ["h", "cache"]:
        raise EngineIncompatible("mlx-lm", rel, "create_attention_mask(h, cache, ...)",
                                 f"an unknown signature {tuple(params)}")
    b = getattr(cache, "BatchRotatingKVCache", None)
    right = b is not None and hasattr(b, "prepare") and hasattr(b, "finalize") and \
        "right_padding" in inspect.signature(b.prepare).parameters
    return Features(rel, metadata.version("mlx"), mask_window, b is not None, right,
                    b is not None and hasattr(b, "extract"))


def _sdpa(q, k, v, cache, scale, mask):
    from mlx_lm.models import base

    if hasattr(base, "scaled_dot_product_attention"):
        return base.scaled_dot_product_attention(q, k, v, cache=cache, scale=scale, mask=mask)
    import mlx.core as mx

    return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)


class Stepper:
    """One sliding layer's cache and attention, called as a model calls it (module docstring)."""

    def __init__(self, cache, window_size: Optional[int]):
        self.cache, self.window_size = cache, window_size

    def step(self, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``q [B, N, H, D]``, ``k, v [B, N, Hkv, D]`` (float32) -> attention output ``[B, N, H, D]``."""
        return evaluate(self.step_lazy(q, k, v))[0]

    def step_lazy(self, q: np.ndarray, k: np.ndarray, v: np.ndarray):
        """:meth:`step` as mlx's lazy ``[B, H, N, D]`` array: evaluate it with :func:`evaluate` together with
        whatever else is read after the step (one graph evaluation instead of one per array)."""
        import mlx.core as mx
        from mlx_lm.models import base

        B, N = q.shape[:2]
        h = mx.zeros((B, N, 1), mx.float32)
        listed = not features().mask_window  # mlx-lm 0.26/0.27: the helper takes the layer caches' list
        if listed:  # ... and reads the window from the cache's max_size (a window_size here has no say)
            mask = base.create_attention_mask(h, [self.cache])
        elif self.window_size is None:
            mask = base.create_attention_mask(h, self.cache)
        else:
            mask = base.create_attention_mask(h, self.cache, window_size=self.window_size)
        t = lambda x: mx.array(np.ascontiguousarray(np.transpose(x, (0, 2, 1, 3))))  # noqa: E731 [B,heads,N,D]
        keys, values = self.cache.update_and_fetch(t(k), t(v))
        if listed and isinstance(mask, mx.array) and mask.shape[-1] != keys.shape[-2]:
            mask = mask[..., -keys.shape[-2]:]  # what those releases' Attention.__call__ does
        return _sdpa(t(q), keys, values, self.cache, DIM ** -0.5, mask)


def evaluate(*arrays):
    """Evaluate mlx's lazy arrays in one ``mx.eval`` (``None`` passes through); returns them as numpy
    ``[B, N, heads, D]`` (``[B, heads, N, D]`` transposed back)."""
    import mlx.core as mx

    live = [a for a in arrays if a is not None]
    if live:
        mx.eval(*live)
    return [None if a is None else np.transpose(np.array(a, copy=False), (0, 2, 1, 3)) for a in arrays]


def rotating(window: int, *, keep: int = 0, extra: int = 0, masked: bool = True) -> Stepper:
    """``RotatingKVCache(max_size=W + extra, keep=keep)`` masked with ``window_size=W`` (``masked=False``:
    no window passed, as a full-attention model under ``max_kv_size`` masks)."""
    from mlx_lm.models.cache import RotatingKVCache

    return Stepper(RotatingKVCache(max_size=rotating_max_size(window) + extra, keep=keep),
                   mask_window_size(window) if masked else None)


def batch_rotating(window: int, left_padding: Sequence[int]) -> Stepper:
    from mlx_lm.models.cache import BatchRotatingKVCache

    return Stepper(BatchRotatingKVCache(rotating_max_size(window), list(left_padding)), mask_window_size(window))


def temporal_keys(cache) -> np.ndarray:
    """A ``RotatingKVCache``'s keys in temporal order (sinks first), ``[L, Hkv, D]`` of batch row 0."""
    return keys_of(evaluate(temporal_keys_lazy(cache))[0])


def temporal_keys_lazy(cache):
    """:func:`temporal_keys` unevaluated (``[1, Hkv, L, D]`` in mlx; ``None`` for an empty cache)."""
    if cache.keys is None:
        return None
    k = cache._temporal_order(cache.keys)
    if cache.offset < k.shape[2]:
        k = k[..., : cache.offset, :]
    return k[:1]


def keys_of(evaluated) -> np.ndarray:
    """An evaluated :func:`temporal_keys_lazy` as ``[L, Hkv, D]`` numpy."""
    if evaluated is None:
        return np.zeros((0, KV_HEADS, DIM), np.float32)
    return evaluated[0]


def batch_row_keys(cache, row: int) -> np.ndarray:
    """Batch row ``row`` of a ``BatchRotatingKVCache`` as the release's own ``extract(row)`` returns it."""
    return temporal_keys(cache.extract(row))


def batch_row_keys_lazy(cache, row: int):
    """:func:`batch_row_keys` unevaluated (``extract`` itself evaluates the row's offset and padding)."""
    return temporal_keys_lazy(cache.extract(row))


def plain_probe() -> None:
    """:func:`probe` without the window (``masked=False``: no ``window_size`` passed, as a full-attention model
    under ``max_kv_size`` masks): the second question of a probe that died (:func:`impl.errors.window_probe`)."""
    s = rotating(2, masked=False)
    z = np.zeros((1, 1, HEADS, DIM), np.float32)
    zk = np.zeros((1, 1, KV_HEADS, DIM), np.float32)
    s.step(z, zk, zk)


def probe() -> Features:
    f = features()
    try:
        s = rotating(2)
        z = np.zeros((1, 1, HEADS, DIM), np.float32)
        zk = np.zeros((1, 1, KV_HEADS, DIM), np.float32)
        s.step(z, zk, zk)
    except Exception as e:  # noqa: BLE001 - the release's cache or kernel cannot be called this way
        raise EngineIncompatible("mlx-lm", f.release, "RotatingKVCache.update_and_fetch + scaled_dot_product_attention",
                                 f"{type(e).__name__}: {str(e).splitlines()[0][:200]}") from e
    return f
