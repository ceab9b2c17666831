"""OpenVINO: its ``PagedAttentionExtension`` operator as a one-op model on the CPU plugin (``ov:paged``), and
tiny seeded Hugging Face models exported to OpenVINO IR (``ov:<model_type>``, :mod:`impl.engines.ov_models`).

**The window convention of the op** (input 10, ``sliding_window``, i32 scalar). The operator spec
(``docs/articles_en/documentation/openvino-ir-format/operation-sets/operation-specs/internal/paged-attention.rst``,
"Phase 3"): ``start = 0; ... if sw > 0: start = max(start, qpos + 1 - sw)`` and the query at ``qpos`` attends
``kpos in range(start, qpos + 1)``: ``sw`` keys including its own, so the spec's ``W`` is ``sliding_window = W``
(``0`` = full causal attention). The graph pass that writes the input from a model's own mask
(``src/common/transformations/src/transformations/sdpa_to_paged_attention/state_management_pattern.cpp``,
``StateManagementPattern`` callback, the ``sliding_window`` block after ``pa_arguments`` is built): gpt-oss's mask
``kv_idx > q_idx + offset`` gives ``sliding_window = -offset`` (``offset = -W``: ``W``); Phi-3's mask gives
``2 - offset``; any other model's mask is not read and the input is the constant ``0`` (full attention: the
window lives on only in the mask the pass removed). openvino.genai runs that pass
(``paged_attention_transformation``); this module builds the op directly with ``sliding_window = W``
(:func:`sliding_window`), the op spec's reading. ``tests/test_ov.py`` drives the pass over optimum-intel's export of
a tiny Mistral / Gemma 3 (transformers traces the ``kv_idx > q_idx + offset`` form): it writes ``W`` (``0`` in a
full-attention layer), the same value.

**Block size.** The CPU plugin chooses the cache layout itself: whatever ``key_cache`` shape the model declares,
the compiled model's ``key_cache`` input is ``[blocks, Hkv, 32, D]`` (2026.4; :func:`PagedModel.block` reads it
from the compiled model, never assumes it). Its cache precision defaults to u8 (quantized keys and values with
per-token scales): the models here set ``KV_CACHE_PRECISION`` to the payload's own precision so the comparison is
about the window, not the quantizer.

**Inputs the release adds.** The op's arity grew release by release (25 inputs in the spec text above, 28 in
2026.4: ``token_type_ids``, ``qq_bias``, ``qq_bias_begins``); :func:`_trailing` fills every input after
``max_context_len`` with the empty/zero constant the graph pass itself writes when the feature is off, and
:func:`arity` learns the count from the op's own validation message (feature detection, never a version number).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import numpy as np

from impl.engines import EngineIncompatible, installed

DIST, EXTRA = "openvino", "ov"
#: What the CPU plugin's PagedAttention runs (f16 cache and compute where the CPU has it, else emulated in f32).
DTYPES = ("float32", "float16")
NOT_DRIVEN = {"bfloat16": "not tried: the ov:paged target draws the kernel targets' dtypes (fp32, fp16)"}


def release() -> str:
    return installed(DIST, EXTRA)


def sliding_window(window: int) -> int:
    """The spec's ``W`` as PagedAttention's ``sliding_window`` input (the op spec: ``start = qpos + 1 - sw``)."""
    return int(window)


#: (element type, shape) of the inputs after ``max_context_len`` (index 13 on), as the graph pass writes them when
#: the feature is off (state_management_pattern.cpp): score_aggregation_window, rotated_block_indices,
#: rotation_deltas, rotation_trig_lut, xattention_threshold, xattention_block_size, xattention_stride, sinks,
#: adaptive_rkv_start_size, adaptive_rkv_evictable_sizes, adaptive_rkv_diversity_block_set_indices(+_begins),
#: token_type_ids, qq_bias, qq_bias_begins.
TRAILING = (("i32", (0,)), ("i32", (0,)), ("i32", (0,)), ("f32", (0,)), ("f32", (0,)), ("i32", ()), ("i32", ()),
            ("f32", (0, 0, 0, 0)), ("i32", ()), ("i32", (0,)), ("i32", (0,)), ("i32", (0,)), ("i32", (0,)),
            ("u8", (0,)), ("i32", (0,)))
_NP = {"i32": np.int32, "f32": np.float32, "u8": np.uint8}


def _trailing(n: int) -> list:
    from openvino import opset13 as ops

    if n > len(TRAILING):
        raise EngineIncompatible(DIST, release(), "PagedAttentionExtension inputs",
                                 f"the op takes {13 + n} inputs; the adapter knows {13 + len(TRAILING)}")
    return [ops.constant(np.zeros(shape, _NP[t])).output(0) for t, shape in TRAILING[:n]]


@dataclass(frozen=True)
class Heads:
    heads: int
    kv_heads: int
    dim: int


def _graph(h: Heads, dtype: str, trailing: int):
    import openvino as ov
    from openvino import opset13 as ops
    from openvino._pyopenvino.op import _PagedAttentionExtension

    f = ov.Type.f16 if dtype == "float16" else ov.Type.f32
    i32 = ov.Type.i32
    names = ("query", "key", "value", "key_cache", "value_cache", "past_lens", "subsequence_begins", "block_indices",
             "block_indices_begins", "sliding_window", "max_context_len")
    shapes = ([-1, h.heads * h.dim], [-1, h.kv_heads * h.dim], [-1, h.kv_heads * h.dim], [-1, h.kv_heads, 32, h.dim],
              [-1, h.kv_heads, 32, h.dim], [-1], [-1], [-1], [-1], [], [])
    params = [ops.parameter(s, f if i < 5 else i32, name=n) for i, (n, s) in enumerate(zip(names, shapes))]
    scale = ops.constant(np.asarray(h.dim ** -0.5, np.float32)).output(0)
    alibi = ops.constant(np.zeros((0,), np.float32)).output(0)
    args = [p.output(0) for p in params[:9]] + [scale, params[9].output(0), alibi, params[10].output(0)]
    node = _PagedAttentionExtension(args + _trailing(trailing))
    rt = node.get_rt_info()  # the CPU plugin reads the head layout from here (paged_attn.cpp), as the pass sets it
    for k, v in (("num_k_heads", h.kv_heads), ("k_head_size", h.dim), ("num_v_heads", h.kv_heads),
                 ("v_head_size", h.dim)):
        rt[k] = v
    return ov.Model([node.output(0)], params, "kvwindow_paged_attention")


@lru_cache(maxsize=1)
def arity() -> int:
    """How many inputs the installed release's PagedAttentionExtension takes after ``max_context_len``: read from
    its validation message (``expects N inputs``) when the adapter's guess is refused."""
    rel = release()
    h = Heads(2, 1, 16)
    for n in (len(TRAILING), 12):
        try:
            _graph(h, "float32", n)
            return n
        except RuntimeError as e:
            m = re.search(r"expects (\d+) inputs", str(e))
            if m:
                want = int(m.group(1)) - 13
                _graph(h, "float32", want)
                return want
            last = e
    raise EngineIncompatible(DIST, rel, "PagedAttentionExtension (one-op graph)", str(last).splitlines()[-1][:200])


class PagedModel:
    """A compiled one-op PagedAttention model for one head layout and payload dtype; ``sliding_window`` is an
    input, so one compiled model serves every window."""

    def __init__(self, h: Heads, dtype: str, threads: int = 1):
        import openvino as ov

        self.h, self.dtype = h, dtype
        # fp16: fp16 inputs and an fp16 cache, computed in f32 (INFERENCE_PRECISION_HINT=f16 makes the plugin ask for
        # a bf16 cache on a CPU without AVX512-FP16: "expect kvcache type bf16", executor_pa.cpp).
        prec = "f16" if dtype == "float16" else "f32"
        cfg = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": prec, "INFERENCE_NUM_THREADS": threads,
               "NUM_STREAMS": 1}
        self.compiled = ov.Core().compile_model(_graph(h, dtype, arity()), "CPU", cfg)
        self.request = self.compiled.create_infer_request()
        shape = self.compiled.input("key_cache").get_partial_shape()
        self.block = shape[2].get_length()  # the plugin's forced block size
        self.cache_type = str(self.compiled.input("key_cache").get_element_type())

    def run(self, q, k, v, k_cache, v_cache, past_lens, begins, block_indices, block_begins, window: int,
            max_context: int) -> np.ndarray:
        """One call: ``q [T, H*D]``, ``k, v [T, Hkv*D]`` (the new tokens), ``*_cache [blocks, Hkv, B, D]`` (written
        in place by the op), the sequences' ``past_lens``, ``subsequence_begins``, their block table (flat
        ``block_indices`` + ``block_indices_begins``); returns ``[T, H*D]`` as float32."""
        nd = np.float16 if self.dtype == "float16" else np.float32
        feed = {"query": q.astype(nd), "key": k.astype(nd), "value": v.astype(nd),
                "key_cache": np.ascontiguousarray(k_cache, nd), "value_cache": np.ascontiguousarray(v_cache, nd),
                "past_lens": np.asarray(past_lens, np.int32), "subsequence_begins": np.asarray(begins, np.int32),
                "block_indices": np.asarray(block_indices, np.int32),
                "block_indices_begins": np.asarray(block_begins, np.int32),
                "sliding_window": np.asarray(sliding_window(window), np.int32),
                "max_context_len": np.asarray(max_context, np.int32)}
        out = self.request.infer(feed)
        return np.asarray(out[0], np.float32)


@lru_cache(maxsize=16)
def paged_model(heads: int, kv_heads: int, dim: int, dtype: str, threads: int = 1) -> PagedModel:
    return PagedModel(Heads(heads, kv_heads, dim), dtype, threads)


def probe(dtype: str = "float32") -> PagedModel:
    """Resolve-time check: the op builds, compiles on the CPU plugin and runs one token."""
    rel = release()
    try:
        m = paged_model(2, 1, 16, dtype)
        b = m.block
        z = np.zeros((1, 32), np.float32)
        m.run(z, z[:, :16], z[:, :16], np.zeros((1, 1, b, 16)), np.zeros((1, 1, b, 16)), [0], [0, 1], [0], [0, 1], 0,
              1)
        return m
    except EngineIncompatible:
        raise
    except Exception as e:  # noqa: BLE001 - a release whose op the adapter cannot build or call
        raise EngineIncompatible(DIST, rel, "PagedAttentionExtension (CPU, one-op model)",
                                 f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200]}") from e


def ops_release() -> Optional[str]:
    try:
        import openvino

        return openvino.__version__
    except Exception:  # noqa: BLE001
        return None
