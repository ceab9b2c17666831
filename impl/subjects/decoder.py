""":class:`impl.decoder.Decoder` as the decoder protocol: what ``kvwindow gate`` drives for ``decoder``,
``decoder@c`` and the decoder mutants.

One object is one stream: a model and the live :class:`~impl.decoder.RingKVCache` it extends.
``prefill`` feeds a chunk at the next position (the first call after ``reset()`` is the prompt,
later calls are chunked prefill), ``decode`` one token, ``full`` the no-cache forward of the same
model under its current identity. Logits come back as float64 numpy arrays.

Identity (:meth:`DecoderSubject.identity`) is every attribute that changes K, V, mask or positions:
the weights revision (the config's seed), an adapter (a seeded rank-1 delta on ``k_proj`` and
``v_proj`` of every layer, the shape of a LoRA on K/V), RoPE theta, the window of each layer, the
dtype, the KV-head map (query head ``h`` reads KV head ``map[h]``) and the head width. There is no
batch dimension, so no padding side, and no RoPE scaling. :meth:`DecoderSubject.set_identity`
builds the model anew and **keeps the live cache**, as a caller holding a cache handle would; the
model's own :meth:`~impl.decoder.Decoder.check_cache` then refuses a cache built for another
config. An adapter or a head map is not part of the config, so a cache built before such a change
is not refused: what that does is for the gate to see.

The optional extras (their contract: :mod:`fuzz.gate.protocol`): ``snapshot`` / ``restore`` (the
stored K/V rows, bit for bit, on either backend), ``kv_bytes`` (storage held), ``kv_layers`` /
``full_kv`` (each layer's cached entries and the full forward's K/V, so a gate can compare layer by
layer), ``inject`` (the two faults a negative control cannot build from outside: the next position
one ahead of the tokens seen; the oldest entry the next query needs gone from every sliding layer).
"""

from __future__ import annotations

import zlib
from dataclasses import replace
from typing import Any, Sequence

import numpy as np
import torch

from impl.decoder import Decoder, DecoderConfig, DecoderError, RingKVCache, resolve_windows, torch_threads

#: The gate's decoder: layer 0 slides with W = 8, layer 1 is global, GQA 4 query heads over 2 KV
#: heads, float64 (the same model as the campaign target ``decoder``, fuzz.targets.decoder.TARGET_CONFIG).
GATE_CONFIG = DecoderConfig(vocab=32, d_model=16, layers=2, n_heads=4, n_kv_heads=2, head_dim=4,
                            window=(8, None), dtype="float64", seed=5)

#: The faults :meth:`DecoderSubject.inject` knows.
FAULTS = ("position", "drop-oldest")


def standard_head_map(n_heads: int, n_kv_heads: int) -> list[int]:
    """Query head ``h`` reads KV head ``h // (n_heads / n_kv_heads)`` (HF ``repeat_kv``)."""
    rep = n_heads // n_kv_heads
    return [h // rep for h in range(n_heads)]


def head_permutation(head_map: Sequence[int], n_heads: int, n_kv_heads: int) -> list[int]:
    """Slot ``perm[h]`` that query head ``h`` moves to so the standard model computes ``head_map``:
    the slot's standard KV head is ``head_map[h]``. Every KV head must serve exactly
    ``n_heads / n_kv_heads`` query heads (else no permutation exists: :class:`DecoderError`)."""
    rep = n_heads // n_kv_heads
    m = [int(x) for x in head_map]
    if len(m) != n_heads or any(not 0 <= x < n_kv_heads for x in m) or \
            any(m.count(k) != rep for k in range(n_kv_heads)):
        raise DecoderError(f"kv_head_map must list {n_heads} KV heads in [0, {n_kv_heads}), each {rep} times; "
                           f"got {list(head_map)!r}")
    free = {k: list(range(k * rep, (k + 1) * rep)) for k in range(n_kv_heads)}
    return [free[k].pop(0) for k in m]


def adapter_delta(name: str, out: int, inp: int, which: str) -> torch.Tensor:
    """The adapter ``name``'s rank-1 delta ``0.5 * u v^T`` on a ``[out, inp]`` projection (seeded by the name)."""
    g = torch.Generator().manual_seed(zlib.crc32(f"{name}|{which}".encode()))
    u = torch.randn((out, 1), generator=g, dtype=torch.float64)
    v = torch.randn((1, inp), generator=g, dtype=torch.float64) / inp ** 0.5
    return 0.5 * (u @ v)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


class _DroppingRead:
    """A cache's ``read`` with some positions of some layers gone (what ``inject('drop-oldest')`` installs)."""

    def __init__(self, read: Any, drops: dict[int, int]):
        self.inner, self.drops = read, drops

    def __call__(self, layer: int):
        pos, k, v = self.inner(layer)
        if layer not in self.drops:
            return pos, k, v
        keep = pos != self.drops[layer]
        return pos[keep], k[keep], v[keep]


class DecoderSubject:
    """One stream of an :class:`impl.decoder.Decoder` (``model_cls``/``cache_cls``: a mutant's pair) on
    cache ``backend`` (``"torch"``, ``"c"``) and ``device``; built with no arguments it is ``decoder``."""

    def __init__(self, config: DecoderConfig = GATE_CONFIG, *, backend: str = "torch", device: str | None = None,
                 model_cls: type = Decoder, cache_cls: type = RingKVCache):
        if device is not None:
            config = replace(config, device=device)
        self.backend, self.model_cls, self.cache_cls = backend, model_cls, cache_cls
        self.adapter: str | None = None
        self.head_map: list[int] | None = None
        self._build(config)
        self.cache = self.model.new_cache(backend=backend)  # raises BackendUnavailable where it cannot run

    # -- the model under its identity

    def _build(self, config: DecoderConfig) -> None:
        model = self.model_cls(config)
        model.cache_cls = self.cache_cls
        c = config
        if self.head_map is not None:
            perm = head_permutation(self.head_map, c.n_heads, c.n_kv_heads)
            for i in range(c.layers):
                p = f"layers.{i}.self_attn."
                q = model.w[p + "q_proj"].view(c.n_heads, c.head_dim, -1)
                o = model.w[p + "o_proj"].view(-1, c.n_heads, c.head_dim)
                q2, o2 = torch.empty_like(q), torch.empty_like(o)
                for h, slot in enumerate(perm):
                    q2[slot], o2[:, slot] = q[h], o[:, h]
                model.w[p + "q_proj"] = q2.reshape(c.n_heads * c.head_dim, -1)
                model.w[p + "o_proj"] = o2.reshape(-1, c.n_heads * c.head_dim)
        if self.adapter is not None:
            for i in range(c.layers):
                for which in ("k_proj", "v_proj"):
                    key = f"layers.{i}.self_attn.{which}"
                    w = model.w[key]
                    model.w[key] = w + adapter_delta(f"{self.adapter}|{i}", w.shape[0], w.shape[1], which).to(w)
        self.model = model

    # -- the protocol

    def reset(self) -> None:
        self.cache = self.model.new_cache(backend=self.backend)

    def prefill(self, token_ids: Sequence[int]) -> np.ndarray:
        with torch_threads(1):
            return _np(self.model.forward_cached(self.cache, list(token_ids)))

    def decode(self, token_id: int) -> np.ndarray:
        with torch_threads(1):
            return _np(self.model.forward_cached(self.cache, [token_id])[0])

    def full(self, token_ids: Sequence[int]) -> np.ndarray:
        with torch_threads(1):
            return _np(self.model.full_forward(list(token_ids)).logits)

    def identity(self) -> dict[str, Any]:
        c = self.model.config
        return {"weights_revision": int(c.seed), "adapter": self.adapter, "rope_theta": float(c.rope_theta),
                "window": list(c.windows), "dtype": c.dtype,
                "kv_head_map": list(self.head_map or standard_head_map(c.n_heads, c.n_kv_heads)),
                "head_dim": int(c.head_dim)}

    def set_identity(self, **changes: Any) -> None:
        """Rebuild the model with ``changes`` (keys of :meth:`identity`); the live cache is kept."""
        known = set(self.identity())
        bad = sorted(set(changes) - known)
        if bad:
            raise DecoderError(f"set_identity: unknown attribute(s) {bad}; known: {sorted(known)}")
        c = self.model.config
        fields: dict[str, Any] = {}
        for key, value in changes.items():
            if key == "weights_revision":
                fields["seed"] = int(value)
            elif key == "rope_theta":
                fields["rope_theta"] = float(value)
            elif key == "window":
                fields["window"] = tuple(resolve_windows(list(value) if isinstance(value, (list, tuple)) else value,
                                                         c.layers))
            elif key == "dtype":
                fields["dtype"] = value
            elif key == "head_dim":
                fields["head_dim"] = int(value)
        config = replace(c, **fields)  # validates (DecoderError names a bad value)
        adapter = changes.get("adapter", self.adapter)
        if adapter is not None and not isinstance(adapter, str):
            raise DecoderError(f"set_identity: adapter must be None or a name, got {adapter!r}")
        head_map = changes.get("kv_head_map", self.head_map)
        if head_map is not None:
            head_permutation(head_map, config.n_heads, config.n_kv_heads)  # validates
            if list(head_map) == standard_head_map(config.n_heads, config.n_kv_heads):
                head_map = None
        self.adapter, self.head_map = adapter, (list(head_map) if head_map is not None else None)
        self._build(config)

    def snapshot(self) -> dict[str, Any]:
        """The live cache's stored entries (positions and K/V rows, copies) and the config it was built for."""
        return {"config": self.cache.config, "windows": self.cache.windows, "n": self.cache.n,
                "layers": self.cache.snapshot()}

    def restore(self, state: dict[str, Any]) -> None:
        """A cache for the snapshot's config holding exactly its rows: each layer is written the
        positions ``0 .. n-1`` in one chunk (zeros where the snapshot holds nothing, which a ring keeps
        only when it keeps more than it should), so every backend ends in the snapshot's state."""
        cache = self.cache_cls(state["config"], state["windows"], backend=self.backend)
        n = int(state["n"])
        for store, snap in zip(cache.stores, state["layers"]):
            if n == 0:
                continue
            shape = (n, *snap.k.shape[1:])
            k = torch.zeros(shape, dtype=snap.k.dtype, device=snap.k.device)
            v = torch.zeros_like(k)
            idx = torch.tensor(snap.positions, dtype=torch.int64, device=snap.k.device)
            k[idx], v[idx] = snap.k, snap.v
            store.write(list(range(n)), k, v)
        cache.n = n
        self.cache = cache

    # -- optional extras

    def kv_bytes(self) -> int:
        return int(self.cache.kv_bytes())

    def kv_layers(self) -> list[dict[str, Any]]:
        return [{"window": s.window, "positions": list(s.positions), "k": _np(s.k), "v": _np(s.v)}
                for s in self.cache.snapshot()]

    def full_kv(self, token_ids: Sequence[int]) -> list[dict[str, np.ndarray]]:
        with torch_threads(1):
            out = self.model.full_forward(list(token_ids))
        return [{"k": _np(k), "v": _np(v)} for k, v in zip(out.keys, out.values)]

    def inject(self, fault: str) -> None:
        """Corrupt the live cache (until :meth:`reset`): ``"position"`` — every later token is placed one
        position ahead of the tokens seen; ``"drop-oldest"`` — the oldest entry the next query needs
        (position ``max(0, n - W + 1)``) is gone from every sliding layer's reads."""
        cache = self.cache
        if fault == "position":
            cache.next_position = lambda: cache.n + 1  # type: ignore[method-assign]
        elif fault == "drop-oldest":
            drops = {i: max(0, cache.n - w + 1) for i, w in enumerate(cache.windows) if w is not None}
            cache.read = _DroppingRead(cache.read, drops)  # type: ignore[method-assign]
        else:
            raise DecoderError(f"inject: unknown fault {fault!r}; known: {', '.join(FAULTS)}")
