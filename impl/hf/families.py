"""Every sliding-window model family of the installed transformers: the calls users make, and a
reference that shares none of the window code under test.

For each ``model_type`` in :data:`FAMILIES` that the installed release has, :class:`Family` builds
a tiny seeded config with sliding-window layers (and the family's sliding/global pattern for the
hybrid ones), random float64 weights from a seed (nothing downloaded), and drives:

* **the code under test** — :meth:`Family.run_cached`: a prefill then decode calls on the model's
  cache (the one the model makes itself where the release does, else the one its docs tell users to
  build), batched rows with left padding allowed; :meth:`Family.generate`: greedy ``generate()``;
* **the reference** — :meth:`Family.reference_logits`: the same weights in a second model whose
  sliding window is disabled (set to ``max_position_embeddings``, longer than any stream, so every
  window code path of the release is a no-op), run without a cache, and with the attention mask of
  every decoder layer replaced by the one the *caller* passes (a forward pre-hook on each decoder
  layer, the one place every release from 4.45 to 5.x hands the mask over as the
  ``attention_mask`` keyword). The caller builds the masks from the spec (``pyspec.in_window``); this
  module never builds a window mask itself (DESIGN §2: ``impl/`` imports no ``pyspec``).

Masks are boolean ``[B, 1, T, T]`` (``True`` = the query at row ``t`` may see the key at column
``p``), one tensor for every layer or a dict keyed by layer type (``"sliding_attention"``,
``"full_attention"``, :meth:`Family.layer_types`); they become additive float masks of the model's
dtype (0 / the dtype's minimum), the form eager, sdpa and flex attention all take.

Quirks a kernel cannot express are compared like with like — the reference runs the same attention
implementation with the same quirk, never a loosened tolerance:

* ``gemma2``: attention-logit soft-capping (``tanh``) is applied by eager only; the sdpa path of the
  releases that offer it drops it (:func:`impl.hf.models.sdpa_softcaps`, measured), and the reference
  runs sdpa too, so it drops it identically. Final-logit soft-capping is outside attention and applies
  to both. Sliding layers at even indices.
* ``gemma3_text``: sliding layers use ``rope_local_base_freq``, global ones ``rope_theta``; the same
  model code computes both on each path. Pattern: one global layer every :data:`HYBRID_PERIOD`.
* ``cohere2``: the same pattern; parallel attention + MLP, ``logit_scale``.
* ``gpt_oss``: learned attention sinks (one logit per head joining the softmax) live in the attention
  function of each implementation; the reference runs the same implementation with the same sinks.
  Sliding and global layers alternate.
* ``qwen2`` / ``qwen3``: ``use_sliding_window=True`` with ``max_window_layers=0`` (every layer
  sliding): before ``layer_types`` (4.53) the non-flash paths ignore ``max_window_layers``, so a
  split would compare two different models rather than two paths of one.
* ``mixtral`` / ``gpt_oss``: mixture-of-experts routing is part of the shared model code; in
  float64 a routing tie between the two paths does not occur with these weights.

Tolerance :data:`ATOL` + :data:`RTOL` ``* |ref|``: transformers computes norms, RoPE and eager
softmax in float32 inside a float64 model (see :mod:`fuzz.targets.hf.models`), so the paths agree at
float32 rounding; a window off by one moves logits by ``1e-2 .. 1`` (``tests/test_hf_families.py``).
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Optional, Sequence, Union

import torch

from impl.errors import Unavailable, window_probe
from impl.hf import compat
from impl.hf.models import greedy_generation

#: The sliding-window families, in the order campaigns list them.
FAMILIES = ("mistral", "mixtral", "qwen2", "qwen3", "gemma2", "gemma3_text", "cohere2", "phi3",
            "starcoder2", "gpt_oss")
#: Attention implementations a CPU can run, in the order they are tried.
CPU_ATTENTION = ("eager", "sdpa", "flex_attention")
#: The availability probe's stream (:meth:`Family._try`): its window, and the tokens of each call on the cache
#: (a prefill of 4 past W = 3, then single-token decode steps).
PROBE_WINDOW = 3
PROBE_CALLS = (4, 1, 1, 1, 1, 1, 1)
#: Hybrid families built with a pattern get one global layer every HYBRID_PERIOD layers.
HYBRID_PERIOD = 3
VOCAB = 64
MAX_POSITIONS = 256
ATOL = 1e-4
RTOL = 1e-4

Masks = Union[torch.Tensor, dict[str, torch.Tensor]]

_COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_attention_heads=4,
               num_key_value_heads=2, head_dim=8, max_position_embeddings=MAX_POSITIONS,
               pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)

#: model_type -> (number of layers, extra config keywords, sliding/global pattern or None = all sliding).
#: Keywords a release's config does not take are dropped (feature detection on its ``__init__``).
_SPECS: dict[str, tuple[int, dict[str, Any], Optional[str]]] = {
    "mistral": (2, {}, None),
    "mixtral": (2, dict(num_local_experts=4, num_experts_per_tok=2), None),
    "qwen2": (2, dict(use_sliding_window=True, max_window_layers=0), None),
    "qwen3": (2, dict(use_sliding_window=True, max_window_layers=0), None),
    "gemma2": (2, dict(query_pre_attn_scalar=8, attn_logit_softcapping=50.0, final_logit_softcapping=30.0),
               "alternate"),
    "gemma3_text": (3, dict(query_pre_attn_scalar=8, rope_local_base_freq=1000.0), "period"),
    "cohere2": (3, dict(logit_scale=0.5), "period"),
    "phi3": (2, dict(original_max_position_embeddings=MAX_POSITIONS), None),
    "starcoder2": (2, dict(use_bias=True), None),
    "gpt_oss": (2, dict(num_local_experts=4, num_experts_per_tok=2), "alternate"),
}
#: Families whose norms store ``w - 1`` (the weight applied is ``1 + w``).
_OFFSET_NORMS = ("gemma2", "gemma3_text")


def _causal_lm_class(model_type: str) -> Optional[type]:
    from transformers.models.auto import modeling_auto
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        return None
    name = modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
    if name is None:
        return None
    import transformers

    return getattr(transformers, name, None)


def available() -> dict[str, Optional[str]]:
    """Every family: ``None`` where the installed release has it, else why not."""
    tf = compat.import_transformers()
    out: dict[str, Optional[str]] = {}
    for mt in FAMILIES:
        try:
            ok = _causal_lm_class(mt) is not None
        except Exception as e:  # noqa: BLE001 - a broken optional import disables its family only
            out[mt] = f"transformers {tf.__version__}: {type(e).__name__}: {e}"
            continue
        out[mt] = None if ok else f"transformers {tf.__version__} has no {mt} causal LM"
    return out


def layer_pattern(model_type: str, layers: int) -> list[str]:
    """The sliding/global pattern this module builds ``model_type`` with (``layer_types`` values)."""
    kind = _SPECS[model_type][2]
    if kind is None:
        return ["sliding_attention"] * layers
    if kind == "alternate":
        return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    return ["full_attention" if (i + 1) % HYBRID_PERIOD == 0 else "sliding_attention" for i in range(layers)]


def tiny_config(model_type: str, window: int, attn: str, layers: Optional[int] = None) -> Any:
    """A tiny config with ``sliding_window = window`` (the family's pattern via ``layer_types`` where
    the release's config takes it, else via its pattern keyword)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    cls = CONFIG_MAPPING[model_type]
    n, extra, kind = _SPECS[model_type]
    n = layers or n
    params = inspect.signature(cls.__init__).parameters
    kw = dict(_COMMON, num_hidden_layers=n, sliding_window=window, **extra)
    if kind is not None:
        if "layer_types" in params:
            kw["layer_types"] = layer_pattern(model_type, n)
        elif "sliding_window_pattern" in params:
            kw["sliding_window_pattern"] = 2 if kind == "alternate" else HYBRID_PERIOD
    takes_any = any(p.kind == p.VAR_KEYWORD for p in params.values())
    kw = {k: v for k, v in kw.items() if k in params or (takes_any and k in _COMMON)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = cls(**kw)
    if getattr(cfg, "sliding_window", None) != window:
        # e.g. a config that sets sliding_window only when a flag it lacks is on
        cfg.sliding_window = window
    cfg._attn_implementation = attn
    if hasattr(cfg, "_experts_implementation"):
        # 5.x's default grouped-mm experts take float32/bf16 only; the eager loop is the same arithmetic.
        cfg._experts_implementation = "eager"
    return cfg


def seeded_state_dict(model: torch.nn.Module, model_type: str, seed: int) -> dict[str, torch.Tensor]:
    """Weights from ``seed`` large enough that which keys a query sees matters (HF's std-0.02 init
    makes attention nearly uniform): matrices ~ N(0, 1/fan_in) (q/k x2), embeddings and attention
    sinks ~ N(0, 1), norm weights near their identity, biases ~ N(0, 0.1)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, p in model.state_dict().items():
        if not p.is_floating_point():
            out[name] = p.clone()
            continue

        def rnd(scale: float = 1.0) -> torch.Tensor:
            return scale * torch.randn(p.shape, generator=gen, dtype=torch.float64)

        if "norm" in name and p.dim() == 1:
            t = (0.0 if model_type in _OFFSET_NORMS else 1.0) + rnd(0.1)
            if name.endswith("bias"):
                t = rnd(0.1)
        elif "embed_tokens" in name or name.endswith("sinks"):
            t = rnd()
        elif p.dim() >= 2:
            gain = 2.0 if ("q_proj" in name or "k_proj" in name) else 1.0
            t = rnd(gain / max(p.shape[-1], p.shape[-2]) ** 0.5)
        else:
            t = rnd(0.1)
        out[name] = t
    return out


def _decoder_layers(model: Any) -> Sequence[torch.nn.Module]:
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise compat.incompatible(f"{type(model).__name__}.model.layers", "no decoder layer list")
    return layers


def _additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if mask.dtype != torch.bool or mask.dim() != 4:
        raise ValueError(f"masks are boolean [B, 1, T, T] tensors, got {mask.dtype} of shape {tuple(mask.shape)}")
    # Half the dtype's minimum: a fully masked row (a pad query) then stays finite after the scores are
    # added (the minimum itself overflows to -inf, and a NaN pad row would reach real rows as 0 * NaN).
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, torch.finfo(torch.float32).min / 2)


def _block_mask(mask: torch.Tensor, dtype: torch.dtype) -> Any:
    """The boolean ``[B, 1, T, T]`` mask as a flex attention ``BlockMask`` (``dtype`` unused: no scores are
    added). Why not :func:`_additive`: with torch 2.13 on CPU, flex attention handed a dense additive mask
    (transformers turns it into a ``score_mod`` indexing the tensor) corrupts the heap and aborts the process
    (``free(): invalid next size``, any window or none); the same mask as a ``BlockMask`` runs
    (scripts/repro/hf_flex_attention_cpu.py). A fully masked row (a pad query) comes out as zeros, finite."""
    from torch.nn.attention.flex_attention import create_block_mask

    if mask.dtype != torch.bool or mask.dim() != 4:
        raise ValueError(f"masks are boolean [B, 1, T, T] tensors, got {mask.dtype} of shape {tuple(mask.shape)}")
    dense = mask.contiguous()
    B, _, T, S = dense.shape
    return create_block_mask(lambda b, h, q, kv: dense[b, 0, q, kv], B, None, T, S, device="cpu")


def positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Token positions of a left-padded batch: ``0`` at each row's first real token (pads get 0)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


class Family:
    """One ``model_type`` on the installed release: tiny random-weight models from ``seed``.

    Models run in ``dtype`` (float64 by default; flex attention's CPU kernel takes float32 only, so
    that implementation's model and reference run in float32). Eager attention in float64 with left
    padding yields NaN on real rows (its mask holds float64's minimum, its softmax runs in float32:
    a fully masked pad row becomes ``-inf`` everywhere, and ``0 * NaN`` carries it into real queries),
    so left-padded batches under eager want ``dtype=torch.float32``.

    ``window_shift`` builds the models under test with window ``W + shift`` while the caller's
    reference masks use ``W`` (the adapter bug of converting a window wrongly; tests use it as a
    negative control); ``ignore_window`` builds them with the window disabled, as a release whose
    window is ignored on both the cached and the uncached path would be.
    """

    def __init__(self, model_type: str, *, seed: int = 0, window_shift: int = 0, ignore_window: bool = False,
                 dtype: torch.dtype = torch.float64):
        self.info = compat.info()
        why = available().get(model_type, f"unknown family {model_type!r}; known: {', '.join(FAMILIES)}")
        if why is not None:
            raise compat.HFUnavailable(why)
        self.model_type, self.seed = model_type, seed
        self.window_shift, self.ignore_window = window_shift, ignore_window
        self.dtype = dtype
        self.cls = _causal_lm_class(model_type)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.manual_seed(seed)
            proto = self.cls(tiny_config(model_type, 4, "eager"))
        self.state = seeded_state_dict(proto, model_type, seed)
        self.layers = proto.config.num_hidden_layers
        self._models: dict[tuple[int, str], Any] = {}
        self._layer_types: Optional[list[str]] = None
        self._attn: list[str] = []
        #: attention implementation -> why it is not offered here
        self.attn_unavailable: dict[str, str] = {}
        #: attention implementation -> how its probe died with the sliding window (it ran without one, so it is
        #: offered: :func:`impl.errors.window_probe`). The campaign's cases may or may not reproduce the death
        #: (flex attention's depends on what the process compiled first:
        #: docs/findings/hf-flex-attention-sliding-compile.md), so the target reports the probe's death itself as
        #: a crash finding (``fuzz.targets.hf.family.HFFamilyTarget.probe_crashes``)
        self.probe_crashes: dict[str, str] = {}

    # -- what the release offers

    def layer_types(self) -> list[str]:
        """Each decoder layer's type: the built config's ``layer_types`` where the release has them,
        else this module's pattern (the one its pattern keyword expresses)."""
        if self._layer_types is None:  # building a config costs ~2 ms: once per family, not per reference call
            cfg = tiny_config(self.model_type, 4, "eager")
            lt = getattr(cfg, "layer_types", None)
            self._layer_types = list(lt) if lt else layer_pattern(self.model_type, self.layers)
        return list(self._layer_types)

    def attn_impls(self, flex: bool = True) -> list[str]:
        """The CPU attention implementations the class declares support for and that run here: each
        is tried once (a cached prefill + decode and the reference); :attr:`attn_unavailable` says
        why one is left out. Flex attention is tried in a child process (:func:`flex_runs`): its CPU
        kernels are compiled by inductor, and with torch 2.13 they fail to compile or abort the process
        (scripts/repro/hf_flex_attention_cpu.py: on 5.24.0 and 5.25.0 a Mistral's cached decode fails to
        compile with a window of 3 and runs with 64 and with none: docs/findings/hf-flex-attention-sliding-compile.md).
        A death with the window is re-run without it (:func:`impl.errors.window_probe`): if that runs, flex
        attention is offered and the death is kept in :attr:`probe_crashes`, else it is left out with both
        reasons. ``flex=False`` leaves it out untried."""
        want = [a for a in CPU_ATTENTION if a != "flex_attention" or flex]
        flags = {"eager": True, "sdpa": getattr(self.cls, "_supports_sdpa", False),
                 "flex_attention": getattr(self.cls, "_supports_flex_attn", False)}
        for attn in want:
            if attn in self._attn or attn in self.attn_unavailable:
                continue
            if not flags[attn]:
                self.attn_unavailable[attn] = f"{self.cls.__name__} does not declare {attn} support"
                continue
            if attn == "flex_attention":
                try:  # died with the window only: offered, and the crash is the campaign's to find (DESIGN §4)
                    crash = window_probe(lambda: flex_runs(self.model_type),
                                         lambda: flex_runs(self.model_type, window=False))
                except Unavailable as e:
                    self.attn_unavailable[attn] = str(e)
                    continue
                if crash is not None:
                    self.probe_crashes[attn] = crash
                # offered: the child ran these calls (with the window, or without it after a death with it). Not
                # run again here: a compile that fails in this process would make it "unavailable" after the child
                # showed it runs (a crash lost, DESIGN §4), and one that dies natively would take the caller along
                self._attn.append(attn)
                continue
            try:
                self._try(attn)
            except Exception as e:  # noqa: BLE001 - an implementation this CPU build cannot run is not offered
                if attn == "eager":
                    raise
                self.attn_unavailable[attn] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                continue
            self._attn.append(attn)
        return [a for a in CPU_ATTENTION if a in self._attn and a in want]

    def _try(self, attn: str) -> None:
        """The calls an implementation must survive to be offered: a cached prefill and decode steps
        through and past the window (:data:`PROBE_WINDOW`, :data:`PROBE_CALLS`), and the reference over the
        same tokens. ``fuzz.targets.hf.family`` writes the same calls as a case (a probe's death becomes a
        finding with that case as its seed)."""
        n = sum(PROBE_CALLS)
        ids = torch.arange(3, 3 + n).view(1, n)
        self.run_cached(PROBE_WINDOW, attn, ids, list(PROBE_CALLS))
        self.reference_logits(attn, ids, torch.ones(1, 1, n, n, dtype=torch.bool).tril())

    # -- models

    def _build(self, window: int, attn: str) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = self.cls(tiny_config(self.model_type, window, attn, self.layers)).to(torch.float32 if attn == "flex_attention" else self.dtype)
            missing, unexpected = m.load_state_dict(self.state, strict=False)
            if unexpected:
                raise compat.incompatible(f"{self.cls.__name__} state dict", f"unexpected keys {unexpected[:3]}")
            m.eval()
            greedy_generation(m, self.info.api)
        return m

    def model(self, window: int, attn: str) -> Any:
        """The model under test: window ``W + window_shift`` (disabled with ``ignore_window``)."""
        w = MAX_POSITIONS if self.ignore_window else window + self.window_shift
        key = (w, attn)
        if key not in self._models:
            self._models[key] = self._build(w, attn)
        return self._models[key]

    def reference_model(self, attn: str) -> Any:
        """Same weights, window disabled (``max_position_embeddings``, longer than any stream)."""
        key = (MAX_POSITIONS, attn)
        if key not in self._models:
            self._models[key] = self._build(MAX_POSITIONS, attn)
        return self._models[key]

    def new_cache(self, model: Any, total: int, batch: int = 1) -> Any:
        """``None`` (the model makes its default cache) on the ``layers`` API; on the legacy API the
        cache the release's docs tell users to pass: a static sliding cache (``HybridCache``) for
        hybrid models and those whose config names a ``cache_implementation``, else a ``DynamicCache``."""
        if self.info.api == "layers":
            return None
        types = set(self.layer_types())
        if getattr(model.config, "cache_implementation", None) is not None or len(types) > 1:
            size = max(total + 1, model.config.sliding_window)
            return compat.static_sliding_cache(model.config, size, next(model.parameters()).dtype, batch)
        return compat.dynamic_cache()

    # -- the code under test

    def _forward(self, model: Any, ids: torch.Tensor, attention_mask: Optional[torch.Tensor], cache: Any,
                 start: int = 0, pos: Optional[torch.Tensor] = None, use_cache: bool = False):
        kw: dict[str, Any] = {"input_ids": ids, "use_cache": use_cache}
        if cache is not None:
            kw[self.info.cache_kwarg] = cache
        if attention_mask is not None:
            kw["attention_mask"] = attention_mask
        if pos is not None:
            kw["position_ids"] = pos
        if self.info.takes_cache_position and use_cache:
            kw["cache_position"] = torch.arange(start, start + ids.shape[1])
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return model(**kw)

    def run_cached(self, window: int, attn: str, ids: torch.Tensor, chunks: Sequence[int],
                   attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Feed ``ids`` ``[B, T]`` in calls of ``chunks`` tokens (the first is the prefill; ``sum(chunks)
        == T``) on one cache; ``attention_mask`` ``[B, T]`` marks left padding (``0`` = pad), positions
        follow it (:func:`positions`). Returns the logits of every call, ``[B, T, V]`` float64. An exception
        a call raises carries the index of its chunk as ``chunk`` (which op of a stream it came from)."""
        if sum(chunks) != ids.shape[1] or any(c < 1 for c in chunks):
            raise ValueError(f"chunks {list(chunks)} must be positive and add up to {ids.shape[1]} tokens")
        model = self.model(window, attn)
        cache = self.new_cache(model, ids.shape[1], ids.shape[0])
        pos_all = positions(attention_mask) if attention_mask is not None else None
        out, start = [], 0
        for j, k in enumerate(chunks):
            am = None if attention_mask is None else attention_mask[:, :start + k]
            pos = None if pos_all is None else pos_all[:, start:start + k]
            try:
                res = self._forward(model, ids[:, start:start + k], am, cache, start, pos, use_cache=True)
            except Exception as e:
                e.chunk = j  # type: ignore[attr-defined]
                raise
            cache = getattr(res, self.info.cache_kwarg) if cache is None else cache
            out.append(res.logits.to(torch.float64))
            start += k
        return torch.cat(out, dim=1)

    def generate(self, window: int, attn: str, ids: torch.Tensor, new_tokens: int,
                 attention_mask: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy ``generate()`` of ``new_tokens`` after ``ids`` ``[B, T]`` (left-padded where
        ``attention_mask`` says): ``(sequences [B, T + new], logits [B, new, V])``; step ``s``'s logits
        belong to position ``T - 1 + s``."""
        model = self.model(window, attn)
        am = torch.ones_like(ids) if attention_mask is None else attention_mask
        kw: dict[str, Any] = dict(input_ids=ids, attention_mask=am, max_new_tokens=new_tokens,
                                  min_new_tokens=new_tokens, do_sample=False, output_logits=True,
                                  return_dict_in_generate=True)
        cache = self.new_cache(model, ids.shape[1] + new_tokens, ids.shape[0])
        if cache is not None:
            kw[self.info.cache_kwarg] = cache
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = model.generate(**kw)
        logits = torch.stack([lg.to(torch.float64) for lg in out.logits], dim=1)
        return out.sequences, logits

    # -- the reference

    def reference_logits(self, attn: str, ids: torch.Tensor, masks: Masks,
                         attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Logits ``[B, T, V]`` of the window-disabled model over all of ``ids`` at once, no cache,
        each decoder layer attending through the caller's mask for its type (``masks``: one boolean
        ``[B, 1, T, T]`` tensor, or a dict by :meth:`layer_types` value). ``attention_mask`` only
        gives the positions of a left-padded batch; padding is the masks' job."""
        model = self.reference_model(attn)
        types = self.layer_types()
        B, T = ids.shape
        if T > MAX_POSITIONS:
            raise ValueError(f"{T} tokens exceed the reference's disabled window {MAX_POSITIONS}")
        per_type = masks if isinstance(masks, dict) else {t: masks for t in set(types)}
        missing = sorted(set(types) - set(per_type))
        if missing:
            raise ValueError(f"no mask for layer types {missing} (layers: {types})")
        dtype = next(model.parameters()).dtype
        for t, m in per_type.items():
            if t in types and tuple(m.shape) != (B, 1, T, T):
                raise ValueError(f"mask for {t} has shape {tuple(m.shape)}, expected {(B, 1, T, T)}")
        form = _block_mask if attn == "flex_attention" else _additive
        add = {t: form(m, dtype) for t, m in per_type.items() if t in types}
        seen: list[int] = []

        def hook_for(i: int):
            def hook(module, args, kwargs):
                if "attention_mask" not in kwargs:
                    raise compat.incompatible(f"{type(module).__name__}.forward",
                                              "the decoder layer no longer receives attention_mask as a keyword")
                kwargs["attention_mask"] = add[types[i]]
                seen.append(i)
                return args, kwargs
            return hook

        handles = [layer.register_forward_pre_hook(hook_for(i), with_kwargs=True)
                   for i, layer in enumerate(_decoder_layers(model))]
        try:
            pos = positions(attention_mask) if attention_mask is not None else None
            res = self._forward(model, ids, None, None, 0, pos)
        finally:
            for h in handles:
                h.remove()
        if sorted(seen) != list(range(len(types))):
            raise compat.incompatible(f"{self.cls.__name__} decoder layers", f"mask hook ran for layers {seen}")
        return res.logits.to(torch.float64)


_FLEX: dict[str, Optional[str]] = {}


def flex_runs(model_type: str, timeout: float = 600.0, window: bool = True) -> Optional[str]:
    """``None`` if ``model_type``'s flex attention survives :meth:`Family._try` in a child process,
    else why not (its exception, exit status or signal). A child, because a compiled kernel that
    aborts would take the caller down with it; the answer is kept for the process's lifetime.
    ``window=False`` runs the same model with the window disabled (``ignore_window``): the second
    question of :func:`impl.errors.window_probe`."""
    key = model_type if window else f"{model_type}/no-window"
    if key not in _FLEX:
        import os
        import subprocess
        import sys
        from pathlib import Path

        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        code = ("import warnings; warnings.simplefilter('ignore')\n"
                "from impl.hf.families import Family\n"
                f"Family({model_type!r}, ignore_window={not window})._try('flex_attention')\n")
        try:
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            _FLEX[key] = f"flex attention did not finish in {timeout:g} s"
        else:
            if r.returncode == 0:
                _FLEX[key] = None
            else:
                lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
                errs = [ln for ln in lines if "Error" in ln and not ln.startswith(" ")]
                how = f"signal {-r.returncode}" if r.returncode < 0 else f"exit status {r.returncode}"
                last = (errs or lines or ["(no output)"])[-1][:200]
                _FLEX[key] = f"a flex attention run died ({how}): {last}"
    return _FLEX[key]


def probe(model_type: str) -> None:
    """Build ``model_type``'s family once and run a prefill + decode, ``generate()`` and the reference
    with a plain causal mask; raise :class:`compat.HFIncompatible` naming the release and the step
    that failed (values are not checked: that is the campaign's job)."""
    step = "building the tiny model"
    try:
        fam = Family(model_type)
        for attn in fam.attn_impls(flex=False):
            ids = torch.tensor([[3, 4, 5, 6]])
            step = f"prefill + decode ({attn})"
            fam.run_cached(2, attn, ids, [3, 1])
            step = f"generate() ({attn})"
            fam.generate(2, attn, ids[:, :3], 1)
            step = f"reference forward ({attn})"
            causal = torch.ones(4, 4, dtype=torch.bool).tril().view(1, 1, 4, 4)
            fam.reference_logits(attn, ids, causal)
    except compat.HFUnavailable:
        raise
    except Exception as e:  # noqa: BLE001
        raise compat.incompatible(f"{model_type}: {step}", f"{type(e).__name__}: {e}") from e
