"""Tiny mlx-lm models built from a seed, loaded the way users load a converted model.

A Hugging Face model of the family (transformers, ``torch.manual_seed``) is saved as a model folder —
``config.json`` (the HF config's own ``to_dict()``, ``sliding_window = W``) and ``model.safetensors`` — and
loaded with the release's ``mlx_lm.utils.load_model`` (what ``mlx_lm.load`` does after download; the
folder is what ``mlx_lm.convert`` writes for an unquantised model). The cache is the model's own
``make_cache()`` (``make_prompt_cache``), so each layer's window is what mlx-lm derives from the config.

Families (``MODEL_TYPES``): ``llama`` with ``layer_types = [sliding_attention, full_attention]`` (mlx-lm's
``llama.py`` reads ``layer_types`` and ``sliding_window``), ``mistral`` and ``gemma2`` (HF configs with a
``sliding_window``; mlx-lm maps ``mistral`` to ``llama.py``). The reference is :mod:`impl.hf.reference`
(float64, this project's own forward, windows from the spec's ``W``).
"""

from __future__ import annotations

import json
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from impl.engines import EngineIncompatible

MODEL_TYPES = ("llama", "mistral", "gemma2")
VOCAB = 64
_DIRS: dict = {}


def _hf_config(model_type: str, window: int):
    import transformers as tf

    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=8, max_position_embeddings=256, tie_word_embeddings=False,
                  rms_norm_eps=1e-6)
    if model_type == "llama":
        return tf.LlamaConfig(**common)
    if model_type == "mistral":
        return tf.MistralConfig(sliding_window=window, **common)
    if model_type == "gemma2":
        return tf.Gemma2Config(sliding_window=window, query_pre_attn_scalar=8, attn_logit_softcapping=50.0,
                               final_logit_softcapping=30.0, **{**common, "tie_word_embeddings": True})
    raise ValueError(f"unknown model type {model_type!r}; known: {', '.join(MODEL_TYPES)}")


@lru_cache(maxsize=64)
def tiny(model_type: str, window: int, seed: int = 0) -> tuple[Any, dict, Any]:
    """``(mlx model, float32 torch state dict, HF config)`` of a tiny ``model_type`` with window ``window``."""
    import torch
    import transformers as tf
    from safetensors.torch import save_file

    cfg = _hf_config(model_type, window)
    torch.manual_seed(seed)
    cls = {"llama": tf.LlamaForCausalLM, "mistral": tf.MistralForCausalLM, "gemma2": tf.Gemma2ForCausalLM}[model_type]
    model = cls(cfg).float().eval()
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    d = Path(tempfile.mkdtemp(prefix=f"kvwindow-mlx-{model_type}-"))
    conf = cfg.to_dict()
    conf["architectures"] = [cls.__name__]
    if model_type == "llama":  # mlx-lm's llama.py reads a per-layer schedule and the window
        conf.update(layer_types=["sliding_attention", "full_attention"], sliding_window=window)
    (d / "config.json").write_text(json.dumps(conf, default=str))
    save_file({k: v for k, v in sd.items() if not (conf.get("tie_word_embeddings") and k == "lm_head.weight")},
              str(d / "model.safetensors"))
    try:
        from mlx_lm.utils import load_model

        loaded = load_model(d)
        mlx_model = loaded[0] if isinstance(loaded, tuple) else loaded
    except Exception as e:  # noqa: BLE001 - the release cannot load this folder
        from impl.engines.mlx import release

        raise EngineIncompatible("mlx-lm", release(), f"mlx_lm.utils.load_model ({model_type})",
                                 f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}") from e
    _DIRS[(model_type, window, seed)] = d
    return mlx_model, sd, cfg


def windows(model_type: str, window: int) -> tuple:
    """Per layer: the spec's window on the sliding layers (``None``: global), as the HF model defines them."""
    if model_type == "llama":
        return (window, None)  # the layer_types written above
    if model_type == "mistral":
        return (window, window)
    return tuple(window if i % 2 == 0 else None for i in range(2))  # Gemma 2: sliding at even layers


def make_cache(model):
    from mlx_lm.models.cache import make_prompt_cache

    return make_prompt_cache(model)


def logits(model, cache, ids) -> np.ndarray:
    import mlx.core as mx

    out = model(mx.array(np.asarray(ids, dtype=np.int32)[None]), cache=cache)
    return np.array(out.astype(mx.float32), copy=False)[0]


def reference(model_type: str, sd: dict, cfg, window: int, tokens) -> np.ndarray:
    """Float64 logits of every position (:func:`impl.hf.reference.forward`, the spec's windows per layer)."""
    from dataclasses import replace

    from impl.hf import reference as R

    arch = "gemma2" if model_type == "gemma2" else "mistral"  # llama's forward is mistral's, windows per layer
    cfg_w = cfg
    spec = R.ref_spec(arch, cfg_w, window)
    spec = replace(spec, windows=windows(model_type, window))
    return R.forward(spec, sd, list(tokens))[0].numpy()
