"""ONNX Runtime: one-op graphs of ``com.microsoft.GroupQueryAttention`` and ONNX ``Attention`` (opset 25),
built with ``onnx.helper`` and run on the CPU execution provider.

The window convention (DESIGN §6), one rule for every release:

* **GroupQueryAttention** ``local_window_size = W``. onnxruntime-genai's model builder — the exporter
  ORT's own generate() stack uses — writes it so: ``src/python/py/models/builders/base.py``,
  ``Model.__init__``: ``self.window_size = config.sliding_window if hasattr(config, "sliding_window")
  else -1  # default is -1 in GroupQueryAttention kernel``, and ``make_group_query_attention``:
  ``self.make_node("GroupQueryAttention", ..., local_window_size=self.window_size, ...)`` (the same line
  in the older single-file ``builder.py``). optimum exports no GQA node of its own (its ONNX graphs reach
  GQA only through ORT's fusion, which takes the attribute from the same builder convention).
* **Attention** (ONNX opset 25) ``left_window_size = W - 1``, ``right_window_size = 0``, ``is_causal = 1``.
  The ONNX operator spec (``onnx/defs/nn/defs.cc``, Attention-25): "A query at absolute position ``p``
  attends keys ``j`` satisfying ``p - left_window_size <= j <= p + right_window_size`` ...
  ``(left_window_size=2, right_window_size=0)`` is a causal left-looking window containing the current
  key and two preceding keys".

Feature detection reads the installed release's own operator schemas
(``onnxruntime.capi._pybind_state.get_all_operator_schema``): which GQA inputs and attributes exist
(``sliding_window_cache``, ``query_seqlens``, ...), never the version number. What the adapter cannot
drive raises :class:`~impl.engines.EngineIncompatible` naming the release and the API.
"""

from __future__ import annotations

from dataclasses import dataclass
import threading
from functools import lru_cache, wraps
from typing import Optional, Sequence

import numpy as np

from impl.engines import EngineIncompatible, EngineUnavailable, installed

DIST, EXTRA = "onnxruntime", "ort"
#: How an unavailable target says the installed release lacks the operator altogether (scripts/engine_compat.py
#: writes such a cell as n/a: nothing for the adapter to learn).
LACKS = "the release has no"
#: Query heads, kv heads, head size of every graph: GQA (two query heads per kv head); GQA's CPU kernel
#: takes head sizes that are multiples of 8 only.
HEADS, KV_HEADS, DIM = 2, 1, 8


def gqa_local_window_size(window: int) -> int:
    """The spec's ``W`` as ``GroupQueryAttention.local_window_size`` (onnxruntime-genai's builder: ``W``)."""
    return int(window)


def attention_left_window_size(window: int) -> int:
    """The spec's ``W`` as ONNX ``Attention.left_window_size`` (the ONNX spec: ``W - 1``)."""
    return int(window) - 1


def release() -> str:
    """The installed onnxruntime (and onnx, which builds the graphs); :class:`EngineUnavailable` without them."""
    rel = installed(DIST, EXTRA)
    installed("onnx", EXTRA)
    return rel


@dataclass(frozen=True)
class Features:
    """What the installed release's GroupQueryAttention and Attention schemas offer."""

    release: str
    gqa_inputs: tuple[str, ...]
    gqa_attrs: frozenset[str]
    #: The newest ONNX ``Attention`` schema version the release knows (0: none).
    attention_version: int

    @property
    def windowed_cache(self) -> bool:
        """``sliding_window_cache=1``: window-sized past/present buffers evicted inside the op."""
        return "sliding_window_cache" in self.gqa_attrs

    @property
    def query_seqlens(self) -> bool:
        """Right-padded multi-token chunks of a batch onto a non-empty cache."""
        return "query_seqlens" in self.gqa_inputs

    def gqa_index(self, name: str) -> int:
        return self.gqa_inputs.index(name)


@lru_cache(maxsize=1)
def features() -> Features:
    rel = release()
    try:
        from onnxruntime.capi import _pybind_state as C

        schemas = C.get_all_operator_schema()
    except Exception as e:  # noqa: BLE001 - the adapter cannot introspect this release
        raise EngineIncompatible("onnxruntime", rel, "get_all_operator_schema", f"{type(e).__name__}: {e}") from e
    gqa = [s for s in schemas if s.name == "GroupQueryAttention" and s.domain == "com.microsoft"]
    if not gqa:
        raise EngineIncompatible("onnxruntime", rel, "com.microsoft.GroupQueryAttention", "no such operator schema")
    g = max(gqa, key=lambda s: s.since_version)
    names = tuple(i.name for i in g.inputs)
    for need in ("query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length"):
        if need not in names:
            raise EngineIncompatible("onnxruntime", rel, "GroupQueryAttention inputs", f"no input {need!r} in {names}")
    attrs = frozenset(g.attributes)
    if "local_window_size" not in attrs:
        raise EngineIncompatible("onnxruntime", rel, "GroupQueryAttention.local_window_size", "no such attribute")
    att = [s.since_version for s in schemas if s.name == "Attention" and s.domain in ("", "ai.onnx")
           and "left_window_size" in s.attributes]
    return Features(rel, names, attrs, max(att, default=0))


# -- graphs ------------------------------------------------------------------------------------------


def _session(model_bytes: bytes, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    # Two threads that spin on a loaded 2-core machine cost ~1 ms a call; without spinning ~0.1 ms.
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


def _model(node, inputs, outputs, opsets: Sequence[tuple[str, int]]) -> bytes:
    from onnx import helper

    graph = helper.make_graph([node], "kvwindow", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = 10  # every release here reads IR 10; newer onnx packages default higher
    return model.SerializeToString()


def _one_per_key(make):
    """``lru_cache(make)`` whose misses are built under one lock: two threads asking for the same session at once
    get ONE session (a bare ``lru_cache`` may build it twice and hand each caller its own)."""
    cached = lru_cache(maxsize=512)(make)
    lock = threading.Lock()

    @wraps(make)
    def get(*args, **kwargs):
        with lock:
            return cached(*args, **kwargs)

    get.cache_clear = cached.cache_clear
    return get


@_one_per_key
def gqa_session(window: int, threads: int, *, windowed: bool = False, query_seqlens: bool = False):
    """A one-node GroupQueryAttention session: inputs ``query key value past_key past_value seqlens_k
    total_sequence_length`` (+ ``query_seqlens``), outputs ``output present_key present_value``."""
    from onnx import TensorProto as TP, helper

    f = features()
    names = ["query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length"]
    if query_seqlens:
        if not f.query_seqlens:
            raise EngineIncompatible("onnxruntime", f.release, "GroupQueryAttention.query_seqlens", "no such input")
        names.append("query_seqlens")
    node_inputs = [""] * (max(f.gqa_index(n) for n in names) + 1)
    for n in names:
        node_inputs[f.gqa_index(n)] = n
    fl = lambda n, shape: helper.make_tensor_value_info(n, TP.FLOAT, shape)  # noqa: E731
    inputs = [fl("query", ["B", "S", HEADS * DIM]), fl("key", ["B", "S", KV_HEADS * DIM]),
              fl("value", ["B", "S", KV_HEADS * DIM]), fl("past_key", ["B", KV_HEADS, "P", DIM]),
              fl("past_value", ["B", KV_HEADS, "P", DIM]),
              helper.make_tensor_value_info("seqlens_k", TP.INT32, ["B"]),
              helper.make_tensor_value_info("total_sequence_length", TP.INT32, [])]
    if query_seqlens:
        inputs.append(helper.make_tensor_value_info("query_seqlens", TP.INT32, ["B"]))
    outputs = [fl("output", None), fl("present_key", None), fl("present_value", None)]
    attrs = dict(num_heads=HEADS, kv_num_heads=KV_HEADS, local_window_size=gqa_local_window_size(window))
    if windowed:
        if not f.windowed_cache:
            raise EngineIncompatible("onnxruntime", f.release, "GroupQueryAttention.sliding_window_cache",
                                     "no such attribute")
        attrs["sliding_window_cache"] = 1
    node = helper.make_node("GroupQueryAttention", node_inputs, ["output", "present_key", "present_value"],
                            domain="com.microsoft", **attrs)
    return _session(_model(node, inputs, outputs, [("", 21), ("com.microsoft", 1)]), threads)


@_one_per_key
def attention_session(window: int, threads: int, mode: str):
    """A one-node ONNX Attention-25 session over ``[B, S, H*D]`` inputs. ``mode``: ``"past"`` (inputs ``Q K V
    attn_mask past_key past_value``, outputs ``Y present_key present_value``: the op appends) or ``"external"``
    (inputs ``Q K V nonpad_kv_seqlen``: K and V are the caller's whole cache, ``nonpad_kv_seqlen`` each row's
    length)."""
    from onnx import TensorProto as TP, helper

    f = features()
    if f.attention_version < 25:
        # Not the adapter's fault: the release predates the operator (the matrix writes n/a, not a fault).
        raise EngineUnavailable(f"onnxruntime {f.release}: {LACKS} Attention-25 (its operator schemas have no "
                                f"ONNX Attention with left_window_size)")
    fl = lambda n, shape: helper.make_tensor_value_info(n, TP.FLOAT, shape)  # noqa: E731
    inputs = [fl("Q", ["B", "S", HEADS * DIM]), fl("K", ["B", "L", KV_HEADS * DIM]), fl("V", ["B", "L", KV_HEADS * DIM])]
    if mode == "past":
        inputs += [helper.make_tensor_value_info("attn_mask", TP.BOOL, ["B", 1, "S", "T"]),
                   fl("past_key", ["B", KV_HEADS, "P", DIM]), fl("past_value", ["B", KV_HEADS, "P", DIM])]
        node_in, node_out = ["Q", "K", "V", "attn_mask", "past_key", "past_value"], ["Y", "present_key", "present_value"]
    elif mode == "external":
        inputs += [helper.make_tensor_value_info("nonpad_kv_seqlen", TP.INT64, ["B"])]
        node_in, node_out = ["Q", "K", "V", "", "", "", "nonpad_kv_seqlen"], ["Y"]
    else:
        raise ValueError(f"attention_session: mode must be 'past' or 'external', got {mode!r}")
    outputs = [fl(n, None) for n in node_out]
    node = helper.make_node("Attention", node_in, node_out, q_num_heads=HEADS, kv_num_heads=KV_HEADS, is_causal=1,
                            left_window_size=attention_left_window_size(window), right_window_size=0)
    return _session(_model(node, inputs, outputs, [("", 25)]), threads)


# -- calls ---------------------------------------------------------------------------------------------


def _flat(x: np.ndarray) -> np.ndarray:
    """``[B, S, heads, D]`` (or already ``[B, S, heads*D]``) -> ``[B, S, heads*D]`` float32, contiguous (no copy
    when it already is)."""
    if x.ndim != 3:
        x = x.reshape(x.shape[0], x.shape[1], -1)
    return x if x.dtype == np.float32 and x.flags.c_contiguous else np.ascontiguousarray(x, dtype=np.float32)


def gqa_run(sess, q, k, v, past_k, past_v, seqlens_k, total: int, query_seqlens=None):
    """One GQA call: ``q [B,S,H,D]``, ``k, v [B,S,Hkv,D]``, ``past_* [B,Hkv,P,D]``; returns
    ``(output [B,S,H,D], present_key, present_value)``."""
    feed = {"query": _flat(q), "key": _flat(k), "value": _flat(v),
            "past_key": np.ascontiguousarray(past_k, dtype=np.float32),
            "past_value": np.ascontiguousarray(past_v, dtype=np.float32),
            "seqlens_k": np.asarray(seqlens_k, dtype=np.int32), "total_sequence_length": np.asarray(total, dtype=np.int32)}
    if query_seqlens is not None:
        feed["query_seqlens"] = np.asarray(query_seqlens, dtype=np.int32)
    out, pk, pv = sess.run(None, feed)
    return out.reshape(q.shape[0], q.shape[1], HEADS, DIM), pk, pv


class SharedBuffer:
    """GQA's past/present buffer sharing through IOBinding: ``past_key`` and ``present_key`` are one
    ``[B, Hkv, capacity, D]`` OrtValue (what onnxruntime-genai does with ``past_present_share_buffer``)."""

    def __init__(self, sess, batch: int, capacity: int, query_seqlens: bool = False):
        import onnxruntime as ort

        self.sess, self.query_seqlens = sess, query_seqlens
        shape = (batch, KV_HEADS, max(1, capacity), DIM)
        self.k = ort.OrtValue.ortvalue_from_numpy(np.zeros(shape, np.float32))
        self.v = ort.OrtValue.ortvalue_from_numpy(np.zeros(shape, np.float32))
        self._binding = None  # (io_binding, the OrtValues it binds): built once, inputs rebound per call

    def _bound(self):
        if self._binding is None or self._binding[1] != (id(self.k), id(self.v)):
            b = self.sess.io_binding()
            b.bind_output("output")  # first: copy_outputs_to_cpu() lists outputs in the order they were bound
            b.bind_ortvalue_input("past_key", self.k)
            b.bind_ortvalue_input("past_value", self.v)
            b.bind_ortvalue_output("present_key", self.k)
            b.bind_ortvalue_output("present_value", self.v)
            self._binding = (b, (id(self.k), id(self.v)))
        return self._binding[0]

    def run(self, q, k, v, seqlens_k, total: int, query_seqlens=None) -> np.ndarray:
        b = self._bound()
        b.bind_cpu_input("query", _flat(q))
        b.bind_cpu_input("key", _flat(k))
        b.bind_cpu_input("value", _flat(v))
        b.bind_cpu_input("seqlens_k", np.asarray(seqlens_k, dtype=np.int32))
        b.bind_cpu_input("total_sequence_length", np.asarray(total, dtype=np.int32))
        if query_seqlens is not None:
            b.bind_cpu_input("query_seqlens", np.asarray(query_seqlens, dtype=np.int32))
        b.bind_output("output")  # rebound each call (in its place, still first): its shape follows the call's
        self.sess.run_with_iobinding(b)
        out = b.copy_outputs_to_cpu()[0]
        return out.reshape(q.shape[0], q.shape[1], HEADS, DIM)

    def keys(self) -> np.ndarray:
        return self.k.numpy()


def windowed_resident(total: int, capacity: int, window: int) -> int:
    """``L(T)`` of GQA's windowed cache (the operator's own documentation, ``sliding_window_cache``): how
    many of the most recent positions rows ``[0, L)`` hold after ``T`` tokens, capacity ``C``, window ``W``
    (here GQA's ``local_window_size``)."""
    if total <= capacity:
        return total
    g = capacity - window + 1
    return total - g * (-(-(total - capacity) // g))


def attention_past(sess, q, k, v, mask, past_k, past_v):
    """ONNX Attention with the op's own past/present: returns ``(Y [B,S,H,D], present_key, present_value)``."""
    y, pk, pv = sess.run(None, {"Q": _flat(q), "K": _flat(k), "V": _flat(v),
                                "attn_mask": np.ascontiguousarray(mask, dtype=bool),
                                "past_key": np.ascontiguousarray(past_k, np.float32),
                                "past_value": np.ascontiguousarray(past_v, np.float32)})
    return y.reshape(q.shape[0], q.shape[1], HEADS, DIM), pk, pv


def attention_external(sess, q, k, v, lengths) -> np.ndarray:
    """ONNX Attention over a caller-kept cache: ``k, v [B, L, Hkv, D]`` hold each row's keys at ``[0, len)``."""
    (y,) = sess.run(None, {"Q": _flat(q), "K": _flat(k), "V": _flat(v),
                           "nonpad_kv_seqlen": np.asarray(lengths, dtype=np.int64)})
    return y.reshape(q.shape[0], q.shape[1], HEADS, DIM)


def probe() -> Features:
    """Resolve-time check: the release's schemas, and one GQA call on the CPU provider."""
    f = features()
    try:
        s = gqa_session(2, 1)
        z = np.zeros((1, 1, HEADS, DIM), np.float32)
        zk = np.zeros((1, 1, KV_HEADS, DIM), np.float32)
        gqa_run(s, z, zk, zk, np.zeros((1, KV_HEADS, 0, DIM), np.float32), np.zeros((1, KV_HEADS, 0, DIM), np.float32),
                [0], 1)
    except EngineUnavailable:
        raise
    except Exception as e:  # noqa: BLE001 - a release whose op the adapter cannot call
        raise EngineIncompatible("onnxruntime", f.release, "GroupQueryAttention (CPU, one-op graph)",
                                 f"{type(e).__name__}: {str(e).splitlines()[0][:200]}") from e
    return f


def attention_probe() -> None:
    """Resolve-time check of ``ort:attention``: Attention-25 with a window runs on the CPU provider."""
    f = features()
    try:
        s = attention_session(2, 1, "past")
        z = np.zeros((1, 1, HEADS, DIM), np.float32)
        zk = np.zeros((1, 1, KV_HEADS, DIM), np.float32)
        attention_past(s, z, zk, zk, np.ones((1, 1, 1, 1), bool), np.zeros((1, KV_HEADS, 0, DIM), np.float32),
                       np.zeros((1, KV_HEADS, 0, DIM), np.float32))
    except EngineUnavailable:
        raise
    except Exception as e:  # noqa: BLE001
        raise EngineIncompatible("onnxruntime", f.release, "ONNX Attention-25 (CPU, left_window_size)",
                                 f"{type(e).__name__}: {str(e).splitlines()[0][:200]}") from e


def optional_mask(mask: Optional[np.ndarray], batch: int, s: int, total: int) -> np.ndarray:
    """A boolean ``[B, 1, S, T]`` key mask (every key of every row when ``mask`` is None)."""
    if mask is None:
        return np.ones((batch, 1, s, total), bool)
    return np.broadcast_to(np.asarray(mask, bool)[:, None, None, :], (batch, 1, s, total))
