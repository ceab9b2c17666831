"""A transformers sliding-window family with a chosen cache implementation, as the decoder protocol: what
``kvwindow gate`` drives for ``hf:<model_type>+static`` / ``+dynamic``.

The model is :mod:`impl.hf.families`' tiny seeded model of the family (nothing downloaded), with one
sliding window ``W`` for its sliding layers (the family's sliding/global pattern kept). The stream runs
the way a user runs it: forward calls on one cache object — ``"dynamic"``: the ``DynamicCache`` built
from the model's config (its sliding layers keep ``lastWindow (W-1)`` between calls on the ``layers``
API); ``"static"``: the static cache with sliding buffers of ``W`` slots (``StaticCache``; on the legacy
API ``HybridCache`` for hybrid families and ``SlidingWindowCache`` for all-sliding ones), sized for
:data:`MAX_LEN` positions. ``full()`` is the model's own no-cache forward.

Identity: weights revision (the seed), adapter (a seeded rank-1 delta on every ``k_proj`` / ``v_proj``),
RoPE theta and scaling, the window per layer, dtype, KV-head map, padding side, head width.
:meth:`HFSubject.set_identity` builds the model anew with the same cache object kept, as a caller who
loads new weights and keeps passing its cache does: transformers' caches record no model identity, so
nothing refuses a cache built under another one — what that does is for the gate to see. ``reset()``
calls the cache's own ``reset()`` (how a server reuses one cache object), or builds a new cache where
the identity changed since it was built (the old buffers may not even fit the new model).

Extras (contract: :mod:`fuzz.gate.protocol`): ``snapshot`` / ``restore`` (a deep copy of the cache
object), ``kv_bytes``, ``batch`` (rows padded on the padding side into one batch on a cache of its own;
eager attention runs it in float32, because eager in float64 turns a fully masked pad row into NaN:
:class:`impl.hf.families.Family`), ``inject`` (``"position"``: later calls get ``position_ids`` one
ahead; ``"drop-oldest"``: the row of the oldest position the next query needs is zeroed in every
sliding layer, a freed block read back as zeros).
"""

from __future__ import annotations

import copy
import warnings
import zlib
from typing import Any, Sequence

import numpy as np
import torch

from impl.decoder import torch_threads
from impl.hf import compat, families

MAX_LEN = families.MAX_POSITIONS
CACHES = ("dynamic", "static")
DTYPES = {"float64": torch.float64, "float32": torch.float32}


def _split(rp: dict) -> tuple[float, dict | None]:
    kind = rp.get("rope_type", "default")
    return float(rp["rope_theta"]), (None if kind == "default" else {k: v for k, v in rp.items() if k != "rope_theta"})


def _rope(cfg: Any) -> tuple[Any, Any]:
    """``(theta, scaling or None)`` of a config: ``rope_parameters`` on 5.x — one dict, or one per layer type
    (Gemma 3: then both are dicts by layer type) — else ``rope_theta`` / ``rope_scaling``."""
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict) and rp and all(isinstance(v, dict) for v in rp.values()):
        parts = {t: _split(v) for t, v in rp.items()}
        scaling = {t: sc for t, (_, sc) in parts.items()}
        return {t: th for t, (th, _) in parts.items()}, (scaling if any(scaling.values()) else None)
    if isinstance(rp, dict) and "rope_theta" in rp:
        return _split(rp)
    return float(cfg.rope_theta), getattr(cfg, "rope_scaling", None)


def _set_rope(cfg: Any, theta: Any, scaling: Any) -> None:
    """Write ``(theta, scaling)`` back in the config's own form; a single value applies to every layer type."""
    def one(th: float, sc: Any) -> dict:
        new = {"rope_theta": float(th), "rope_type": "default"}
        if sc:
            new.update(sc)
            new.setdefault("rope_type", sc.get("type", "linear"))
        return new
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict) and rp and all(isinstance(v, dict) for v in rp.values()):
        pick = (lambda x, t: x.get(t) if isinstance(x, dict) and t in x else x)  # noqa: E731
        sc_nested = isinstance(scaling, dict) and set(scaling) <= set(rp) and scaling
        cfg.rope_parameters = {t: one(pick(theta, t), scaling.get(t) if sc_nested else scaling) for t in rp}
    elif isinstance(rp, dict) and "rope_theta" in rp:
        cfg.rope_parameters = one(theta, scaling)
    else:
        cfg.rope_theta = float(theta)
        cfg.rope_scaling = dict(scaling) if scaling else None


def _legacy_sliding_cache(config: Any, dtype: Any, batch: int) -> Any:
    """The static cache of an all-sliding family before the ``layers`` API: ``SlidingWindowCache`` (what
    ``cache_implementation="sliding_window"`` builds; ``HybridCache`` assumes a global layer every other
    one), with the batch/device/dtype keywords its constructor names. 4.45.2's cannot be built (its
    ``__init__`` calls ``super().__init__()`` without the config): :class:`compat.HFIncompatible`."""
    import inspect

    from transformers import cache_utils as cu

    cls = getattr(cu, "SlidingWindowCache", None)
    if cls is None:
        raise compat.incompatible("cache_utils.SlidingWindowCache", "absent: no static cache for an all-sliding family")
    names = set(inspect.signature(cls.__init__).parameters)
    kw: dict[str, Any] = {"max_cache_len": MAX_LEN}
    for key, value in (("batch_size", batch), ("device", "cpu"), ("dtype", dtype)):
        if key in names:
            kw[key] = value
    if "batch_size" not in names and "max_batch_size" in names:
        kw["max_batch_size"] = batch
    try:
        return cls(config, **kw)
    except Exception as e:  # noqa: BLE001 - a constructor this release cannot run: the adapter cannot drive it
        raise compat.incompatible(f"SlidingWindowCache(config, {', '.join(kw)})", f"{type(e).__name__}: {e}") from e


class HFSubject:
    """One stream of a tiny ``model_type`` model on a ``cache`` ("dynamic" or "static") with attention ``attn``."""

    def __init__(self, model_type: str = "mistral", cache: str = "dynamic", attn: str = "sdpa", *, window: int = 8,
                 seed: int = 0):
        if cache not in CACHES:
            raise ValueError(f"cache implementation {cache!r}; known: {', '.join(CACHES)}")
        self.info = compat.info()
        self.family = families.Family(model_type, seed=seed)  # raises HFUnavailable where the release lacks it
        self.model_type, self.cache_kind, self.attn = model_type, cache, attn
        self.types = self.family.layer_types()
        self.ident: dict[str, Any] = {"weights_revision": seed, "adapter": None, "window": window, "dtype": "float64",
                                      "kv_head_map": None, "padding_side": "left", "rope": None, "head_dim": None}
        self._build()
        self._new_cache()  # a cache this release cannot build makes the subject unavailable, before any run
        self.cache: Any = None
        self.cache_ident: dict[str, Any] | None = None
        self.n, self.offset = 0, 0

    # -- the model under its identity

    def _build(self) -> None:
        i = self.ident
        cfg = families.tiny_config(self.model_type, int(i["window"]), self.attn, self.family.layers)
        if i["rope"] is None:
            i["rope"] = _rope(cfg)
        _set_rope(cfg, *i["rope"])
        if i["head_dim"] is None:
            i["head_dim"] = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
            self.head_dim_settable = getattr(cfg, "head_dim", None) is not None
        if self.head_dim_settable:
            cfg.head_dim = int(i["head_dim"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = self.family.cls(cfg).to(DTYPES[i["dtype"]])
            sd = families.seeded_state_dict(model, self.model_type, int(i["weights_revision"]))
            heads, kvh, hd = cfg.num_attention_heads, cfg.num_key_value_heads, int(i["head_dim"])
            if i["kv_head_map"] is None:
                i["kv_head_map"] = [h // (heads // kvh) for h in range(heads)]
            perm = self._perm(i["kv_head_map"], heads, kvh)
            for name in list(sd):
                if ".self_attn." not in name:
                    continue
                t = sd[name]
                if perm is not None and "q_proj." in name:
                    q = t.view(heads, hd, *t.shape[1:])
                    sd[name] = torch.stack([q[perm.index(s)] for s in range(heads)]).reshape(t.shape)
                elif perm is not None and "o_proj.weight" in name:
                    o = t.view(t.shape[0], heads, hd)
                    sd[name] = torch.stack([o[:, perm.index(s)] for s in range(heads)], 1).reshape(t.shape)
                if i["adapter"] is not None and name.endswith(("k_proj.weight", "v_proj.weight")):
                    g = torch.Generator().manual_seed(zlib.crc32(f"{i['adapter']}|{name}".encode()))
                    u = torch.randn((t.shape[0], 1), generator=g, dtype=torch.float64)
                    v = torch.randn((1, t.shape[1]), generator=g, dtype=torch.float64) / t.shape[1] ** 0.5
                    sd[name] = sd[name] + 0.5 * (u @ v)
            model.load_state_dict(sd, strict=False)
            model.eval()
        self.model = model

    @staticmethod
    def _perm(head_map: Sequence[int], heads: int, kvh: int) -> list[int] | None:
        """Slot of each query head so the model's own ``repeat_kv`` computes ``head_map`` (``None``: the standard map)."""
        rep = heads // kvh
        m = [int(x) for x in head_map]
        if len(m) != heads or any(m.count(k) != rep for k in range(kvh)):
            raise ValueError(f"kv_head_map must list {heads} KV heads in [0, {kvh}), each {rep} times; got {list(head_map)}")
        if m == [h // rep for h in range(heads)]:
            return None
        free = {k: list(range(k * rep, (k + 1) * rep)) for k in range(kvh)}
        return [free[k].pop(0) for k in m]

    def _new_cache(self, batch: int = 1, model: Any = None) -> Any:
        model = model or self.model
        dtype = next(model.parameters()).dtype
        if self.cache_kind == "dynamic":
            return compat.dynamic_cache(model.config)
        if self.info.api == "legacy" and "full_attention" not in self.types:
            return _legacy_sliding_cache(model.config, dtype, batch)
        return compat.static_sliding_cache(model.config, MAX_LEN, dtype, batch)

    def _forward(self, ids: torch.Tensor, cache: Any = None, start: int = 0, model: Any = None,
                 attention_mask: torch.Tensor | None = None, pos: torch.Tensor | None = None) -> Any:
        model = model or self.model
        kw: dict[str, Any] = {"input_ids": ids, "use_cache": cache is not None}
        if cache is not None:
            kw[self.info.cache_kwarg] = cache
            if self.info.takes_cache_position:
                kw["cache_position"] = torch.arange(start, start + ids.shape[1])
        if attention_mask is not None:
            kw["attention_mask"] = attention_mask
        if pos is not None:
            kw["position_ids"] = pos
        with torch.no_grad(), warnings.catch_warnings(), torch_threads(1):  # tiny matrices: threads only spin
            warnings.simplefilter("ignore")
            return model(**kw)

    # -- the protocol

    def reset(self) -> None:
        if self.cache is not None and self.cache_ident == self.identity() and callable(getattr(self.cache, "reset", None)):
            self.cache.reset()
        else:
            self.cache = None
        self.n, self.offset = 0, 0

    def prefill(self, token_ids: Sequence[int]) -> np.ndarray:
        if self.cache is None:
            self.cache, self.cache_ident = self._new_cache(), self.identity()
        k = len(token_ids)
        pos = torch.arange(self.n + self.offset, self.n + self.offset + k)[None] if self.offset else None
        out = self._forward(torch.tensor([list(token_ids)], dtype=torch.long), self.cache, self.n, pos=pos)
        self.n += k
        return out.logits[0].to(torch.float64).numpy()

    def decode(self, token_id: int) -> np.ndarray:
        return self.prefill([token_id])[0]

    def full(self, token_ids: Sequence[int]) -> np.ndarray:
        return self._forward(torch.tensor([list(token_ids)], dtype=torch.long)).logits[0].to(torch.float64).numpy()

    def identity(self) -> dict[str, Any]:
        i = self.ident
        return {"weights_revision": i["weights_revision"], "adapter": i["adapter"], "rope_theta": i["rope"][0],
                "rope_scaling": i["rope"][1],
                "window": [int(i["window"]) if t == "sliding_attention" else None for t in self.types],
                "dtype": i["dtype"], "kv_head_map": list(i["kv_head_map"]), "padding_side": i["padding_side"],
                "head_dim": i["head_dim"]}

    def set_identity(self, **changes: Any) -> None:
        bad = sorted(set(changes) - set(self.identity()))
        if bad:
            raise ValueError(f"set_identity: unknown attribute(s) {bad}; known: {sorted(self.identity())}")
        new = dict(self.ident)
        for key, v in changes.items():
            if key == "window":
                ws = {int(w) for w in (v if isinstance(v, (list, tuple)) else [v]) if w is not None}
                if len(ws) != 1 or min(ws) < 1:
                    raise ValueError(f"set_identity: one sliding window >= 1 for every sliding layer, got {v!r}")
                new["window"] = ws.pop()
            elif key in ("rope_theta", "rope_scaling"):
                theta, scaling = new["rope"]
                new["rope"] = (v, scaling) if key == "rope_theta" else (theta, v)
            elif key == "dtype" and v not in DTYPES:
                raise ValueError(f"set_identity: dtype {v!r}; known: {', '.join(DTYPES)}")
            elif key == "padding_side" and v not in ("left", "right"):
                raise ValueError(f"set_identity: padding_side is 'left' or 'right', got {v!r}")
            elif key == "head_dim" and not self.head_dim_settable:
                raise ValueError(f"set_identity: {self.model_type} derives head_dim from hidden_size / heads; "
                                 "it cannot be set alone")
            elif key == "head_dim" and (not isinstance(v, int) or v < 2 or v % 2):
                raise ValueError(f"set_identity: head_dim must be an even int >= 2 (RoPE rotates pairs), got {v!r}")
            else:
                new[key] = v
        old, self.ident = self.ident, new
        try:
            self._build()
        except Exception:
            self.ident = old
            raise

    def snapshot(self) -> Any:
        return {"cache": copy.deepcopy(self.cache), "n": self.n, "built_for": self.cache_ident}

    def restore(self, state: Any) -> None:
        self.cache, self.n = copy.deepcopy(state["cache"]), int(state["n"])
        self.cache_ident, self.offset = state["built_for"], 0

    # -- extras

    def kv_bytes(self) -> int:
        total = 0
        for i in range(len(self.types)):
            kv = compat.layer_kv(self.cache, i) if self.cache is not None else None
            if kv is not None:
                total += sum(t.numel() * t.element_size() for t in kv)
        return total

    def batch(self, rows: Sequence[Sequence[int]], chunks: Sequence[int]) -> list[np.ndarray]:
        B, T = len(rows), max(len(r) for r in rows)
        if sum(chunks) != T or any(c < 1 for c in chunks):
            raise ValueError(f"chunks {list(chunks)} must be positive and add up to the padded length {T}")
        model = self.model if self.attn != "eager" else copy.deepcopy(self.model).to(torch.float32)
        ids = torch.zeros(B, T, dtype=torch.long)
        am = torch.zeros(B, T, dtype=torch.long)
        for b, r in enumerate(rows):
            cols = slice(T - len(r), T) if self.ident["padding_side"] == "left" else slice(0, len(r))
            ids[b, cols], am[b, cols] = torch.tensor(list(r)), 1
        pos = families.positions(am)
        cache, out, start = self._new_cache(B, model), [], 0
        for k in chunks:
            res = self._forward(ids[:, start:start + k], cache, start, model, am[:, :start + k], pos[:, start:start + k])
            out.append(res.logits.to(torch.float64))
            start += k
        logits = torch.cat(out, 1)
        return [logits[b][am[b].bool()].numpy() for b in range(B)]

    def inject(self, fault: str) -> None:
        if fault == "position":
            self.offset = 1
            return
        if fault != "drop-oldest":
            raise ValueError(f"inject: unknown fault {fault!r}; known: position, drop-oldest")
        W = int(self.ident["window"])
        for i, t in enumerate(self.types):
            kv = compat.layer_kv(self.cache, i) if t == "sliding_attention" else None
            if kv is None:
                continue
            rows = kv[0].shape[-2]
            # dynamic sliding layers hold lastWindow (W-1): the oldest needed is row 0; a static buffer of W
            # slots holds positions n-W .. n-1 once full, so the oldest needed is row 1 there
            row = 1 if (self.cache_kind == "static" and self.n >= W and rows >= W) else 0
            for tensor in kv:
                tensor[..., row, :] = 0
