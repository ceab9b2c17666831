"""keras-hub (tensorflow backend): a tiny seeded Hugging Face Gemma 2 / Gemma 3 checkpoint loaded through
keras-hub's own Hugging Face checkpoint converter (``Backbone.from_preset(<local HF folder>)``:
``TransformersPresetLoader`` → ``convert_gemma`` / ``convert_gemma3``, offline, nothing downloaded) and
driven through the ``CausalLM`` calls users make: the full forward (``causal_lm({"token_ids",
"padding_mask"})``), ``call_with_cache`` on a cache laid out as ``_build_cache`` lays it out, and
generation (keras-hub's own ``generate_step``, what ``generate()`` runs per batch: ``_build_cache`` prefill of
the padded batch, then one ``call_with_cache`` per position from the shortest prompt on, the sampler keeping
prompt tokens).

**The window convention.** keras-hub's HF converter copies ``sliding_window`` unchanged:
``convert_gemma.convert_backbone_config`` sets ``"sliding_window_size":
transformers_config["sliding_window"]`` (keras-hub 0.32.0, ``src/utils/transformers/convert_gemma.py``
line 44) and ``convert_gemma3`` ``"sliding_window_size": sliding_window or 4096`` (``convert_gemma3.py``
line 168, ``sliding_window = transformer_config.get("sliding_window", None)`` line 106). The attention
then keeps key ``j`` for query ``i`` where ``|i - j| <= min(key_len, sliding_window_size - 1)``
(``tf.linalg.band_part`` on the tensorflow backend, ``gemma_attention.py`` lines 225-227,
``gemma3_attention.py`` the same in ``_mask_sliding_window``) intersected with the causal mask: the query
sees ``i - W + 1 .. i``, the spec's ``W``. So the spec's ``W`` is ``sliding_window = W`` in the checkpoint
and ``sliding_window_size = W`` in keras-hub — one rule, applied by the converter, never by this module.
Which layers slide is the backbone's: Gemma 2 even layers (``gemma_backbone.py`` line 122), Gemma 3
``i % 6 < 5`` with RoPE bases 10 000 / 1 000 000 (``gemma3_backbone.py`` lines 248-249); the tiny Gemma 3
checkpoint has that pattern (:data:`impl.engines.tiny.GEMMA3_PUBLISHED`), since the converter reads no
``layer_types``.

**Compilation.** Eager tensorflow runs a tiny decoder step in tens of milliseconds; ``generate()``
compiles its whole loop with XLA per input shape (seconds each). The adapter instead compiles the
model's own ``call_with_cache`` and forward once per model with ``tf.function`` over dynamic shapes
(graph mode, no XLA; one trace per combination of optional masks) and compiles the ``CausalLM`` with
``run_eagerly=True``, so ``make_generate_function()`` is ``generate_step`` itself: its loop, masks and
sampler are keras-hub's own and each model
call inside it is the compiled ``call_with_cache`` (bound on the instance). A greedy sampler that keeps
the logits it is given (:class:`keras_hub.samplers.GreedySampler`'s ``compute_probabilities``, the
sampler extension point) returns every step's logits. Threads: one intra-op and one inter-op thread.

Nothing here imports ``fuzz`` or ``pyspec``.
"""

from __future__ import annotations

import inspect
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from impl.engines import EngineIncompatible, EngineUnavailable, installed
from impl.engines.tiny import PAD, TinyModel, save_hf

DIST = "keras-hub"
BACKEND = "tensorflow"
#: ``keras:<name>`` -> (HF model_type, backbone class, causal LM class).
MODELS = {"gemma2": ("gemma2", "GemmaBackbone", "GemmaCausalLM"),
          "gemma3": ("gemma3_text", "Gemma3Backbone", "Gemma3CausalLM")}
#: Keywords of ``call_with_cache`` this adapter passes through compiled (everything else: the original).
MASKS = ("padding_mask", "cache_update_mask")
_mods: dict[str, Any] = {}


def release() -> str:
    return installed(DIST, "keras")


def modules() -> tuple[Any, Any, Any]:
    """``(keras, tensorflow, keras_hub)`` on the tensorflow backend with one thread, or
    :class:`EngineIncompatible` when keras was already imported on another backend."""
    if not _mods:
        os.environ.setdefault("KERAS_BACKEND", BACKEND)
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        # oneDNN's custom CPU kernels: measured on the tiny Gemma 3, a decode step takes 6 ms with them and
        # 4 ms without, and the first call of each new shape 55 ms against 47 ms.
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
        rel = release()
        try:
            import keras
            import tensorflow as tf
        except Exception as e:  # noqa: BLE001 - a broken install
            raise EngineIncompatible(DIST, rel, "import keras / tensorflow", f"{type(e).__name__}: {e}") from e
        if keras.config.backend() != BACKEND:
            raise EngineIncompatible(DIST, rel, "keras.config.backend()",
                                     f"{keras.config.backend()!r}: the keras: targets run the tensorflow backend "
                                     f"(set KERAS_BACKEND=tensorflow before keras is imported)")
        tf.get_logger().setLevel("ERROR")  # a model per window: tf.function's retracing advice is noise here
        try:
            tf.config.threading.set_intra_op_parallelism_threads(1)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        except RuntimeError:  # the runtime already started: it keeps its thread pools
            pass
        try:
            import keras_hub
        except Exception as e:  # noqa: BLE001
            raise EngineIncompatible(DIST, rel, "import keras_hub", f"{type(e).__name__}: {e}") from e
        _mods.update(keras=keras, tf=tf, keras_hub=keras_hub)
    return _mods["keras"], _mods["tf"], _mods["keras_hub"]


def check(name: str) -> str:
    """The installed release if the adapter can drive ``keras:<name>`` on it (feature detection)."""
    rel = release()
    if name not in MODELS:
        raise EngineUnavailable(f"keras:{name}: no tiny model for it (keras targets: {', '.join(MODELS)})")
    keras, tf, kh = modules()
    _, bb_name, lm_name = MODELS[name]
    for cls_name in (bb_name, lm_name):
        if not hasattr(kh.models, cls_name):
            raise EngineIncompatible(DIST, rel, f"keras_hub.models.{cls_name}", "missing")
    lm_cls = getattr(kh.models, lm_name)
    for attr in ("call_with_cache", "generate_step", "make_generate_function", "_build_cache"):
        if not hasattr(lm_cls, attr):
            raise EngineIncompatible(DIST, rel, f"{lm_name}.{attr}", "missing")
    params = inspect.signature(lm_cls.call_with_cache).parameters
    for p in ("token_ids", "cache", "cache_update_index"):
        if p not in params:
            raise EngineIncompatible(DIST, rel, f"{lm_name}.call_with_cache", f"no parameter {p!r}")
    if not hasattr(getattr(kh.models, bb_name), "from_preset"):
        raise EngineIncompatible(DIST, rel, f"{bb_name}.from_preset", "missing")
    if not hasattr(kh.samplers, "GreedySampler"):
        raise EngineIncompatible(DIST, rel, "keras_hub.samplers.GreedySampler", "missing")
    return rel


def _recording_sampler(kh: Any) -> Any:
    class Recording(kh.samplers.GreedySampler):
        """Greedy, keeping each step's logits (eager generation: ``compute_probabilities`` sees them)."""

        def __init__(self, **kw: Any):
            super().__init__(**kw)
            self.seen: list[np.ndarray] = []

        def compute_probabilities(self, logits):
            self.seen.append(np.asarray(logits, dtype=np.float64))
            return super().compute_probabilities(logits)

    return Recording()


class KerasModel:
    """One keras-hub ``CausalLM`` converted from ``tiny``'s HF checkpoint, with compiled entry points."""

    def __init__(self, name: str, tiny: TinyModel):
        keras, tf, kh = modules()
        self.tf, self.name, self.tiny = tf, name, tiny
        hf_type, bb_name, lm_name = MODELS[name]
        if tiny.arch != hf_type:
            raise ValueError(f"keras:{name} needs a {hf_type} checkpoint, got {tiny.arch}")
        with tempfile.TemporaryDirectory(prefix="kvwindow-keras-") as src, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            save_hf(tiny, Path(src))
            self.backbone = getattr(kh.models, bb_name).from_preset(src, dtype="float32")
        self.lm = getattr(kh.models, lm_name)(backbone=self.backbone, preprocessor=None)
        self.sampler = _recording_sampler(kh)
        self.lm.compile(sampler=self.sampler, run_eagerly=True)
        self.stacked = name == "gemma2"  # GemmaCausalLM: one [B, layers, 2, L, H, D] tensor; Gemma3: a tuple
        self._eager_call = self.lm.call_with_cache  # the bound method, before the compiled one shadows it
        self._calls: dict[tuple[str, ...], Any] = {}
        object.__setattr__(self.lm, "call_with_cache", self.call_with_cache)
        ids = tf.TensorSpec([None, None], tf.int32)
        self._forward = tf.function(
            lambda t, m: self.lm({"token_ids": t, "padding_mask": m}),
            input_signature=[ids, tf.TensorSpec([None, None], tf.bool)])
        self.vocab = tiny.vocab

    # -- what the converter wrote

    def windows(self) -> list[Optional[int]]:
        """Each decoder layer's ``sliding_window_size`` (``None`` for a global layer)."""
        out = []
        for layer in self.backbone.transformer_layers:
            att = layer.attention
            out.append(int(att.sliding_window_size) if att.use_sliding_window_attention else None)
        return out

    # -- the compiled entry points

    def _cache_spec(self) -> Any:
        tf, bb = self.tf, self.backbone
        h, d, n = bb.num_key_value_heads, bb.head_dim, bb.num_layers
        if self.stacked:
            return tf.TensorSpec([None, n, 2, None, h, d], tf.float32)
        return tuple((tf.TensorSpec([None, None, h, d], tf.float32),) * 2 for _ in range(n))

    def empty_cache(self, batch: int, length: int) -> Any:
        """A zero cache of ``length`` positions, laid out as the model's ``_build_cache`` allocates it
        (``gemma_causal_lm.py`` lines 217-225: ``[B, layers, 2, L, H, D]``; ``gemma3_causal_lm.py`` lines
        212-228: a tuple of per-layer ``(key, value)`` of ``[B, L, H, D]``)."""
        tf, bb = self.tf, self.backbone
        h, d, n = bb.num_key_value_heads, bb.head_dim, bb.num_layers
        if self.stacked:
            return tf.zeros([batch, n, 2, length, h, d], tf.float32)
        return tuple((tf.zeros([batch, length, h, d], tf.float32), tf.zeros([batch, length, h, d], tf.float32))
                     for _ in range(n))

    def call_with_cache(self, token_ids, cache, cache_update_index, **kw: Any):
        """The model's ``call_with_cache``, compiled per set of masks given; any other keyword (images)
        goes to the original, eagerly."""
        tf = self.tf
        given = {k: v for k, v in kw.items() if v is not None}
        if set(given) - set(MASKS):
            return self._eager_call(token_ids, cache, cache_update_index, **kw)
        key = tuple(sorted(given))
        fn = self._calls.get(key)
        if fn is None:
            eager = self._eager_call

            def run(t, c, i, *masks):
                return eager(t, c, i, **dict(zip(key, masks)))

            mask_specs = [tf.TensorSpec([None, None], tf.bool) for _ in key]
            fn = tf.function(run).get_concrete_function(
                tf.TensorSpec([None, None], tf.int32), self._cache_spec(), tf.TensorSpec([], tf.int32), *mask_specs)
            self._calls[key] = fn
        masks = [tf.cast(given[k], tf.bool) for k in key]
        out = fn(tf.cast(token_ids, tf.int32), cache, tf.cast(cache_update_index, tf.int32), *masks)
        return out[0], out[1], out[2]

    # -- what the targets call

    def forward(self, rows: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """The full forward of a right-padded batch (keras-hub's preprocessors pad on the right and
        mark the tokens in ``padding_mask``): each row's logits ``[len(row), V]``."""
        tf = self.tf
        n = max(len(r) for r in rows)
        ids = np.full((len(rows), n), PAD, np.int32)
        mask = np.zeros((len(rows), n), bool)
        for b, r in enumerate(rows):
            ids[b, :len(r)] = r
            mask[b, :len(r)] = True
        out = np.asarray(self._forward(tf.constant(ids), tf.constant(mask)), dtype=np.float64)
        return [out[b, :len(r)] for b, r in enumerate(rows)]

    def step(self, tokens: Sequence[int], cache: Any, index: int) -> tuple[np.ndarray, Any]:
        """``call_with_cache`` of one row's ``tokens`` written at ``index``: logits ``[len(tokens), V]``."""
        tf = self.tf
        logits, _, cache = self.call_with_cache(tf.constant([list(tokens)], tf.int32), cache,
                                                tf.constant(index, tf.int32))
        return np.asarray(logits, dtype=np.float64)[0], cache

    def generate(self, prompts: Sequence[Sequence[int]], length: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Generation (``generate_step``) of right-padded ``prompts`` into ``length`` positions, greedy, no stop token:
        the final token ids ``[B, length]``, the logits of every step ``[steps, B, V]`` (step ``k`` holds
        the logits of position ``first - 1 + k``) and ``first``, the shortest prompt's length."""
        ids = np.full((len(prompts), length), PAD, np.int32)
        mask = np.zeros((len(prompts), length), bool)
        for b, p in enumerate(prompts):
            ids[b, :len(p)] = p
            mask[b, :len(p)] = True
        self.sampler.seen = []
        # What generate() runs per batch (with run_eagerly, make_generate_function() returns generate_step
        # itself); generate() is not called because on Gemma 3 its output normalisation raises on the
        # "images": None that generate_step returns for text-only input (docs/findings/
        # keras-gemma3-generate-text-only.md): the step loop, not that wrapper, is what is compared.
        out = self.lm.make_generate_function()({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)
        seen = np.stack(self.sampler.seen) if self.sampler.seen else np.zeros((0, len(prompts), self.vocab))
        self.sampler.seen = []
        return np.asarray(out["token_ids"]), seen, min(len(p) for p in prompts)
