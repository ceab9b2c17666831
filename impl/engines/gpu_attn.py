"""CUDA-only sliding-window attention kernels: FlashAttention (``gpu:flash-attn``) and FlashInfer (``gpu:flashinfer``).

Neither runs without an NVIDIA device (no CPU path, no interpreter): on such a machine :func:`require` raises
:class:`~impl.engines.EngineUnavailable` with one line naming what is missing — the device, the package, or both —
and ``scripts/gpu_check.sh`` runs them where a device is lent (DESIGN §6, "GPU kernels without a GPU").

Window conventions (the spec's ``W``: query ``t`` sees ``t - W + 1 .. t``), as the serving engines' glue maps a
model's ``sliding_window = W`` (vLLM 0.34.0, the release the Triton targets pin; read from its installed source):

* **FlashAttention** ``window_size = (W - 1, 0)`` with ``causal=True``: vLLM's ``FlashAttentionImpl.__init__``
  (``vllm/v1/attention/backends/flash_attn.py:1091-1096``: ``(sliding_window - 1, 0)`` for a decoder). The
  library's contract (``flash_attn/flash_attn_interface.py``, docstrings of ``flash_attn_varlen_func`` and
  ``flash_attn_with_kvcache``): "Query at position i will only attend to keys between [i + seqlen_k - seqlen_q -
  window_size[0], i + seqlen_k - seqlen_q + window_size[1]] inclusive" — bottom-right aligned, so a call's
  queries at ``a .. e-1`` over keys ``0 .. e-1`` see ``t - (W - 1) .. t``. A paged cache
  (``flash_attn_with_kvcache(block_table=...)``) needs "page_block_size ... a multiple of 256" (same docstring).
* **FlashInfer** ``window_left = W - 1``: vLLM's ``FlashInferImpl.__init__`` (``vllm/v1/attention/backends/
  flashinfer.py:2066-2072``: ``sliding_window = (W - 1, 0)``, ``window_left = sliding_window[0]``), handed to
  ``plan(..., window_left=self.window_left)`` (``:1437``, ``:1472``). The library's contract
  (``flashinfer/decode.py`` ``BatchDecodeWithPagedKVCacheWrapper.plan`` and ``flashinfer/prefill.py``
  ``BatchPrefillWithPagedKVCacheWrapper.plan``, parameter ``window_left``): "The left (inclusive) window size for
  the attention window, when set to -1, the window size will be set to the full length of the sequence".

The conventions are restated here, not driven: these targets do not need vLLM (its wheel pins its own torch and
CUDA build, and on a device its backends load its CUDA extension ``vllm._C``); the formulas are one line each and
cited above.
"""

from __future__ import annotations

from importlib import metadata

from impl.engines import EngineUnavailable

#: target -> (PyPI distribution, import name, install line). No kvwindow extra: both are CUDA builds (flash-attn
#: compiles or fetches a CUDA wheel at install time), installed on the device machine by scripts/gpu_check.sh.
PACKAGES = {"flash-attn": ("flash-attn", "flash_attn", "pip install flash-attn --no-build-isolation"),
            "flashinfer": ("flashinfer-python", "flashinfer", "pip install flashinfer-python")}


def require(kind: str) -> str:
    """The installed release of ``kind``'s package where a CUDA device is visible; otherwise
    :class:`EngineUnavailable` with one line naming what is missing."""
    dist, _, line = PACKAGES[kind]
    missing = []
    try:
        import torch

        if not torch.cuda.is_available():
            missing.append(f"no CUDA device (torch {torch.__version__} sees none)")
    except ImportError:
        missing.append("no CUDA device (torch is not installed)")
    try:
        rel = metadata.version(dist)
    except metadata.PackageNotFoundError:
        rel = None
        missing.append(f"{dist} is not installed ({line}; CUDA only)")
    if missing:
        raise EngineUnavailable("; ".join(missing))
    return rel


def window_size(window: int) -> tuple[int, int]:
    """FlashAttention's ``window_size`` for the spec's ``W`` (restated: vLLM ``flash_attn.py:1096``)."""
    return (int(window) - 1, 0)


def window_left(window: int) -> int:
    """FlashInfer's ``window_left`` for the spec's ``W`` (restated: vLLM ``flashinfer.py:2069-2072``)."""
    return int(window) - 1


# -- FlashAttention ------------------------------------------------------------------------------------------------

def fa_varlen(q, k, v, cu_q, cu_k, max_q: int, max_k: int, window: int, scale: float):
    """``flash_attn_varlen_func`` over a ragged batch (``q [Tq, H, D]``, ``k, v [Tk, Hkv, D]`` dense per sequence),
    causal, ``window_size = (W - 1, 0)``."""
    from flash_attn import flash_attn_varlen_func

    return flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, softmax_scale=scale, causal=True,
                                  window_size=window_size(window))


def fa_kvcache(q, k_cache, v_cache, block_table, cache_seqlens, window: int, scale: float):
    """``flash_attn_with_kvcache`` over a paged cache (``q [B, n, H, D]``, caches ``[blocks, 256k, Hkv, D]``,
    ``block_table [B, max_blocks] int32``, ``cache_seqlens [B] int32`` counting the queries' own keys, already in
    the cache), causal, ``window_size = (W - 1, 0)``."""
    from flash_attn import flash_attn_with_kvcache

    return flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=cache_seqlens, block_table=block_table,
                                   softmax_scale=scale, causal=True, window_size=window_size(window))


# -- FlashInfer ----------------------------------------------------------------------------------------------------

def _workspace():
    import torch

    return torch.empty(128 * 1024 * 1024, dtype=torch.uint8, device="cuda")


def fi_decode(q, k_cache, v_cache, indptr, indices, last_page_len, window: int, scale: float):
    """``BatchDecodeWithPagedKVCacheWrapper`` (NHD pages ``[pages, B, Hkv, D]``): one query per request (``q [B, H,
    D]``), ``plan(..., window_left = W - 1)``, then ``run``."""
    import flashinfer

    heads, dim = q.shape[1], q.shape[2]
    w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(_workspace(), "NHD")
    w.plan(indptr, indices, last_page_len, heads, k_cache.shape[2], dim, k_cache.shape[1],
           window_left=window_left(window), sm_scale=scale, q_data_type=q.dtype, kv_data_type=k_cache.dtype)
    return w.run(q, (k_cache, v_cache))


def fi_prefill(q, k_cache, v_cache, qo_indptr, indptr, indices, last_page_len, window: int, scale: float):
    """``BatchPrefillWithPagedKVCacheWrapper`` (NHD pages): a ragged batch of query runs (``q [Tq, H, D]``,
    ``qo_indptr``), ``plan(..., causal=True, window_left = W - 1)``, then ``run`` — prefill, chunked prefill and
    prefix continuation in one launch."""
    import flashinfer

    heads, dim = q.shape[1], q.shape[2]
    w = flashinfer.BatchPrefillWithPagedKVCacheWrapper(_workspace(), "NHD")
    w.plan(qo_indptr, indptr, indices, last_page_len, heads, k_cache.shape[2], dim, k_cache.shape[1], causal=True,
           window_left=window_left(window), sm_scale=scale, q_data_type=q.dtype, kv_data_type=k_cache.dtype)
    return w.run(q, (k_cache, v_cache))
