"""vLLM's Triton attention kernels (``triton:vllm-unified``), called as vLLM's Triton backend calls them.

The window convention (DESIGN §6), vLLM 0.34.0, one rule for every release:

* the model's ``sliding_window = W`` reaches ``TritonAttentionImpl.__init__``
  (``vllm/v1/attention/backends/triton_attn.py:509-511``): ``self.sliding_window = (sliding_window - 1, 0)``
  for a decoder;
* ``TritonAttentionImpl.forward`` hands it to the kernel as ``window_size=self.sliding_window``
  (``triton_attn.py:713``);
* ``unified_attention`` turns it into the kernel's ``SLIDING_WINDOW=(1 + window_size[0])``
  (``vllm/v1/attention/ops/triton_unified_attention.py:1433``), whose mask is ``q - k < SLIDING_WINDOW``
  (``:685-696``).

:func:`window_size` **drives the glue**: it builds the installed release's own ``TritonAttentionImpl`` with
``sliding_window=W`` and reads what its ``__init__`` computed. Importing the backend module needs more of
vLLM's dependencies than the kernel files do (``pip install 'kvwindow[triton-vllm]'`` installs them); where
it cannot be imported the formula is restated from the lines above and :func:`glue` says so.

The 2D/3D choice is vLLM's: the 3D (split-KV) kernel runs when the backend's scratch buffers are passed and
the batch is small — ``seq_threshold_3D = MIN_LAUNCH_GRID_SIZE_2D // num_kv_heads`` (``triton_attn.py:136``),
``NUM_PAR_SOFTMAX_SEGMENTS`` segments (``:151``), multi-token queries up to ``MAX_3D_QUERY_LEN``
(``triton_unified_attention.py:37``). :func:`unified` passes those buffers (filled with NaN) for the 3D
view and reports whether the split-KV path wrote them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

from impl.engines import EngineIncompatible, EngineUnavailable, installed
from impl.engines import triton_env

DIST, EXTRA = "vllm", "triton-vllm"
INSTALL = "pip install 'kvwindow[triton-vllm]' (triton, and vLLM's kernel files: pip install --no-deps vllm)"


def release() -> str:
    triton_env.prepare()
    try:
        return installed(DIST, EXTRA)
    except EngineUnavailable:
        raise EngineUnavailable(f"vllm is not installed ({INSTALL})") from None


def kernel_module(name: str, function: Optional[str] = None):
    """``vllm.v1.attention.ops.<name>`` (every Triton kernel target imports its kernel file so):
    :class:`EngineIncompatible` where the release has no such module or no ``function`` in it,
    :class:`EngineUnavailable` where the kernel file's own imports are not installed."""
    import importlib

    rel = release()
    try:
        m = importlib.import_module(f"vllm.v1.attention.ops.{name}")
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith("vllm.v1.attention.ops"):
            raise EngineIncompatible("vllm", rel, f"vllm.v1.attention.ops.{name}", "no such module") from e
        raise EngineUnavailable(f"vllm {rel}: its kernel files need module {e.name} ({INSTALL})") from e
    if function is not None and not hasattr(m, function):
        raise EngineIncompatible("vllm", rel, f"{name}.{function}", "no such function")
    return m


@lru_cache(maxsize=1)
def ops():
    """The kernel module; :class:`EngineIncompatible` where the release moved it."""
    return kernel_module("triton_unified_attention", "unified_attention")


@lru_cache(maxsize=1)
def _backend():
    """``(TritonAttentionImpl, backend module)`` or ``(None, why)`` where the backend cannot be imported."""
    try:
        from vllm.v1.attention.backends import triton_attn as b
        return b.TritonAttentionImpl, b
    except Exception as e:  # noqa: BLE001 - the glue is restated then, and the report says why
        return None, f"{type(e).__name__}: {e}"


def glue() -> str:
    """How the window reached the kernel in this process: the release's own glue, or the restated formula."""
    impl, b = _backend()
    if impl is not None:
        return "driven: vllm.v1.attention.backends.triton_attn.TritonAttentionImpl(sliding_window=W).sliding_window"
    return f"restated (triton_attn.py:509-511, (W - 1, 0)): the backend module does not import here: {b}"


@lru_cache(maxsize=256)
def window_size(window: int, heads: int = 2, kv_heads: int = 1, head_size: int = 16) -> tuple[int, int]:
    """The spec's ``W`` as the ``window_size`` vLLM's Triton backend passes to ``unified_attention``."""
    impl, _ = _backend()
    if impl is None:
        return (int(window) - 1, 0)  # restated: triton_attn.py:511
    a = impl(heads, head_size, head_size ** -0.5, kv_heads, None, sliding_window=int(window), kv_cache_dtype="auto")
    return tuple(a.sliding_window)


def split_kv_params(kv_heads: int) -> tuple[int, int, int]:
    """``(seq_threshold_3D, segments, MAX_3D_QUERY_LEN)`` as the backend's metadata builder sets them."""
    m = ops()
    impl, b = _backend()
    grid = getattr(b, "MIN_LAUNCH_GRID_SIZE_2D", 128) if impl is not None else 128  # triton_attn.py:58
    segs = getattr(b, "NUM_PAR_SOFTMAX_SEGMENTS", 16) if impl is not None else 16  # triton_attn.py:59
    return grid // kv_heads, segs, int(getattr(m, "MAX_3D_QUERY_LEN", 8))


def unified(q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table, window: int, scale: float,
            split_kv: bool, max_q: int, max_k: int) -> tuple[object, Optional[bool]]:
    """One ``unified_attention`` launch over a varlen batch (``q [T, H, D]``, caches ``[blocks, B, Hkv, D]``,
    ``block_table [seqs, max_blocks] int32``); returns ``(out, split)``: ``split`` says whether the 3D
    kernel wrote its segment buffers (``None`` for the 2D view, where none are passed)."""
    import torch

    m = ops()
    heads, dim = q.shape[1], q.shape[2]
    kv_heads = k_cache.shape[2]
    out = torch.full_like(q, float("nan"))
    kw = {}
    if split_kv:
        thr, segs, _ = split_kv_params(kv_heads)
        rows = q.shape[0]
        padded = 1 << max(0, (dim - 1).bit_length())
        kw = dict(seq_threshold_3D=thr, num_par_softmax_segments=segs,
                  softmax_segm_output=torch.full((rows, heads, segs, padded), float("nan")),
                  softmax_segm_max=torch.full((rows, heads, segs), float("nan")),
                  softmax_segm_expsum=torch.full((rows, heads, segs), float("nan")))
    m.unified_attention(q, k_cache, v_cache, out, cu_seqlens_q, max_q, seq_lens, max_k, scale, True,
                        window_size(window, heads, kv_heads, dim), block_table, 0, None, None, None, **kw)
    split = None
    if split_kv:
        split = not bool(torch.isnan(kw["softmax_segm_max"]).all())
    return out, split


# -- triton:vllm-prefix: prefix_prefill.context_attention_fwd, as chunked_prefill_paged_decode calls it -------------
#
# vLLM's ROCm attention backend (the caller of this path in 0.34.0) keeps ``self.sliding_window = (W - 1, 0)``
# (``vllm/v1/attention/backends/rocm_attn.py:293``) and hands ``chunked_prefill_paged_decode``
# ``sliding_window=1 + self.sliding_window[0]`` (``rocm_attn.py:469``: "expects the full window length W"). That op
# runs ``context_attention_fwd(..., skip_decode=True)`` for the batch when any sequence has more than one query
# (``ops/chunked_prefill_paged_decode.py:334-358``) — driven here with exactly those arguments — and then its paged
# decode kernel for the one-query sequences, which is **not driven**: the op imports ``vllm.platforms.rocm`` first
# (``:389``), whose import probes the GPU's architecture (``platforms/rocm.py:209``) and fails without a ROCm
# device. Caches are in the op's native layout ``key [blocks, Hkv, D/x, B, x]``, ``value [blocks, Hkv, D, B]``
# (``x = 16 / element size``; ``:49``).


@lru_cache(maxsize=1)
def prefix_ops():
    return kernel_module("prefix_prefill")


@lru_cache(maxsize=1)
def _rocm_backend():
    try:
        from vllm.v1.attention.backends import rocm_attn as b
        return b.RocmAttentionImpl, None
    except Exception as e:  # noqa: BLE001 - restated then
        return None, f"{type(e).__name__}: {e}"


def prefix_glue() -> str:
    impl, why = _rocm_backend()
    if impl is not None:
        return "driven: 1 + RocmAttentionImpl(sliding_window=W).sliding_window[0] (rocm_attn.py:469)"
    return f"restated (rocm_attn.py:293,469: W): the backend module does not import here: {why}"


@lru_cache(maxsize=256)
def prefix_sliding_window(window: int, heads: int = 2, kv_heads: int = 1, head_size: int = 16) -> int:
    """The spec's ``W`` as the ``sliding_window`` the ROCm backend passes to ``chunked_prefill_paged_decode``."""
    impl, _ = _rocm_backend()
    if impl is None:
        return int(window)  # restated: 1 + (W - 1)
    a = impl(heads, head_size, head_size ** -0.5, kv_heads, None, sliding_window=int(window), kv_cache_dtype="auto")
    return 1 + a.sliding_window[0]


def native_layout(k_cache, v_cache):
    """``[blocks, B, Hkv, D]`` caches as the op's native layout (``key [blocks, Hkv, D/x, B, x]``,
    ``value [blocks, Hkv, D, B]``)."""
    blocks, b, hkv, d = k_cache.shape
    x = 16 // k_cache.element_size()
    if d % x:
        raise EngineIncompatible("vllm", release(), "chunked_prefill_paged_decode key layout",
                                 f"head size {d} is not a multiple of x = {x}")
    key = k_cache.reshape(blocks, b, hkv, d // x, x).permute(0, 2, 3, 1, 4).contiguous()
    value = v_cache.permute(0, 2, 3, 1).contiguous()
    return key, value


def context_attention(q, k_new, v_new, k_cache, v_cache, block_table, cu_seqlens_q, seq_lens, max_q, max_k,
                      window: int, scale: float):
    """``context_attention_fwd`` as ``chunked_prefill_paged_decode`` calls it (``:334-358``; the ROCm backend's
    arguments, ``rocm_attn.py:451-472``): one-query sequences are skipped (``skip_decode=True``), their rows untouched."""
    import torch

    m = prefix_ops()
    key, value = native_layout(k_cache, v_cache)
    out = torch.full_like(q, float("nan"))
    one = torch.tensor(1.0)
    heads, dim = q.shape[1], q.shape[2]
    m.context_attention_fwd(q=q, k=k_new, v=v_new, o=out, kv_cache_dtype="auto", k_cache=key, v_cache=value,
                            b_loc=block_table, b_start_loc=cu_seqlens_q, b_seq_len=seq_lens, max_seq_len=max_k,
                            max_input_len=max_q, k_scale=one, v_scale=one, alibi_slopes=None,
                            sliding_window=prefix_sliding_window(window, heads, k_cache.shape[2], dim),
                            sm_scale=scale, skip_decode=True, fp8_out_scale=None, sinks=None,
                            interleaved_v_pack_factor=0, causal=True)
    return out
