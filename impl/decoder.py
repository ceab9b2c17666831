"""A small sliding-window decoder (Llama/Mistral style) with a ring-buffer KV cache.

Everything is built from a seed; nothing is downloaded. The module has two
halves that share every weight and every building block:

* :meth:`Decoder.full_forward` — the whole sequence at once under a causal +
  sliding-window mask (the reference);
* :meth:`Decoder.forward_cached` — prefill and decode against a
  :class:`RingKVCache`, one token or a chunk of any length (longer than the
  window included) at a time.

Conventions (DESIGN §1; the Hugging Face reference forwards reuse them):

* **Window.** ``W >= 1`` counts the keys a query sees *including itself*: the
  query at position ``t`` sees key ``p`` iff ``p <= t < p + W`` (``pyspec.in_window``),
  i.e. positions ``max(0, t-W+1) .. t``. Same as HF ``sliding_window=W``. A layer
  whose window is ``None`` (or ``0`` in a config) is global: plain causal attention.
* **Positions.** The next token's position is the number of tokens the cache
  has seen (``cache.n``), never the cache length. Keys are rotated by RoPE at
  their **absolute** position *before* they are cached.
* **Ring.** A sliding layer's cache has ``W`` slots; the entry of position
  ``p`` lives in slot ``p mod W``; the logical order starts at the oldest slot
  (``n mod W`` once full, ``0`` before). After ``n`` tokens it holds
  ``pyspec.last_window(W, entries 0..n-1)``.
* **Layouts.** No batch dimension. Hidden states ``[T, d_model]``; queries
  ``[H, T, head_dim]``; keys and values ``[KVH, T, head_dim]``; cached and
  snapshot K/V ``[L, KVH, head_dim]`` (entry-major, logical order). The
  building blocks broadcast over leading dimensions, so HF's
  ``[B, H, T, D]`` works as well.
* **Weights.** Linear weights are ``[out, in]`` (``y = x @ W.T``) and are
  named like a Hugging Face Llama/Mistral state dict without the ``model.``
  prefix and ``.weight`` suffix; :meth:`Decoder.hf_state_dict` gives the HF names.
* **Errors.** Bad input raises a :class:`DecoderError` subclass naming the
  value, and leaves the cache unchanged (new K/V are committed only after
  every layer has been computed).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from impl.errors import Unavailable

__all__ = [
    "DecoderConfig", "Decoder", "FullOutput", "RingKVCache", "LayerSnapshot",
    "TorchRingStore", "ProtocolRingStore",
    "DecoderError", "TokenError", "EmptyPromptError", "WindowError", "CacheMismatchError",
    "BackendUnavailable",
    "resolve_windows", "rms_norm", "rope_inv_freq", "rope_cos_sin", "rotate_half", "apply_rope",
    "window_mask", "repeat_kv", "attend", "softcap", "silu_mlp",
    "split_f64_to_f32", "join_f32_to_f64", "torch_threads",
]


@contextlib.contextmanager
def torch_threads(n: int | None = 1) -> Iterator[None]:
    """Run with ``n`` torch intra-op threads, restoring the old count afterwards.

    The models here are tiny: extra threads only spin, and on a loaded 2-core
    machine they make a case 5-10x slower. ``None`` leaves the setting alone.
    """
    if n is None:
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


DTYPES = {"float32": torch.float32, "float64": torch.float64}


# ---------------------------------------------------------------------------
# Errors


class DecoderError(ValueError):
    """Bad input to the decoder or its cache; the message names the offending value."""


class TokenError(DecoderError):
    """A token id that is not an int in ``[0, vocab)``."""


class EmptyPromptError(DecoderError):
    """A prompt or chunk with no tokens."""


class WindowError(DecoderError):
    """A window that is not ``None``/``0`` (global) or an int ``>= 1``."""


class CacheMismatchError(DecoderError):
    """A cache built for another config, dtype or device than the model it is used with."""


class BackendUnavailable(Unavailable):
    """A cache storage backend that cannot run here (e.g. ``impl.ring`` not built)."""


# ---------------------------------------------------------------------------
# Config


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _one_window(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if not _is_int(value):
        raise WindowError(f"{where}: window must be None/0 (global) or an int >= 1, got {value!r}")
    value = int(value)
    if value == 0:
        return None
    if value < 1:
        raise WindowError(f"{where}: window must be None/0 (global) or an int >= 1, got {value}")
    return value


def resolve_windows(window: int | None | Sequence[int | None], layers: int) -> tuple[int | None, ...]:
    """Per-layer windows: one value for every layer, or a list of ``layers`` values.

    ``None`` or ``0`` means a global (full causal) layer; any other entry must be
    an int ``>= 1``. A window at least as long as the stream behaves exactly like
    a global layer (the ring never wraps).
    """
    if isinstance(window, (list, tuple)):
        if len(window) != layers:
            raise WindowError(f"window list has {len(window)} entries for {layers} layers: {list(window)!r}")
        return tuple(_one_window(w, f"layer {i}") for i, w in enumerate(window))
    w = _one_window(window, "window")
    return (w,) * layers


@dataclass(frozen=True)
class DecoderConfig:
    """Shape, windows, numerics and seed of a :class:`Decoder`.

    ``window``: one int for every layer or a per-layer list; ``None``/``0`` is a
    global layer (Gemma 2 alternates sliding and global layers).
    ``attn_softcap``/``final_softcap``: Gemma 2 style ``cap * tanh(x / cap)`` on
    attention scores / logits (``None``: off). ``d_ff`` defaults to ``2 * d_model``.
    """

    vocab: int = 64
    d_model: int = 32
    layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int = 8
    window: int | None | tuple[int | None, ...] = 8
    rope_theta: float = 10000.0
    d_ff: int | None = None
    rms_eps: float = 1e-6
    attn_softcap: float | None = None
    final_softcap: float | None = None
    dtype: str = "float64"
    device: str = "cpu"
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.window, list):
            object.__setattr__(self, "window", tuple(self.window))
        for name in ("vocab", "d_model", "layers", "n_heads", "n_kv_heads", "head_dim"):
            v = getattr(self, name)
            if not _is_int(v) or v < 1:
                raise DecoderError(f"config.{name} must be an int >= 1, got {v!r}")
        if self.vocab < 2:
            raise DecoderError(f"config.vocab must be >= 2, got {self.vocab}")
        if self.n_heads % self.n_kv_heads:
            raise DecoderError(
                f"config.n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}")
        if self.head_dim % 2:
            raise DecoderError(f"config.head_dim must be even for RoPE, got {self.head_dim}")
        if self.d_ff is not None and (not _is_int(self.d_ff) or self.d_ff < 1):
            raise DecoderError(f"config.d_ff must be None or an int >= 1, got {self.d_ff!r}")
        if self.dtype not in DTYPES:
            raise DecoderError(f"config.dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}")
        if not (isinstance(self.rope_theta, (int, float)) and self.rope_theta > 0):
            raise DecoderError(f"config.rope_theta must be > 0, got {self.rope_theta!r}")
        for name in ("attn_softcap", "final_softcap"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and v > 0):
                raise DecoderError(f"config.{name} must be None or > 0, got {v!r}")
        resolve_windows(self.window, self.layers)  # validates
        torch.device(self.device)  # validates the string

    @property
    def windows(self) -> tuple[int | None, ...]:
        return resolve_windows(self.window, self.layers)

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def ff(self) -> int:
        return self.d_ff if self.d_ff is not None else 2 * self.d_model

    def diff(self, other: "DecoderConfig", mine: str = "self", theirs: str = "other") -> list[str]:
        """Field names (with both values) where ``other`` differs."""
        return [f"{f.name}: {mine} {getattr(self, f.name)!r} != {theirs} {getattr(other, f.name)!r}"
                for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]


def _override_windows(config: DecoderConfig, windows: Any) -> tuple[int | None, ...]:
    """Per-layer windows of a cache or a full forward: ``None`` → the config's; a list → per
    layer; an int → that window for every *sliding* layer (global layers stay global)."""
    if windows is None:
        return config.windows
    if isinstance(windows, (list, tuple)):
        return resolve_windows(windows, config.layers)
    w = _one_window(windows, "window")
    if w is None:
        raise WindowError(f"window override must be an int >= 1, got {windows!r}")
    return tuple(None if cw is None else w for cw in config.windows)


# ---------------------------------------------------------------------------
# Building blocks (module-level so the HF reference forwards reuse them)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, offset: float = 0.0) -> torch.Tensor:
    """``x / sqrt(mean(x^2, -1) + eps) * (offset + weight)``.

    Llama/Mistral: ``offset=0``; Gemma stores ``weight - 1`` and uses ``offset=1``.
    Computed in ``x``'s dtype (HF upcasts float16/bfloat16 to float32 first).
    """
    var = x.pow(2).mean(dim=-1, keepdim=True)
    return x * torch.rsqrt(var + eps) * (offset + weight)


def rope_inv_freq(head_dim: int, theta: float, dtype: torch.dtype = torch.float64,
                  device: Any = "cpu") -> torch.Tensor:
    """``1 / theta ** (arange(0, head_dim, 2) / head_dim)`` — HF's default rotary ``inv_freq``."""
    exps = torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).to(dtype) / head_dim
    return 1.0 / (theta ** exps)


def rope_cos_sin(positions: Any, head_dim: int, theta: float, dtype: torch.dtype = torch.float64,
                 device: Any = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """``cos, sin`` of shape ``[T, head_dim]`` for absolute ``positions`` (``[T]`` ints).

    HF layout: ``freqs = pos ⊗ inv_freq`` (``[T, head_dim/2]``), ``emb = cat(freqs, freqs)``.
    Computed entirely in ``dtype``. (HF computes ``inv_freq`` and the outer
    product in float32 and then casts; pass ``dtype=torch.float32`` and cast the
    result to reproduce that bit for bit.)
    """
    pos = torch.as_tensor(positions, device=device).to(dtype)
    inv = rope_inv_freq(head_dim, theta, dtype, device)
    freqs = pos[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``[x1, x2] -> [-x2, x1]`` on the last dimension (HF ``rotate_half``)."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x[..., T, head_dim]`` by ``cos/sin[T, head_dim]`` (broadcast over leading dims).

    ``x * cos + rotate_half(x) * sin`` — the rotate-half (GPT-NeoX / HF Llama)
    convention, not the interleaved GPT-J one.
    """
    return x * cos + rotate_half(x) * sin


def window_mask(q_pos: Any, k_pos: Any, window: int | None) -> torch.Tensor:
    """Boolean ``[Tq, Tk]``: ``True`` where query ``t`` may attend key ``p``.

    ``p <= t < p + window`` (``pyspec.in_window``: ``window`` keys, the query's own
    key included); ``window=None`` is plain causal ``p <= t``.
    """
    q = torch.as_tensor(q_pos)[:, None]
    k = torch.as_tensor(k_pos)[None, :]
    m = k <= q
    if window is not None:
        m = m & (q < k + window)
    return m


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """``[..., KVH, T, D] -> [..., KVH*n_rep, T, D]``: query head ``h`` uses KV head ``h // n_rep``
    (HF ``repeat_kv``; MQA is ``KVH = 1``)."""
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=-3)


def softcap(x: torch.Tensor, cap: float | None) -> torch.Tensor:
    """Gemma 2 soft capping ``cap * tanh(x / cap)``; identity when ``cap`` is ``None``."""
    return x if cap is None else cap * torch.tanh(x / cap)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float,
           softcap_value: float | None = None) -> torch.Tensor:
    """Masked softmax attention with grouped-query heads.

    ``q[..., H, Tq, D]``, ``k``/``v[..., KVH, Tk, D]`` with ``H % KVH == 0``,
    ``mask`` boolean ``[Tq, Tk]`` (``True`` = attend; every row must allow at
    least one key). Scores are ``q·k * scale``, optionally soft-capped, masked to
    ``-inf`` and soft-maxed in the input dtype. Returns ``[..., H, Tq, D]``.
    """
    n_rep = q.shape[-3] // k.shape[-3]
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    scores = softcap(scores, softcap_value)
    scores = scores.masked_fill(~mask.to(scores.device), float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def silu_mlp(x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
    """``down(silu(gate(x)) * up(x))`` with ``[out, in]`` weights."""
    return (torch.nn.functional.silu(x @ gate.T) * (x @ up.T)) @ down.T


def split_f64_to_f32(x: np.ndarray) -> np.ndarray:
    """Exact split of float64 values into three float32 limbs ``a + b + c`` (concatenated).

    Used to keep float64 K/V in a float32 store (the C ring) without rounding:
    53 mantissa bits fit in three 24-bit limbs, exact for values whose limbs do
    not underflow float32 (true for any activation this model produces).
    """
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    a = x.astype(np.float32)
    r = x - a.astype(np.float64)
    b = r.astype(np.float32)
    c = (r - b.astype(np.float64)).astype(np.float32)
    return np.concatenate([a, b, c])


def join_f32_to_f64(limbs: np.ndarray) -> np.ndarray:
    """Inverse of :func:`split_f64_to_f32`."""
    limbs = np.asarray(limbs, dtype=np.float32).reshape(-1)
    a, b, c = np.split(limbs.astype(np.float64), 3)
    return (a + b) + c


# ---------------------------------------------------------------------------
# Cache storage


@dataclass
class LayerSnapshot:
    """One layer's cache in logical order: ``positions[i]`` is the position of ``k[i]``/``v[i]``."""

    window: int | None
    positions: list[int]
    k: torch.Tensor  # [L, KVH, D]
    v: torch.Tensor


class TorchRingStore:
    """One layer's ring in torch tensors (CPU or GPU).

    ``W`` slots (grown by doubling up to ``W``, so a huge or ``None`` window costs
    only what is used); the entry of position ``p`` is written to slot ``p mod W``
    along with ``p`` itself; reads start at the oldest slot (``count mod W`` once
    full) and cover only filled slots.
    """

    def __init__(self, window: int | None, kv_heads: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device):
        self.window = window
        self.shape = (kv_heads, head_dim)
        self.dtype, self.device = dtype, device
        self.k = torch.empty((0, kv_heads, head_dim), dtype=dtype, device=device)
        self.v = torch.empty_like(self.k)
        self.pos = torch.empty((0,), dtype=torch.int64, device=device)
        self.count = 0  # entries ever pushed

    def capacity(self) -> int | None:
        """Slots in the ring: the window (``None``: unbounded, a global layer)."""
        return self.window

    def _ensure(self, size: int) -> None:
        have = self.k.shape[0]
        if size <= have:
            return
        cap = self.capacity()
        new = max(size, 2 * have, 4)
        if cap is not None:
            new = min(new, cap)
        grow = new - have
        self.k = torch.cat([self.k, torch.zeros((grow, *self.shape), dtype=self.dtype, device=self.device)])
        self.v = torch.cat([self.v, torch.zeros((grow, *self.shape), dtype=self.dtype, device=self.device)])
        self.pos = torch.cat([self.pos, torch.full((grow,), -1, dtype=torch.int64, device=self.device)])

    def write(self, positions: list[int], k: torch.Tensor, v: torch.Tensor) -> None:
        """Append entries (consecutive positions, in order): a chunk longer than the
        ring only leaves its last ``W`` entries, exactly as pushing them one by one would."""
        cap = self.capacity()
        total = len(positions)
        if cap is not None and total > cap:
            positions, k, v = positions[total - cap:], k[total - cap:], v[total - cap:]
        slots = [p % cap for p in positions] if cap is not None else list(positions)
        self._ensure(max(slots) + 1)
        idx = torch.tensor(slots, dtype=torch.int64, device=self.device)
        self.k[idx] = k
        self.v[idx] = v
        self.pos[idx] = torch.tensor(positions, dtype=torch.int64, device=self.device)
        self.count += total

    def read(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(positions [L], k [L, KVH, D], v)`` in logical order: the first ``count`` slots
        until the ring wraps, then ``cap`` slots from the oldest (``count mod cap``)."""
        cap = self.capacity()
        if cap is None or self.count <= cap:
            n = self.count
            return self.pos[:n], self.k[:n], self.v[:n]
        idx = (self.count % cap + torch.arange(cap, device=self.device)) % cap
        return self.pos[idx], self.k[idx], self.v[idx]

    def nbytes(self) -> int:
        """Bytes of K/V storage held (positions not counted)."""
        return self.k.numel() * self.k.element_size() * 2


class ProtocolRingStore:
    """One layer's ring in any Python-protocol cache (DESIGN §4), e.g. ``impl.ring.CRing``.

    Keys and values are 1-D float32 arrays: a layer's K (``KVH * D`` values) is
    flattened (the factory gets ``width=`` when it takes it, as ``CRing`` does); float64 models store each value as three exact float32 limbs
    (:func:`split_f64_to_f32`), so this backend matches the torch one bit for bit.
    A single new token goes through ``push``, a chunk through ``push_chunk``.
    """

    def __init__(self, window: int, kv_heads: int, head_dim: int, dtype: torch.dtype,
                 device: torch.device, factory: Callable[[], Any]):
        if window is None:
            raise WindowError("ProtocolRingStore needs a finite window")
        self.window = window
        self.shape = (kv_heads, head_dim)
        self.dtype, self.device = dtype, device
        self.width = kv_heads * head_dim * (3 if dtype == torch.float64 else 1)
        self.ring = _construct(factory, self.width)
        self.ring.reset(window)

    def capacity(self) -> int:
        return self.window

    def _enc(self, t: torch.Tensor) -> np.ndarray:
        a = t.detach().to("cpu").numpy().reshape(-1)
        if self.dtype == torch.float64:
            return split_f64_to_f32(a)
        return np.ascontiguousarray(a, dtype=np.float32)

    def _dec(self, a: Any) -> torch.Tensor:
        arr = np.asarray(a, dtype=np.float32).reshape(-1)
        if self.dtype == torch.float64:
            arr = join_f32_to_f64(arr)
        return torch.from_numpy(np.array(arr, dtype=np.float64 if self.dtype == torch.float64 else np.float32)
                                ).reshape(self.shape).to(self.device)

    def write(self, positions: list[int], k: torch.Tensor, v: torch.Tensor) -> None:
        entries = [(int(p), self._enc(k[i]), self._enc(v[i])) for i, p in enumerate(positions)]
        if len(entries) == 1:
            self.ring.push(*entries[0])
        else:
            self.ring.push_chunk(entries)

    def read(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        contents = list(self.ring.contents())
        pos = torch.tensor([int(e[0]) for e in contents], dtype=torch.int64, device=self.device)
        if not contents:
            z = torch.empty((0, *self.shape), dtype=self.dtype, device=self.device)
            return pos, z, z.clone()
        k = torch.stack([self._dec(e[1]) for e in contents])
        v = torch.stack([self._dec(e[2]) for e in contents])
        return pos, k, v

    def nbytes(self) -> int:
        limbs = 3 if self.dtype == torch.float64 else 1
        return 2 * self.window * self.shape[0] * self.shape[1] * 4 * limbs


def _construct(factory: Callable[..., Any], width: int) -> Any:
    """Build a protocol cache; pass ``width`` (floats per key/value) when the factory takes it
    (``impl.ring.CRing(width)``), else call it with no arguments (DESIGN §4)."""
    import inspect

    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    if "width" in params:
        return factory(width=width)
    return factory()


def _c_ring_factory() -> Callable[[], Any]:
    try:
        from impl.ring import CRing  # type: ignore[import-not-found]
    except Exception as e:  # noqa: BLE001 - any import/build failure means "not here"
        raise BackendUnavailable(
            f"cache backend 'c' needs impl.ring.CRing (the C ring bindings), which is unavailable: "
            f"{type(e).__name__}: {e}") from e
    return CRing


class RingKVCache:
    """Per-layer sliding-window KV cache: what :meth:`Decoder.forward_cached` reads and extends.

    ``windows``: ``None`` → the config's per-layer windows; an int → that window
    for every *sliding* layer (global layers stay global); a list → per layer.
    ``backend``: ``"torch"`` (tensors on ``device``), ``"c"`` (``impl.ring.CRing``)
    or ``"protocol"`` with ``ring_factory`` (any DESIGN §4 cache class). Global
    layers always use torch storage (a ring needs a finite window).

    ``n`` is the number of tokens seen: the next token's position.
    """

    store_cls = TorchRingStore

    def __init__(self, config: DecoderConfig, windows: Any = None, *, backend: str = "torch",
                 dtype: torch.dtype | None = None, device: Any = None,
                 ring_factory: Callable[[], Any] | None = None):
        if not isinstance(config, DecoderConfig):
            raise CacheMismatchError(f"RingKVCache needs a DecoderConfig, got {type(config).__name__}")
        self.config = config
        self.windows = _override_windows(config, windows)
        self.dtype = dtype if dtype is not None else config.torch_dtype
        self.device = torch.device(device if device is not None else config.device)
        self.backend = backend
        if backend == "torch":
            factory = None
        elif backend == "c":
            factory = _c_ring_factory()
        elif backend == "protocol":
            if ring_factory is None:
                raise DecoderError("backend 'protocol' needs ring_factory (a class with reset/push/push_chunk/contents)")
            factory = ring_factory
        else:
            raise DecoderError(f"unknown cache backend {backend!r}; use 'torch', 'c' or 'protocol'")
        kvh, hd = config.n_kv_heads, config.head_dim
        self.stores: list[Any] = []
        for w in self.windows:
            if factory is None or w is None:
                self.stores.append(self.store_cls(w, kvh, hd, self.dtype, self.device))
            else:
                self.stores.append(ProtocolRingStore(w, kvh, hd, self.dtype, self.device, factory))
        self.n = 0

    def next_position(self) -> int:
        """The position of the next token: the number of tokens seen (never the cache length)."""
        return self.n

    def length(self, layer: int = 0) -> int:
        """Entries held by ``layer`` (``min(W, n)`` for a sliding layer)."""
        return int(self.stores[layer].read()[0].shape[0])

    def read(self, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.stores[layer].read()

    def commit(self, positions: list[int], new_k: list[torch.Tensor], new_v: list[torch.Tensor]) -> None:
        """Write one chunk's K/V (``[T, KVH, D]`` per layer) into every layer and advance ``n``."""
        for store, k, v in zip(self.stores, new_k, new_v):
            store.write(positions, k, v)
        self.n += len(positions)

    def snapshot(self) -> list[LayerSnapshot]:
        """Per layer: positions and K/V in logical order (copies)."""
        out = []
        for w, store in zip(self.windows, self.stores):
            pos, k, v = store.read()
            out.append(LayerSnapshot(w, [int(p) for p in pos.tolist()], k.clone(), v.clone()))
        return out

    def kv_bytes(self) -> int:
        """Bytes of K/V storage held over all layers."""
        return sum(s.nbytes() for s in self.stores)


# ---------------------------------------------------------------------------
# The model


@dataclass
class FullOutput:
    logits: torch.Tensor  # [n, vocab]
    keys: list[torch.Tensor]  # per layer [n, KVH, D], post-RoPE at absolute positions
    values: list[torch.Tensor]


def _device_eq(a: torch.device, b: torch.device) -> bool:
    return a.type == b.type and (a.index or 0) == (b.index or 0)


class Decoder:
    """Decoder-only transformer: embedding → L × (RMSNorm, GQA attention with RoPE, residual,
    RMSNorm, SiLU-gated MLP, residual) → final RMSNorm → LM head (untied).

    Weights are drawn from ``torch.Generator().manual_seed(config.seed)`` on the
    CPU in float64 and then cast/moved, so a config fixes the weights on every
    device. ``self.w`` maps HF-like names (``layers.0.self_attn.q_proj``) to tensors.

    Subclass hooks (the mutants in ``impl.mutants.decoder_mutants`` override one each):
    :meth:`_full_mask`, :meth:`_cached_mask`, :meth:`_key_rope_positions`;
    ``cache_cls`` is the cache :meth:`new_cache` builds.
    """

    cache_cls = RingKVCache

    def __init__(self, config: DecoderConfig | None = None, **overrides: Any):
        if config is None:
            config = DecoderConfig(**overrides)
        elif overrides:
            from dataclasses import replace
            config = replace(config, **overrides)
        self.config = config
        self.dtype = config.torch_dtype
        self.device = torch.device(config.device)
        c = config
        g = torch.Generator().manual_seed(int(c.seed))

        def lin(out: int, inp: int) -> torch.Tensor:
            return torch.randn((out, inp), generator=g, dtype=torch.float64) / math.sqrt(inp)

        def norm(d: int) -> torch.Tensor:
            return 1.0 + 0.1 * torch.randn((d,), generator=g, dtype=torch.float64)

        w: dict[str, torch.Tensor] = {"embed_tokens": torch.randn((c.vocab, c.d_model), generator=g, dtype=torch.float64)}
        for i in range(c.layers):
            p = f"layers.{i}."
            w[p + "input_layernorm"] = norm(c.d_model)
            w[p + "self_attn.q_proj"] = lin(c.n_heads * c.head_dim, c.d_model)
            w[p + "self_attn.k_proj"] = lin(c.n_kv_heads * c.head_dim, c.d_model)
            w[p + "self_attn.v_proj"] = lin(c.n_kv_heads * c.head_dim, c.d_model)
            w[p + "self_attn.o_proj"] = lin(c.d_model, c.n_heads * c.head_dim)
            w[p + "post_attention_layernorm"] = norm(c.d_model)
            w[p + "mlp.gate_proj"] = lin(c.ff, c.d_model)
            w[p + "mlp.up_proj"] = lin(c.ff, c.d_model)
            w[p + "mlp.down_proj"] = lin(c.d_model, c.ff)
        w["norm"] = norm(c.d_model)
        w["lm_head"] = lin(c.vocab, c.d_model)
        self.w = {k: v.to(dtype=self.dtype, device=self.device) for k, v in w.items()}
        self.scale = 1.0 / math.sqrt(c.head_dim)

    # -- HF interop -----------------------------------------------------------

    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        """The weights under Hugging Face ``LlamaForCausalLM``/``MistralForCausalLM`` names."""
        out = {}
        for k, v in self.w.items():
            out[("lm_head" if k == "lm_head" else "model." + k) + ".weight"] = v
        return out

    # -- hooks ----------------------------------------------------------------

    def _full_mask(self, q_pos: torch.Tensor, k_pos: torch.Tensor, window: int | None) -> torch.Tensor:
        """Mask of the full forward (reference path)."""
        return window_mask(q_pos, k_pos, window)

    def _cached_mask(self, q_pos: torch.Tensor, k_pos: torch.Tensor, window: int | None) -> torch.Tensor:
        """Mask of the cached path over ``[cached window ++ chunk]``."""
        return window_mask(q_pos, k_pos, window)

    def _key_rope_positions(self, positions: torch.Tensor, window: int | None) -> torch.Tensor:
        """Positions new keys are rotated at before caching: their absolute positions."""
        return positions

    # -- validation -------------------------------------------------------------

    def check_tokens(self, tokens: Any) -> list[int]:
        """Token ids as a list of ints, or :class:`TokenError`/:class:`EmptyPromptError`."""
        if isinstance(tokens, torch.Tensor):
            if tokens.dim() != 1:
                raise TokenError(f"tokens must be 1-D, got shape {tuple(tokens.shape)}")
            if tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
                raise TokenError(f"tokens must be integer ids, got dtype {tokens.dtype}")
            tokens = tokens.tolist()
        elif _is_int(tokens):
            tokens = [tokens]
        try:
            tokens = list(tokens)
        except TypeError:
            raise TokenError(f"tokens must be a sequence of ints, got {type(tokens).__name__}") from None
        if not tokens:
            raise EmptyPromptError("empty prompt: at least one token is needed")
        for i, t in enumerate(tokens):
            if not _is_int(t) or not 0 <= int(t) < self.config.vocab:
                raise TokenError(f"token #{i} = {t!r} is outside the vocabulary [0, {self.config.vocab})")
        return [int(t) for t in tokens]

    def check_cache(self, cache: Any) -> None:
        """:class:`CacheMismatchError` unless ``cache`` was built for this model's config, dtype, device."""
        if not isinstance(cache, RingKVCache):
            raise CacheMismatchError(f"expected a RingKVCache, got {type(cache).__name__}")
        if cache.config != self.config:
            raise CacheMismatchError("cache was built for another config: " + "; ".join(cache.config.diff(self.config, "cache", "model")))
        if cache.dtype != self.dtype:
            raise CacheMismatchError(f"cache dtype {cache.dtype} != model dtype {self.dtype}")
        if not _device_eq(cache.device, self.device):
            raise CacheMismatchError(f"cache device {cache.device} != model device {self.device}")

    # -- forward ------------------------------------------------------------------

    def new_cache(self, window: Any = None, backend: str = "torch", **kw: Any) -> RingKVCache:
        """A fresh cache for this model (``window`` overrides the sliding layers' window)."""
        return self.cache_cls(self.config, window, backend=backend, **kw)

    def _rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return rope_cos_sin(positions, self.config.head_dim, self.config.rope_theta, self.dtype, self.device)

    def _layer(self, i: int, x: torch.Tensor, q_pos: torch.Tensor, window: int | None,
               past: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None, mask_fn: Callable,
               q_rope: tuple[torch.Tensor, torch.Tensor],
               k_rope: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One layer; ``q_rope``/``k_rope`` are the ``(cos, sin)`` queries and new keys are rotated by
        (computed once per forward by the caller, not once per layer)."""
        c, w, p = self.config, self.w, f"layers.{i}."
        T = x.shape[0]
        h = rms_norm(x, w[p + "input_layernorm"], c.rms_eps)
        q = (h @ w[p + "self_attn.q_proj"].T).view(T, c.n_heads, c.head_dim).transpose(0, 1)
        k = (h @ w[p + "self_attn.k_proj"].T).view(T, c.n_kv_heads, c.head_dim).transpose(0, 1)
        v = (h @ w[p + "self_attn.v_proj"].T).view(T, c.n_kv_heads, c.head_dim).transpose(0, 1)
        q = apply_rope(q, *q_rope)
        k = apply_rope(k, *k_rope)
        new_k, new_v = k.transpose(0, 1), v.transpose(0, 1)  # [T, KVH, D]
        if past is not None and past[0].shape[0]:
            kp = torch.cat([past[0], q_pos])
            K = torch.cat([past[1], new_k]).transpose(0, 1)
            V = torch.cat([past[2], new_v]).transpose(0, 1)
        else:
            kp, K, V = q_pos, k, v
        mask = mask_fn(q_pos, kp, window)
        o = attend(q, K, V, mask, self.scale, c.attn_softcap)
        x = x + o.transpose(0, 1).reshape(T, c.n_heads * c.head_dim) @ w[p + "self_attn.o_proj"].T
        h = rms_norm(x, w[p + "post_attention_layernorm"], c.rms_eps)
        x = x + silu_mlp(h, w[p + "mlp.gate_proj"], w[p + "mlp.up_proj"], w[p + "mlp.down_proj"])
        return x, new_k, new_v

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        x = rms_norm(x, self.w["norm"], self.config.rms_eps)
        return softcap(x @ self.w["lm_head"].T, self.config.final_softcap)

    @torch.no_grad()
    def full_forward(self, tokens: Any, windows: Any = None) -> FullOutput:
        """The reference: all positions ``0..n-1`` at once under causal + window masks.

        ``windows`` as in :class:`RingKVCache` (pass ``cache.windows`` to compare
        against a cache built with a window override).
        """
        toks = self.check_tokens(tokens)
        wins = _override_windows(self.config, windows)
        pos = torch.arange(len(toks), device=self.device)
        x = self.w["embed_tokens"][torch.tensor(toks, device=self.device)]
        rope = self._rope(pos)
        keys, values = [], []
        for i in range(self.config.layers):
            x, k, v = self._layer(i, x, pos, wins[i], None, self._full_mask, rope, rope)
            keys.append(k)
            values.append(v)
        return FullOutput(self._head(x), keys, values)

    @torch.no_grad()
    def forward_cached(self, cache: RingKVCache, tokens: Any) -> torch.Tensor:
        """Prefill or decode ``tokens`` (one or a chunk of any length) at positions
        ``cache.n ..``; returns their logits ``[k, vocab]`` and extends ``cache``.

        Each layer attends over ``[cached window ++ chunk]`` under the window
        mask, so every query in a chunk sees exactly its own window. The cache
        is written only after all layers succeed.
        """
        toks = self.check_tokens(tokens)
        self.check_cache(cache)
        start = cache.next_position()
        q_pos = torch.arange(start, start + len(toks), device=self.device)
        x = self.w["embed_tokens"][torch.tensor(toks, device=self.device)]
        q_rope = self._rope(q_pos)
        new_k, new_v = [], []
        for i in range(self.config.layers):
            w = cache.windows[i]
            past = cache.read(i)
            key_pos = self._key_rope_positions(q_pos, w)
            k_rope = q_rope if key_pos is q_pos else self._rope(key_pos)
            x, k, v = self._layer(i, x, q_pos, w, past, self._cached_mask, q_rope, k_rope)
            new_k.append(k)
            new_v.append(v)
        logits = self._head(x)
        cache.commit(q_pos.tolist(), new_k, new_v)
        return logits

    def prefill(self, cache: RingKVCache, tokens: Any, chunk: int | None = None) -> torch.Tensor:
        """Feed ``tokens`` in chunks of ``chunk`` (default: all at once); logits of every token."""
        toks = self.check_tokens(tokens)
        self.check_cache(cache)
        step = len(toks) if chunk is None else int(chunk)
        if step < 1:
            raise DecoderError(f"chunk must be >= 1, got {chunk!r}")
        return torch.cat([self.forward_cached(cache, toks[i:i + step]) for i in range(0, len(toks), step)])

    def decode(self, cache: RingKVCache, token: int) -> torch.Tensor:
        """One token; its logits ``[vocab]``."""
        return self.forward_cached(cache, [token])[0]

    def generate(self, cache: RingKVCache, prompt: Any, steps: int, chunk: int | None = None) -> list[int]:
        """Greedy decoding with the cache: prefill ``prompt`` (in ``chunk``s), then ``steps`` tokens."""
        logits = self.prefill(cache, prompt, chunk)[-1]
        out = []
        for _ in range(steps):
            t = int(torch.argmax(logits))
            out.append(t)
            logits = self.decode(cache, t)
        return out

    def generate_full(self, prompt: Any, steps: int, windows: Any = None) -> list[int]:
        """Greedy decoding by full recompute of the whole prefix every step (the reference)."""
        seq = self.check_tokens(prompt)
        out = []
        for _ in range(steps):
            t = int(torch.argmax(self.full_forward(seq, windows).logits[-1]))
            out.append(t)
            seq.append(t)
        return out
