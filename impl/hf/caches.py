"""Drive one sliding-window layer of transformers' caches through ``update`` with raw K/V rows.

:class:`LayerDriver` hides the API differences (see :mod:`impl.hf.compat`):

* ``layers`` API (5.x): a one-layer ``DynamicCache(config=...)`` /
  ``StaticCache(config=..., max_cache_len=...)`` built from a ``MistralConfig``
  with ``sliding_window=W``; its ``layers[0]`` is a ``DynamicSlidingWindowLayer`` /
  ``StaticSlidingWindowLayer``. Updated with ``cache.update(k, v, 0)``.
* ``legacy`` API (4.45): ``DynamicCache()`` (no eviction), and layer 0 of a
  ``HybridCache`` (a sliding layer; ``SlidingWindowCache`` shares its update
  code but its ``__init__`` is broken in 4.45.2 — it calls ``super().__init__()``
  without a config, cache_utils.py line 1278). Updated with
  ``cache.update(k, v, 0, {"cache_position": ..., "sliding_window": W})``.

Rows are ``[k, width]`` float64 arrays (one batch, one KV head); what comes
back is numpy too. ``window_shift`` builds the HF object with window
``W + shift`` while the caller checks against ``W``: the adapter bug of
converting a window convention wrongly (the shift-by-one mutant).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from impl.hf import compat, conventions

#: Static buffers are allocated for this many positions (>= any window the targets use),
#: so the sliding layer's buffer is ``min(W, MAX_CACHE_LEN) = W`` slots.
MAX_CACHE_LEN = 4096


def _torch():
    import torch

    return torch


def tiny_mistral_config(window: int, width: int, layers: int = 1) -> Any:
    from transformers import MistralConfig

    return MistralConfig(vocab_size=8, hidden_size=width, intermediate_size=8, num_hidden_layers=layers,
                         num_attention_heads=1, num_key_value_heads=1, head_dim=width, sliding_window=window)


def tiny_gemma2_config(window: int, width: int) -> Any:
    from transformers import Gemma2Config

    return Gemma2Config(vocab_size=8, hidden_size=width, intermediate_size=8, num_hidden_layers=2,
                        num_attention_heads=1, num_key_value_heads=1, head_dim=width, sliding_window=window)


class LayerDriver:
    """One sliding layer of kind ``"dynamic"`` or ``"static"`` with window ``W``."""

    def __init__(self, kind: str, window: int, width: int, *, window_shift: int = 0,
                 layer_class: Optional[type] = None):
        if kind not in ("dynamic", "static"):
            raise ValueError(f"kind must be 'dynamic' or 'static', got {kind!r}")
        self.kind, self.window, self.width = kind, window, width
        self.hf_window = window + window_shift
        self.layer_class = layer_class
        self.info = compat.info()
        self.n = 0
        self._build()

    # -- construction / reset

    def _build(self) -> None:
        w = self.hf_window
        if self.info.api == "layers":
            cfg = tiny_mistral_config(w, self.width)
            if self.kind == "dynamic":
                self.cache = compat.dynamic_cache(cfg)
            else:
                self.cache = compat.static_sliding_cache(cfg, MAX_CACHE_LEN, _torch().float64)
            if self.layer_class is not None:
                old = self.cache.layers[0]
                kw = {"sliding_window": w} if self.kind == "dynamic" else {"sliding_window": w,
                                                                            "max_cache_len": MAX_CACHE_LEN}
                self.cache.layers[0] = self.layer_class(**kw)
                assert isinstance(self.cache.layers[0], type(old))
            self.layer = self.cache.layers[0]
        else:
            if self.kind == "dynamic":
                self.cache = compat.dynamic_cache()
            else:
                self.cache = compat.static_sliding_cache(tiny_gemma2_config(w, self.width), MAX_CACHE_LEN,
                                                         _torch().float64)
            self.layer = None
        self.n = 0

    def reset(self) -> None:
        """Start a new stream on the same object through HF's own ``reset`` where it has one."""
        if hasattr(self.cache, "reset") and not (self.info.api == "legacy" and self.kind == "dynamic"):
            self.cache.reset()
            self.n = 0
        else:
            self._build()

    # -- update and read back

    def mask_rows(self, k: int) -> Optional[list[int]]:
        """Rows ``get_mask_sizes`` advertises for the next ``k`` tokens (``layers`` API only), as positions."""
        if self.layer is None:
            return None
        sizes = compat.mask_sizes(self.layer, self.n, k)
        if sizes is None:
            return None
        length, offset = sizes
        return list(range(offset, offset + length))

    def update(self, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        torch = _torch()
        k = keys.shape[0]
        kt = torch.as_tensor(keys, dtype=torch.float64).reshape(1, 1, k, self.width)
        vt = torch.as_tensor(values, dtype=torch.float64).reshape(1, 1, k, self.width)
        if compat.update_takes_cache_kwargs(self.cache):
            # Up to 5.0 static layers place rows by cache_position (without it, at 0 .. k-1) and 4.45's
            # HybridCache reads sliding_window from here; later releases take neither.
            kwargs = {"cache_position": torch.arange(self.n, self.n + k), "sliding_window": self.hf_window}
            rk, rv = self.cache.update(kt, vt, 0, kwargs)
        else:
            rk, rv = self.cache.update(kt, vt, 0)
        self.n += k
        return _rows(rk), _rows(rv)

    def stored(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows the sliding layer holds (none where it holds no tensor: before the first update,
        or after a ``reset`` that drops them; a ``reset`` that zeroes them leaves zero rows)."""
        kv = compat.layer_kv(self.cache, 0)
        if kv is None:
            return np.zeros((0, self.width)), np.zeros((0, self.width))
        return _rows(kv[0]), _rows(kv[1])

    # -- conventions

    def convention(self, n: int, k: int) -> tuple[conventions.Positions, conventions.Positions]:
        """The pinned ``(returned, stored)`` positions for this API and kind (uses the *spec* window)."""
        fn = {
            ("layers", "dynamic"): conventions.dynamic_layer,
            ("layers", "static"): conventions.static_layer,
            ("legacy", "dynamic"): conventions.legacy_dynamic,
            ("legacy", "static"): conventions.legacy_static,
        }[(self.info.api, self.kind)]
        return fn(n, k, self.window)

    def expected_mask_rows(self, n: int, k: int) -> Optional[list[int]]:
        if self.info.api != "layers":
            return None
        if self.kind == "dynamic":
            return conventions.dynamic_layer_mask_rows(n, k, self.window)
        off, length = conventions.static_layer_mask_rows(n, k, self.window)
        return list(range(off, off + length))


def _rows(t: Any) -> np.ndarray:
    """``[1, 1, rows, width]`` tensor -> ``[rows, width]`` float64 array."""
    a = t.detach().cpu().to(dtype=_torch().float64).numpy()
    return a.reshape(-1, a.shape[-1])


def decode_rows(keys: np.ndarray, values: np.ndarray, table: dict[tuple, int]) -> list[Any]:
    """Map rows back to positions: ``table`` maps a key row to its position; an all-zero row is
    ``None`` (an unfilled static slot); a row whose key and value disagree, or that matches no
    entry, is ``"garbage"`` (e.g. two entries summed into one slot)."""
    out: list[Any] = []
    for kr, vr in zip(keys, values):
        if not kr.any() and not vr.any():
            out.append(None)
            continue
        pos = table.get(tuple(kr.tolist()))
        vpos = table.get(("v",) + tuple(vr.tolist()))
        out.append(pos if pos is not None and pos == vpos else "garbage")
    return out


def probe(kind: str, width: int = 4) -> None:
    """Exercise :class:`LayerDriver` of ``kind`` once on the installed release — build, a prefill
    longer than the window, a decode step, read back, ``get_mask_sizes``, ``reset``, one more step —
    and raise :class:`compat.HFIncompatible` naming the release and the call that failed.

    The ops are the ones every release handles correctly (prefill ``> W`` then single tokens), and
    only the calls' success and the shapes they return are checked, never the positions: a wrong
    value is the campaign's finding to report, not a harness fault."""
    step = "LayerDriver(...)"
    try:
        drv = LayerDriver(kind, 3, width)
        for k in (4, 1):
            step = f"get_mask_sizes (query of {k} after {drv.n})"
            drv.mask_rows(k)
            step = f"update({k} rows after {drv.n})"
            keys = np.arange(k * width, dtype=np.float64).reshape(k, width) + 1.0
            rk, rv = drv.update(keys, -keys)
            if rk.shape != rv.shape or rk.shape[1] != width or rk.shape[0] < k:
                raise compat.incompatible(f"{type(drv.cache).__name__}.update",
                                          f"returned rows of shape {rk.shape} / {rv.shape} for {k} new rows")
            step = "reading the stored rows"
            drv.stored()
        step = "reset()"
        drv.reset()
        drv.stored()
        step = "update(1 row) after reset()"
        drv.update(np.ones((1, width)), -np.ones((1, width)))
        drv.stored()
    except compat.HFIncompatible:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of a supported op is an API the adapter cannot drive
        raise compat.incompatible(f"{kind} sliding cache: {step}", f"{type(e).__name__}: {e}") from e
