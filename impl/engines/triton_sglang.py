"""SGLang's Triton attention kernels (``triton:sglang-decode``, ``triton:sglang-extend``), called with the window
buffers SGLang's Triton backend builds.

The window convention (DESIGN §6), SGLang 0.5.23, one rule for every release:

* a model with ``sliding_window = W`` reports ``W - 1``: ``sglang/srt/models/gemma2.py:52-53``
  ``get_attention_sliding_window_size(config): return config.sliding_window - 1`` (the same in gemma3,
  mistral-family SWA models), which ``ModelRunner`` stores as ``sliding_window_size``
  (``srt/model_executor/model_runner_components/load_model_utils.py:147-148``, ``model_runner.py:1353``) and
  the Triton backend copies (``srt/layers/attention/triton_backend.py:217``); each ``RadixAttention`` layer
  gets the same ``W - 1`` (``gemma2.py:181-185``);
* **decode** (``triton_backend.py:572-582``, ``:2353-2356``): ``update_sliding_window_buffer`` (``:2845-2891``)
  gives each request ``window_kv_lens = min(seq_lens, sliding_window_size)`` keys — the **last**
  ``window_kv_lens`` token slots of the request, the new token's own included (``seq_lens`` counts it) — and
  ``decode_attention_fwd`` attends over exactly those;
* **extend** (``triton_backend.py:1088-1103``, ``:1812-1821``): the same function over
  ``extend_prefix_lens`` gives the prefix window (``min(prefix, W - 1)`` keys, ``window_kv_offsets = prefix -
  window_kv_lens``), and ``extend_attention_fwd(..., sliding_window_size=W - 1, window_kv_offsets=...)`` masks
  ``q <= k + sliding_window_size`` (``kernels/ops/attention/extend_attention.py:564-569``).

**The glue is restated here, not driven**: importing ``sglang.srt.layers.attention.triton_backend`` needs
``tvm_ffi`` (through ``sgl_kernel``), which does not install on this machine, and most of SGLang's serving
stack. :func:`window_kv` restates ``update_sliding_window_buffer`` line for line (its ``translator`` gathers
``req_to_token[req, start:start + len]``; here the caller's token slots); the kernels themselves are the
installed release's.
"""

from __future__ import annotations

from functools import lru_cache

from impl.engines import EngineIncompatible, EngineUnavailable, installed
from impl.engines import triton_env

DIST, EXTRA = "sglang", "triton-sglang"
INSTALL = "pip install 'kvwindow[triton-sglang]' (triton, and SGLang's kernel files: pip install --no-deps sglang)"
GLUE = ("restated (sglang/srt/layers/attention/triton_backend.py:2845-2891 update_sliding_window_buffer; "
        "sliding_window_size = W - 1, models/gemma2.py:52-53): the backend module needs tvm_ffi, which does not "
        "install here")


def release() -> str:
    triton_env.prepare()
    try:
        return installed(DIST, EXTRA)
    except EngineUnavailable:
        raise EngineUnavailable(f"sglang is not installed ({INSTALL})") from None


def sliding_window_size(window: int) -> int:
    """The spec's ``W`` as SGLang's models report it (``gemma2.py:52-53``: ``config.sliding_window - 1``)."""
    return int(window) - 1


def window_kv(seq_len: int, window: int) -> tuple[int, int]:
    """``(start, length)`` of the window KV list ``update_sliding_window_buffer`` builds for a request whose
    cache holds ``seq_len`` tokens: ``window_kv_lens = min(seq_lens, sliding_window_size)`` and
    ``window_kv_start_idx = seq_lens - window_kv_lens`` (``triton_backend.py:2869-2882``)."""
    length = min(int(seq_len), sliding_window_size(window))
    return int(seq_len) - length, length


@lru_cache(maxsize=1)
def kernels():
    rel = release()
    try:
        from sglang.kernels.ops.attention import decode_attention as d
        from sglang.kernels.ops.attention import extend_attention as e
    except ModuleNotFoundError as err:
        if err.name and err.name.startswith("sglang.kernels"):
            raise EngineIncompatible("sglang", rel, "sglang.kernels.ops.attention", "no such module") from err
        raise EngineUnavailable(f"sglang {rel}: its kernel files need module {err.name} ({INSTALL})") from err
    return d, e


def decode(q, k_buffer, v_buffer, kv_indptr, kv_indices, scale: float, max_kv_splits: int = 8):
    """``decode_attention_fwd`` as the backend calls it (``triton_backend.py:2420-2450``): one query per request,
    ``attn_logits [bs, H, max_kv_splits, Dv]`` and ``attn_lse [bs, H, max_kv_splits]`` scratch."""
    import torch

    d, _ = kernels()
    bs, heads, dim = q.shape
    o = torch.full_like(q, float("nan"))
    logits = torch.empty((bs, heads, max_kv_splits, v_buffer.shape[-1]), dtype=torch.float32)
    lse = torch.empty((bs, heads, max_kv_splits), dtype=torch.float32)
    splits = torch.full((bs,), max_kv_splits, dtype=torch.int32)
    d.decode_attention_fwd(q, k_buffer, v_buffer, o, kv_indptr, kv_indices, logits, lse, splits, max_kv_splits,
                           scale, 1.0, 1.0)
    return o


def extend(q, k, v, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, window_kv_offsets, window: int,
           max_extend: int, scale: float):
    """``extend_attention_fwd`` as the backend's sliding-window extend calls it (``triton_backend.py:1812-1890``):
    the new tokens' ``k, v`` beside the prefix window's token slots, ``sliding_window_size = W - 1``."""
    import torch

    _, e = kernels()
    o = torch.full_like(q, float("nan"))
    e.extend_attention_fwd(q, k, v, o, k_buffer, v_buffer, qo_indptr, kv_indptr, kv_indices, None, True, None,
                           max_extend, 1.0, 1.0, sm_scale=scale, sliding_window_size=sliding_window_size(window),
                           window_kv_offsets=window_kv_offsets)
    return o
