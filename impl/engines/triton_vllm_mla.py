"""vLLM's Triton MLA decode kernel (``triton:vllm-mla``), called through vLLM's own MLA backend glue.

The window convention (DESIGN §6), vLLM 0.34.0, one rule for every release — vLLM's ``sliding_window = W``
reaches the kernel unchanged:

* ``MLAAttention(sliding_window=W)`` hands it to its impl (``vllm/model_executor/layers/attention/
  mla_attention.py:602``) and its KV spec (``:1587-1590``, ``SlidingWindowMLASpec``);
* ``TritonMLAImpl.__init__`` keeps it as ``self.decode_sliding_window = sliding_window``
  (``vllm/v1/attention/backends/mla/triton_mla.py:207-208``: "Each decode row attends to the last
  ``decode_sliding_window`` keys");
* ``TritonMLAImpl.forward_mqa`` passes ``sliding_window=self.decode_sliding_window`` to ``decode_attention_fwd``
  (``triton_mla.py:360-376``), which starts every row's keys at ``window_start = max(seq_len - SLIDING_WINDOW, 0)``
  (``vllm/v1/attention/ops/triton_decode_attention.py:119-124`` one head per kv head, ``:362-367`` grouped/MLA,
  ``:623-628`` the split-KV reduction): the row's last ``W`` keys, its own included — the spec's window.

**Decode only.** The backend says so (``triton_mla.py:155-158``, "Decode only (windowed DSpark drafts); prefill
raises") and ``forward_mha`` raises ``NotImplementedError("Sliding-window Triton MLA prefill")`` when a window
is set (``:271-275``). What a window does reach is ``forward_mqa``, for one-token decode rows and for uniform
multi-token causal decode blocks, which it flattens to one row per query token with per-row extents
``seq_len - query_len + 1 + t`` (``:339-353``). :func:`forward_mqa` drives exactly that method of the installed
release's own ``TritonMLAImpl`` — the glue's window and its per-row extents are part of what is tested.

Building the impl on a CPU: ``MLACommonImpl.__init__`` reads the current ``VllmConfig`` (only its
``decode_context_parallel_size``, ``mla_attention.py:3600-3602``), so it is built inside
``set_current_vllm_config`` with a CPU ``DeviceConfig``; ``TritonMLAImpl.__init__`` reads
``current_platform.num_compute_units()`` (``triton_mla.py:255``), which vLLM's CPU-less platform does not
implement: while it is built, that method returns :data:`SM_COUNT` (an H100's / H200's 132 SMs). The value only
caps ``num_kv_splits`` (``_compute_num_kv_splits``, ``:47-53``: ``next_power_of_2(max_kv_len // 512)``, 1 for any
window under 1,024). Where the backend module does not import (it needs more of vLLM's pure-Python
dependencies than the kernel file: ``[triton-vllm]``), the glue is restated from the lines above and
:func:`glue` says so.

Layout (``forward_mqa``): the cache is ``kv_c_and_k_pe_cache [blocks, B, kv_lora_rank + rope_dim]`` — one latent
"kv head"; the values are its first ``kv_lora_rank`` columns (``:324-325``); queries ``[rows, heads, kv_lora_rank
+ rope_dim]``, outputs ``[rows, heads, kv_lora_rank]``. The backend takes blocks that are multiples of 16
(``triton_mla.py:125-133``); the kernel takes any ``PAGE_SIZE``.
"""

from __future__ import annotations

import inspect
from functools import lru_cache
from types import SimpleNamespace
from typing import Optional

from impl.engines import EngineIncompatible
from impl.engines import triton_vllm as V

#: What ``current_platform.num_compute_units()`` returns while the impl is built on a CPU (module docstring).
SM_COUNT = 132


@lru_cache(maxsize=1)
def ops():
    """The kernel module; :class:`EngineIncompatible` where the release moved it, or where its
    ``decode_attention_fwd`` takes no ``sliding_window`` (then the MLA path applies no window at all)."""
    rel = V.release()
    m = V.kernel_module("triton_decode_attention", "decode_attention_fwd")
    fn = m.decode_attention_fwd
    if "sliding_window" not in inspect.signature(fn).parameters:
        raise EngineIncompatible("vllm", rel, "triton_decode_attention.decode_attention_fwd",
                                 "takes no sliding_window: this release's MLA decode applies no window")
    return m


@lru_cache(maxsize=1)
def _backend():
    """``(triton_mla module, None)`` or ``(None, why)`` where the backend cannot be imported."""
    try:
        from vllm.v1.attention.backends.mla import triton_mla as b
        return b, None
    except Exception as e:  # noqa: BLE001 - the glue is restated then, and the report says why
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def glue() -> str:
    b, why = _backend()
    if b is not None:
        return ("driven: vllm.v1.attention.backends.mla.triton_mla.TritonMLAImpl(sliding_window=W).forward_mqa "
                "(decode_sliding_window, triton_mla.py:208,375)")
    return f"restated (triton_mla.py:208,339-376: sliding_window = W, per-row extents): the backend does not import here: {why}"


@lru_cache(maxsize=64)
def impl(window: int, heads: int, lora: int, rope: int, scale: float):
    """The installed release's ``TritonMLAImpl`` for a layer with ``sliding_window=window`` (``None`` where the
    backend does not import)."""
    b, _ = _backend()
    if b is None:
        return None
    from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config
    from vllm.platforms import current_platform

    cls = type(current_platform)
    own = cls.__dict__.get("num_compute_units")
    try:
        current_platform.num_compute_units()
        patched = False
    except NotImplementedError:
        cls.num_compute_units = classmethod(lambda c, device_id=0: SM_COUNT)
        patched = True
    try:
        with set_current_vllm_config(VllmConfig(device_config=DeviceConfig(device="cpu"))):
            return b.TritonMLAImpl(num_heads=heads, head_size=lora + rope, scale=scale, num_kv_heads=1,
                                   alibi_slopes=None, sliding_window=int(window), kv_cache_dtype="auto",
                                   logits_soft_cap=None, attn_type="decoder", kv_sharing_target_layer_name=None,
                                   q_lora_rank=None, kv_lora_rank=lora, qk_nope_head_dim=lora, qk_rope_head_dim=rope,
                                   qk_head_dim=lora + rope, v_head_dim=lora, kv_b_proj=None)
    finally:
        if patched:
            if own is None:
                del cls.num_compute_units
            else:
                cls.num_compute_units = own


def decode_window(window: int, heads: int = 4, lora: int = 16, rope: int = 8) -> int:
    """The spec's ``W`` as the ``sliding_window`` vLLM's Triton MLA backend hands ``decode_attention_fwd``."""
    i = impl(int(window), heads, lora, rope, (lora + rope) ** -0.5)
    return int(window) if i is None else int(i.decode_sliding_window)  # restated: triton_mla.py:208


def forward_mqa(q, cache, block_table, seq_lens, query_len: int, window: int, lora: int, scale: float):
    """One decode batch as ``TritonMLAImpl.forward_mqa`` runs it: ``q [requests * query_len, heads, lora + rope]``
    (request-major), ``cache [blocks, B, lora + rope]``, ``block_table [requests, max_blocks]``, ``seq_lens
    [requests]`` (each request's keys, its block's tokens included); a causal block of ``query_len`` rows per
    request. Returns the output ``[rows, heads, lora]``."""
    import torch

    heads, width = q.shape[1], q.shape[2]
    i = impl(int(window), heads, lora, width - lora, scale)
    meta = SimpleNamespace(decode=SimpleNamespace(block_table=block_table, seq_lens=seq_lens),
                           max_seq_len=int(seq_lens.max()), causal=True)
    if i is not None:
        out, _ = i.forward_mqa(q, cache, meta, SimpleNamespace(_k_scale=torch.tensor(1.0)))
        return out
    return _restated_forward_mqa(q, cache, meta, query_len, window, lora, scale)


def _restated_forward_mqa(q, cache, meta, query_len: int, window: int, lora: int, scale: float):
    """``triton_mla.py:291-376`` restated (batch-invariant mode off, no workspace manager): used only where the
    backend module does not import."""
    import torch

    m = ops()
    rows, heads = q.shape[0], q.shape[1]
    max_kv = min(meta.max_seq_len, window)
    splits = min(1 << max(0, (max(1, max_kv // 512) - 1).bit_length()), SM_COUNT * 2)
    o = torch.zeros(rows, heads, lora, dtype=q.dtype)
    lse = torch.zeros(rows, heads, dtype=q.dtype)
    logits = torch.empty((rows, heads, splits, lora + 1), dtype=torch.float32)
    kv = cache.unsqueeze(2)
    table, lens = meta.decode.block_table, meta.decode.seq_lens
    if query_len > 1:
        table = table.repeat_interleave(query_len, dim=0)
        lens = (lens.unsqueeze(1) + torch.arange(1 - query_len, 1, dtype=lens.dtype)).flatten().clamp(min=0)
    one = torch.tensor(1.0)
    m.decode_attention_fwd(q, kv, kv[..., :lora], o, lse, table, lens, logits, splits, scale, kv.size(1),
                           k_scale=one, v_scale=one, is_mla=True, sliding_window=int(window))
    return o


def decode_rows(q, cache, block_table, seq_lens, window: int, lora: int, scale: float, splits: int,
                sliding_window: Optional[int] = None):
    """``decode_attention_fwd`` itself over one row per query (``block_table`` and ``seq_lens`` per row), with
    ``splits`` KV splits — what ``forward_mqa`` launches when ``next_power_of_2(min(max_seq_len, W) // 512)`` is ``splits``
    (``_compute_num_kv_splits``), on short rows. ``sliding_window``: the glue's value (:func:`decode_window`)."""
    import torch

    m = ops()
    rows, heads = q.shape[0], q.shape[1]
    o = torch.full((rows, heads, lora), float("nan"), dtype=q.dtype)
    lse = torch.zeros(rows, heads, dtype=q.dtype)
    logits = torch.full((rows, heads, splits, lora + 1), float("nan"), dtype=torch.float32)
    kv = cache.unsqueeze(2)
    one = torch.tensor(1.0)
    sw = decode_window(window, heads, lora, q.shape[2] - lora) if sliding_window is None else sliding_window
    m.decode_attention_fwd(q, kv, kv[..., :lora], o, lse, block_table, seq_lens, logits, splits, scale, kv.size(1),
                           k_scale=one, v_scale=one, is_mla=True, sliding_window=sw)
    return o
