"""mlx-lm's tiny models as the decoder protocol: what ``kvwindow gate`` drives for ``mlx:<model_type>`` and
``mlx:<model_type>+rotating`` (DESIGN §6: the engine's conventions, §7: the gate).

The model is :func:`impl.engines.mlx_models.tiny` — a seeded Hugging Face model of the family saved as a
model folder (``sliding_window = W``) and loaded by the release's own ``mlx_lm.utils.load_model`` — and
the stream runs the way ``mlx_lm.generate`` runs one: ``model(ids, cache=cache)`` on one prompt cache.

* ``"model"`` (the default): the cache mlx-lm builds for the model, ``make_prompt_cache(model)`` — the
  model's own ``make_cache()`` where it has one (``llama`` with ``layer_types``: a
  ``RotatingKVCache(max_size=W)`` on the sliding layer, a ``KVCache`` on the global one), else a
  ``KVCache`` per layer;
* ``"rotating"``: a ``RotatingKVCache(max_size=W)`` on every layer — a bounded cache a user picks to cap
  memory (what ``make_prompt_cache(model, max_kv_size=W)`` builds for a model without ``make_cache``,
  with ``keep=0``).

``full()`` is the model's own no-cache forward (``cache=None``: the masks mlx-lm builds then). Identity:
weights revision (the seed), the window per layer (the spec's; ``None`` = global), dtype, KV-head map,
head width and RoPE theta; :meth:`MlxSubject.set_identity` changes the weights revision or the window
(it rebuilds the model and **keeps the live cache**, as a caller who reloads a model and keeps its prompt
cache would: mlx-lm's caches record no model identity); the others are reported and cannot be set here.
Extras: ``snapshot`` / ``restore`` (each layer cache's attributes, arrays copied through numpy: an
mlx array is updated in place) and ``kv_bytes``. There is no ``inject``: a position lives in
each layer cache's ``offset``, which is also its write index, so a position fault cannot be built
without also changing what is stored (the two controls that need it are not applicable, with that
reason). Nothing here imports ``fuzz`` or ``pyspec`` (DESIGN §2).
"""

from __future__ import annotations

import copy
from typing import Any, Sequence

import numpy as np

CACHES = ("model", "rotating")
#: Absolute and relative logits tolerance of a cached stream against the no-cache forward (float32 both).
TOLERANCE = (1e-4, 1e-4)


class MlxSubject:
    """One stream of a tiny mlx-lm ``model_type`` model on a ``cache`` ("model" or "rotating")."""

    def __init__(self, model_type: str = "llama", cache: str = "model", *, window: int = 4, seed: int = 0):
        from impl.engines import mlx as engine
        from impl.engines import mlx_models

        if cache not in CACHES:
            raise ValueError(f"cache {cache!r}; known: {', '.join(CACHES)}")
        if model_type not in mlx_models.MODEL_TYPES:
            raise ValueError(f"model type {model_type!r}; known: {', '.join(mlx_models.MODEL_TYPES)}")
        engine.probe()  # EngineUnavailable / EngineIncompatible where mlx-lm cannot run here
        self._mm = mlx_models
        self.model_type, self.cache_kind = model_type, cache
        self.ident: dict[str, Any] = {"weights_revision": int(seed), "window": int(window)}
        self._build()
        self.cache: Any = None
        self.n = 0

    def _build(self) -> None:
        self.model, _, self.config = self._mm.tiny(self.model_type, self.ident["window"], self.ident["weights_revision"])

    def _new_cache(self) -> list:
        from mlx_lm.models.cache import RotatingKVCache

        if self.cache_kind == "rotating":
            return [RotatingKVCache(max_size=self.ident["window"]) for _ in range(self.config.num_hidden_layers)]
        return self._mm.make_cache(self.model)

    def _logits(self, ids: Sequence[int], cache: Any) -> np.ndarray:
        return self._mm.logits(self.model, cache, list(ids)).astype(np.float64)

    # -- the protocol

    def reset(self) -> None:
        self.cache, self.n = None, 0

    def prefill(self, token_ids: Sequence[int]) -> np.ndarray:
        if self.cache is None:
            self.cache = self._new_cache()
        out = self._logits(token_ids, self.cache)
        self.n += len(token_ids)
        return out

    def decode(self, token_id: int) -> np.ndarray:
        return self.prefill([token_id])[0]

    def full(self, token_ids: Sequence[int]) -> np.ndarray:
        return self._logits(token_ids, None)

    def identity(self) -> dict[str, Any]:
        c = self.config
        heads, kvh = c.num_attention_heads, c.num_key_value_heads
        return {"weights_revision": self.ident["weights_revision"],
                "window": list(self._mm.windows(self.model_type, self.ident["window"])),
                "dtype": "float32", "kv_head_map": [h // (heads // kvh) for h in range(heads)],
                "head_dim": int(c.head_dim), "rope_theta": float(getattr(c, "rope_theta", 10000.0))}

    def set_identity(self, **changes: Any) -> None:
        known = self.identity()
        bad = sorted(set(changes) - set(known))
        if bad:
            raise ValueError(f"set_identity: unknown attribute(s) {bad}; known: {sorted(known)}")
        fixed = sorted(k for k in changes if k not in ("weights_revision", "window"))
        if fixed:
            raise ValueError(f"set_identity: {', '.join(fixed)} cannot be changed on an mlx-lm model built from a "
                             "seeded config (only weights_revision and window)")
        new = dict(self.ident)
        if "weights_revision" in changes:
            v = changes["weights_revision"]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"set_identity: weights_revision is a seed, an int >= 0, got {v!r}")
            new["weights_revision"] = v
        if "window" in changes:
            v = changes["window"]
            ws = {w for w in (v if isinstance(v, (list, tuple)) else [v]) if w is not None}
            if len(ws) != 1 or not all(isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in ws):
                raise ValueError(f"set_identity: one sliding window >= 1 for every sliding layer, got {v!r}")
            new["window"] = ws.pop()
        old, self.ident = self.ident, new
        try:
            self._build()
        except Exception:
            self.ident = old
            raise

    # -- extras

    def snapshot(self) -> dict[str, Any]:
        import mlx.core as mx

        # Each layer cache's attributes, arrays copied out through numpy: the attribute set and the ``state``
        # format differ between releases (0.32's RotatingKVCache.state holds its counters; older ones had a
        # meta_state), and an mlx array is updated in place by the next call.
        layers = [(type(c), {k: (np.array(v), True) if isinstance(v, mx.array) else (copy.deepcopy(v), False)
                             for k, v in vars(c).items()}) for c in (self.cache or [])]
        return {"layers": layers, "n": self.n, "fresh": self.cache is None}

    def restore(self, state: dict[str, Any]) -> None:
        import mlx.core as mx

        if state["fresh"]:
            self.cache, self.n = None, 0
            return
        cache = []
        for cls, attrs in state["layers"]:
            c = cls.__new__(cls)
            for k, (v, is_array) in attrs.items():
                setattr(c, k, mx.array(v) if is_array else copy.deepcopy(v))
            cache.append(c)
        self.cache, self.n = cache, int(state["n"])

    def kv_bytes(self) -> int:
        """Bytes of the K/V rows each layer cache holds live (``min(offset, max_size)`` rows; mlx-lm allocates in
        steps of 256 rows, which this does not count)."""
        total = 0
        for c in self.cache or []:
            k, v = getattr(c, "keys", None), getattr(c, "values", None)
            if k is None or v is None:
                continue
            rows = min(int(c.offset), int(getattr(c, "max_size", None) or c.offset))
            per_row = (k.shape[1] * k.shape[3] * k.itemsize) + (v.shape[1] * v.shape[3] * v.itemsize)
            total += rows * per_row
        return total
