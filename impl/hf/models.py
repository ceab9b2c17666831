"""Tiny random-weight Mistral / Gemma 2 models and the calls users make on them.

:class:`TinyModels` builds one architecture's models (one per window and
``attn_implementation``, all from the same weights, in float64) and makes the
calls a user makes: a manual forward with an explicit or default cache
(:meth:`TinyModels.call`), a greedy ``generate()`` that continues on a cache
(:meth:`TinyModels.generate`), and it reads back the keys each sliding layer
stores (:meth:`TinyModels.stored_keys`) and names the pinned convention
(:mod:`impl.hf.conventions`) the model's default cache follows.

Driving them with op lists and holding every logit to the reference forward
is the harness's job: the ``hf-mistral`` / ``hf-gemma2`` targets in
:mod:`fuzz.targets.hf.models`.
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from typing import Any, Optional

import torch

from impl.hf import compat, reference

VOCAB = 64


def tiny_config(arch: str, window: int, attn: str) -> Any:
    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=512,
                  sliding_window=window, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    if arch == "mistral":
        from transformers import MistralConfig

        cfg = MistralConfig(**common)
    else:
        from transformers import Gemma2Config

        cfg = Gemma2Config(**common, query_pre_attn_scalar=8, attn_logit_softcapping=50.0,
                           final_logit_softcapping=30.0)
    cfg._attn_implementation = attn
    return cfg


def random_state_dict(model: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """Weights large enough that which keys a query sees matters (HF's std 0.02 init makes
    attention nearly uniform and logits tiny): projections ~ N(0, 1/fan_in), q/k x2,
    embeddings ~ N(0, 1), norm weights near their identity value."""
    gen = torch.Generator().manual_seed(seed)
    sd = {}
    for name, p in model.state_dict().items():
        if name.endswith("norm.weight"):
            base = 0.0 if "gemma" in type(model).__name__.lower() else 1.0
            t = base + 0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64)
        elif "embed_tokens" in name:
            t = torch.randn(p.shape, generator=gen, dtype=torch.float64)
        elif p.dim() == 2:
            gain = 2.0 if ("q_proj" in name or "k_proj" in name) else 1.0
            t = gain * torch.randn(p.shape, generator=gen, dtype=torch.float64) / p.shape[1] ** 0.5
        else:
            t = p.detach().clone().to(torch.float64)
        sd[name] = t
    return sd


def _model_class(arch: str):
    if arch == "mistral":
        from transformers import MistralForCausalLM

        return MistralForCausalLM
    from transformers import Gemma2ForCausalLM

    return Gemma2ForCausalLM


def attn_impls(arch: str) -> list[str]:
    """Gemma 2 on 5.x declares ``_supports_sdpa = False`` (5.24.0 modeling_gemma2.py, the
    ``Gemma2PreTrainedModel`` class attributes); earlier releases offer sdpa, which skips
    soft-capping (:func:`sdpa_softcaps`)."""
    cls = _model_class(arch)
    return ["eager", "sdpa"] if getattr(cls, "_supports_sdpa", True) else ["eager"]


@lru_cache(maxsize=None)
def sdpa_softcaps(arch: str) -> bool:
    """Does this release's sdpa path apply ``attn_logit_softcapping``? Measured, not looked up: one
    tiny model with a cap of 0.05 (which flattens attention completely) and one without, same
    weights; identical logits mean the cap is dropped. 4.45-4.47's ``Gemma2SdpaAttention`` documents
    that it drops it; from 4.48 the shared ``sdpa_attention_forward`` has no soft-cap argument at all.
    ``True`` for families without soft-capping (nothing to drop)."""
    if arch != "gemma2" or "sdpa" not in attn_impls(arch):
        return True
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = []
        for cap in (0.05, None):
            cfg = tiny_config(arch, 4, "sdpa")
            cfg.attn_logit_softcapping = cap
            m = _model_class(arch)(cfg).to(torch.float64).eval()
            m.load_state_dict(random_state_dict(m, 0))
            with torch.no_grad():
                out.append(m(input_ids=torch.tensor([[5, 9, 13, 17, 21, 25]])).logits)
    return not torch.allclose(out[0], out[1], atol=1e-6, rtol=0)


def greedy_generation(model: Any, api: str) -> None:
    """Set ``model.generation_config`` for greedy decoding of exactly the asked length (no EOS, no
    sampling parameters). On the legacy API, drop a default ``cache_implementation``: 4.4x hybrid
    models (Gemma 2) default to a static cache sized to one ``generate`` call and refuse a passed
    cache alongside it; multi-turn users pass their own, sized to the stream, as the adapters do."""
    gc = model.generation_config
    gc.eos_token_id, gc.pad_token_id, gc.do_sample = None, 0, False
    if api == "legacy" and getattr(gc, "cache_implementation", None) is not None:
        gc.cache_implementation = None
    for attr in ("temperature", "top_p", "top_k"):
        if hasattr(gc, attr):
            setattr(gc, attr, None)


class TinyModels:
    """One architecture's tiny models: random weights from ``seed``, the HF window ``W + window_shift``."""

    def __init__(self, arch: str, *, window_shift: int = 0, seed: int = 0):
        self.info = compat.info()
        self.arch, self.window_shift = arch, window_shift
        torch.manual_seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            proto = _model_class(arch)(tiny_config(arch, 4, "eager"))
        self.state = random_state_dict(proto, seed)
        if getattr(proto.config, "tie_word_embeddings", False):
            self.state["lm_head.weight"] = self.state["model.embed_tokens.weight"]
        self._models: dict[tuple[int, str], Any] = {}

    def first_config(self) -> Any:
        """The config of the first model built (its sizes are what the reference forward needs)."""
        return self._models[next(iter(self._models))].config

    def model(self, window: int, attn: str):
        key = (window, attn)
        if key not in self._models:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cfg = tiny_config(self.arch, window + self.window_shift, attn)
                m = _model_class(self.arch)(cfg).to(torch.float64)
                m.load_state_dict(self.state, strict=False)
                if hasattr(m, "tie_weights"):
                    m.tie_weights()
                m.eval()
                greedy_generation(m, self.info.api)
            self._models[key] = m
        return self._models[key]

    def new_cache(self, model, total: int):
        """``None`` (let the model create its default) except where the legacy API's users must build one."""
        if self.info.api == "layers":
            return None
        if self.arch == "mistral":
            return compat.dynamic_cache()
        # max_cache_len >= W so the sliding buffer has W slots (it has min(W, max_cache_len)).
        size = max(total + 1, model.config.sliding_window)
        return compat.static_sliding_cache(model.config, size, torch.float64)

    def call(self, model, ids: list[int], cache, start: int):
        kw: dict[str, Any] = {"input_ids": torch.tensor([ids], dtype=torch.long), "use_cache": True}
        if cache is not None:
            kw[self.info.cache_kwarg] = cache
        if self.info.takes_cache_position:
            kw["cache_position"] = torch.arange(start, start + len(ids))
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = model(**kw)
        return out.logits[0].to(torch.float64), self._cache_of(out)

    def generate(self, model, history: list[int], cache, g: int):
        ids = torch.tensor([history], dtype=torch.long)
        kw: dict[str, Any] = dict(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=g,
                                  min_new_tokens=g, do_sample=False, output_logits=True,
                                  return_dict_in_generate=True)
        if cache is not None:
            kw[self.info.cache_kwarg] = cache
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = model.generate(**kw)
        new = out.sequences[0, len(history):].tolist()
        logits = torch.cat([l.to(torch.float64) for l in out.logits], dim=0)
        return new, logits, self._cache_of(out)

    def _cache_of(self, out):
        """The cache an output carries, under the name this release uses (5.x warns on the old one)."""
        return getattr(out, self.info.cache_kwarg)

    def stored_keys(self, cache) -> dict[int, torch.Tensor]:
        """Sliding layers' stored keys ``[KVH, rows, D]`` by layer index."""
        out = {}
        if cache is None:
            return out
        if self.info.api == "layers":
            for i, layer in enumerate(compat.cache_layers(cache) or []):
                if getattr(layer, "is_sliding", False):
                    kv = compat.layer_kv(cache, i)
                    out[i] = None if kv is None else kv[0][0].detach().clone()
        elif self.arch == "gemma2":
            kv = compat.layer_kv(cache, 0)
            out[0] = None if kv is None else kv[0][0].detach().clone()
        return out

    def ref_spec(self, window: int, attn: str) -> reference.RefSpec:
        """The reference's spec for this architecture at ``window``, with the quirks of ``attn``
        that a kernel cannot express (like with like): sdpa without soft-capping where the
        release's sdpa path drops it (:func:`sdpa_softcaps`)."""
        spec = reference.ref_spec(self.arch, self.first_config(), window)
        if attn == "sdpa" and not sdpa_softcaps(self.arch):
            spec.attn_softcap = None
        return spec

    def cache_convention(self) -> Optional[tuple[str, str]]:
        """``(cache API, kind)`` of the pinned convention the sliding layers' stored keys follow
        (:mod:`impl.hf.conventions`), or ``None`` where the default cache has no sliding buffer
        (4.45 Mistral: ``DynamicCache``, no eviction)."""
        if self.info.api == "layers":
            return ("layers", "dynamic")
        if self.arch == "gemma2":
            return ("legacy", "static")
        return None


def probe(arch: str) -> None:
    """Exercise :class:`TinyModels` of ``arch`` once on the installed release — for each attention
    implementation a prefill longer than the window, a decode step on the same cache, the stored keys,
    and a one-token ``generate()`` — and raise :class:`compat.HFIncompatible` naming the release and the
    step that failed. Only that the calls work is checked; the logits are the campaign's to judge."""
    step = "building the tiny models"
    try:
        tm = TinyModels(arch)
        for attn in attn_impls(arch):
            model = tm.model(3, attn)
            step = f"prefill ({attn})"
            cache = tm.new_cache(model, 6)
            _, made = tm.call(model, [3, 4, 5, 6], cache, 0)
            cache = made if cache is None else cache
            step = f"decode on the cache ({attn})"
            tm.call(model, [7], cache, 4)
            step = f"reading the stored keys ({attn})"
            tm.stored_keys(cache)
            step = f"generate() ({attn})"
            tm.generate(model, [3, 4, 5, 6], tm.new_cache(model, 6), 1)
    except compat.HFUnavailable:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of a supported call is an API the adapter cannot drive
        raise compat.incompatible(f"{arch} model: {step}", f"{type(e).__name__}: {e}") from e
