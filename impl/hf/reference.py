"""This project's own full-mask forwards of Mistral, Gemma 2 and Gemma 3, from a Hugging Face state dict.

The reference for the model targets must not be transformers' own no-cache
path (that would share the mask code under test). It is built from
:mod:`impl.decoder`'s blocks — ``rms_norm``, ``rope_cos_sin``/``apply_rope``
(rotate-half, HF layout), ``window_mask`` (``p <= t < p + W``, DESIGN §1),
``attend`` (GQA, optional soft-cap), ``silu_mlp`` — over the whole token
history at once, in float64, with each layer's window taken from the spec's
``W``, never from the HF config object.

Gemma 2 extras (``Gemma2ForCausalLM``): embeddings scaled by ``sqrt(hidden)``;
RMSNorm weights stored as ``w - 1`` (``offset=1``); post-attention,
pre-/post-feedforward norms; ``gelu`` (tanh approximation) gate; attention
scale ``query_pre_attn_scalar ** -0.5``; attention-logit and final-logit
tanh soft-capping; sliding layers at even indices (``layer_types``), global
layers at odd ones; ``lm_head`` tied to the embeddings.

Gemma 3 (``Gemma3ForCausalLM``, ``gemma3_text``) as Gemma 2, plus: RMSNorm of each query and key
head (``q_norm``/``k_norm``, ``offset=1``) before RoPE; RoPE base per layer type (``rope_parameters``
keyed by layer type on 5.x, ``rope_local_base_freq`` / ``rope_theta`` before); the sliding/global
pattern from ``layer_types`` (or ``sliding_window_pattern``); soft-capping only where the config sets
it (``None`` by default).

The engine targets (:mod:`fuzz.targets.engines`) call :func:`forward` once per stream over the
stream's whole history (every op's logits are rows of that one forward), so a case costs one reference
forward per stream, not one per op.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import torch

from impl.decoder import apply_rope, attend, rms_norm, rope_cos_sin, silu_mlp, softcap, window_mask


@dataclass
class RefSpec:
    """What the reference needs from a config (read once, then independent of HF)."""

    arch: str  # "mistral" or "gemma2"
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    eps: float
    theta: float
    windows: tuple[Optional[int], ...]  # per layer; None = global
    scale: float
    attn_softcap: Optional[float] = None
    final_softcap: Optional[float] = None
    #: RoPE base per layer (``None``: ``theta`` for every layer).
    thetas: Optional[tuple[float, ...]] = None
    #: Gemma 3: RMSNorm over each query/key head before RoPE.
    qk_norm: bool = False

    def theta_of(self, layer: int) -> float:
        return self.theta if self.thetas is None else self.thetas[layer]


def gemma3_layer_types(config: Any) -> list[str]:
    """Gemma 3's ``layer_types`` (or the pattern of releases before them: every
    ``sliding_window_pattern``-th layer global)."""
    lt = getattr(config, "layer_types", None)
    if lt:
        return list(lt)
    period = int(getattr(config, "sliding_window_pattern", 6))
    return ["full_attention" if (i + 1) % period == 0 else "sliding_attention"
            for i in range(config.num_hidden_layers)]


def _theta_for(config: Any, layer_type: str) -> float:
    """A Gemma 3 layer type's RoPE base: ``rope_parameters[type]["rope_theta"]`` (5.x), else
    ``rope_local_base_freq`` for sliding layers and ``rope_theta`` for global ones."""
    rp = getattr(config, "rope_parameters", None)
    if isinstance(rp, dict) and isinstance(rp.get(layer_type), dict):
        return float(rp[layer_type]["rope_theta"])
    if layer_type == "sliding_attention":
        return float(getattr(config, "rope_local_base_freq"))
    return float(rp["rope_theta"]) if isinstance(rp, dict) and "rope_theta" in rp else float(config.rope_theta)


def ref_spec(arch: str, config: Any, window: int) -> RefSpec:
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    n = config.num_hidden_layers
    if arch == "gemma3_text":
        types = gemma3_layer_types(config)
        wins = tuple(window if t == "sliding_attention" else None for t in types)
        thetas = tuple(_theta_for(config, t) for t in types)
        return RefSpec(arch, n, config.num_attention_heads, config.num_key_value_heads, head_dim,
                       config.hidden_size, config.rms_norm_eps, thetas[0], wins,
                       float(config.query_pre_attn_scalar) ** -0.5,
                       getattr(config, "attn_logit_softcapping", None),
                       getattr(config, "final_logit_softcapping", None), thetas=thetas, qk_norm=True)
    rp = getattr(config, "rope_parameters", None)
    theta = float(rp["rope_theta"]) if isinstance(rp, dict) and "rope_theta" in rp else float(config.rope_theta)
    if arch == "mistral":
        return RefSpec(arch, n, config.num_attention_heads, config.num_key_value_heads, head_dim,
                       config.hidden_size, config.rms_norm_eps, theta, (window,) * n, head_dim ** -0.5)
    if arch == "gemma2":
        # Sliding layers at even indices: Gemma2Config.layer_types (5.24.0 configuration_gemma2.py
        # lines 94-97) and HybridCache.is_sliding / Gemma2Attention (4.45.2).
        wins = tuple(window if i % 2 == 0 else None for i in range(n))
        return RefSpec(arch, n, config.num_attention_heads, config.num_key_value_heads, head_dim,
                       config.hidden_size, config.rms_norm_eps, theta, wins,
                       float(config.query_pre_attn_scalar) ** -0.5,
                       config.attn_logit_softcapping, config.final_logit_softcapping)
    raise ValueError(f"unknown arch {arch!r}")


def forward(spec: RefSpec, sd: dict[str, torch.Tensor], tokens: Sequence[int]
            ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Logits ``[T, vocab]`` for every position, and each layer's RoPE'd keys ``[KVH, T, D]``."""
    dt = torch.float64
    g = lambda name: sd[name].to(dt)  # noqa: E731
    ids = torch.as_tensor(list(tokens), dtype=torch.long)
    T = ids.shape[0]
    pos = torch.arange(T)
    gemma = spec.arch in ("gemma2", "gemma3_text")
    off = 1.0 if gemma else 0.0
    h = g("model.embed_tokens.weight")[ids]
    if gemma:
        h = h * math.sqrt(spec.hidden)
    rope = {th: rope_cos_sin(pos, spec.head_dim, th, dt) for th in {spec.theta_of(i) for i in range(spec.layers)}}
    keys_out = []
    for i in range(spec.layers):
        p = f"model.layers.{i}."
        x = rms_norm(h, g(p + "input_layernorm.weight"), spec.eps, off)
        q = (x @ g(p + "self_attn.q_proj.weight").T).view(T, spec.heads, spec.head_dim).transpose(0, 1)
        k = (x @ g(p + "self_attn.k_proj.weight").T).view(T, spec.kv_heads, spec.head_dim).transpose(0, 1)
        v = (x @ g(p + "self_attn.v_proj.weight").T).view(T, spec.kv_heads, spec.head_dim).transpose(0, 1)
        if spec.qk_norm:
            q = rms_norm(q, g(p + "self_attn.q_norm.weight"), spec.eps, off)
            k = rms_norm(k, g(p + "self_attn.k_norm.weight"), spec.eps, off)
        cos, sin = rope[spec.theta_of(i)]
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        keys_out.append(k)
        mask = window_mask(pos, pos, spec.windows[i])
        a = attend(q, k, v, mask, spec.scale, spec.attn_softcap)
        a = a.transpose(0, 1).reshape(T, spec.heads * spec.head_dim) @ g(p + "self_attn.o_proj.weight").T
        if gemma:
            a = rms_norm(a, g(p + "post_attention_layernorm.weight"), spec.eps, off)
            h = h + a
            x = rms_norm(h, g(p + "pre_feedforward_layernorm.weight"), spec.eps, off)
            m = torch.nn.functional.gelu(x @ g(p + "mlp.gate_proj.weight").T, approximate="tanh")
            m = (m * (x @ g(p + "mlp.up_proj.weight").T)) @ g(p + "mlp.down_proj.weight").T
            h = h + rms_norm(m, g(p + "post_feedforward_layernorm.weight"), spec.eps, off)
        else:
            h = h + a
            x = rms_norm(h, g(p + "post_attention_layernorm.weight"), spec.eps, off)
            h = h + silu_mlp(x, g(p + "mlp.gate_proj.weight"), g(p + "mlp.up_proj.weight"),
                             g(p + "mlp.down_proj.weight"))
    h = rms_norm(h, g("model.norm.weight"), spec.eps, off)
    head = sd.get("lm_head.weight")
    head = g("model.embed_tokens.weight") if head is None else head.to(dt)
    logits = softcap(h @ head.T, spec.final_softcap)
    return logits, keys_out
