"""Tiny seeded Hugging Face models, the source every engine's own converter starts from.

An engine target needs what its users have: a Hugging Face checkpoint with ``sliding_window = W``
that the engine's converter turns into the engine's format (CTranslate2's
``TransformersConverter``, llama.cpp's ``convert_hf_to_gguf.py``, keras-hub's checkpoint
converters). :func:`build` makes one from a seed, in process, nothing downloaded: the config of
:func:`impl.hf.families.tiny_config` (the same tiny shapes the ``hf:`` targets use) and the weights of
:func:`impl.hf.families.seeded_state_dict`, **rounded to float32** (the engines run float32), so the
float64 reference (:func:`impl.hf.reference.forward`) runs over exactly the weights the engine holds.

:func:`save_hf` writes the checkpoint as ``save_pretrained`` does, with a hand-made word-level
tokenizer whose token ``i`` is ``<t{i}>`` (converters read a vocabulary; nothing here tokenizes
text).
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import torch

from impl.hf.families import VOCAB, seeded_state_dict, tiny_config  # noqa: F401 - VOCAB re-exported

VOCAB_SIZE = VOCAB
#: The architectures an engine target can build (``model_type`` values).
ARCHS = ("mistral", "gemma2", "gemma3_text")
PAD, BOS, EOS = 0, 1, 2


def token(i: int) -> str:
    """The vocabulary entry of token id ``i``."""
    return f"<t{i}>"


@dataclass
class TinyModel:
    arch: str
    window: int
    seed: int
    config: Any
    #: float32 values held as float64 (what the engine holds, exactly).
    state: dict[str, torch.Tensor] = field(repr=False)
    #: Config attributes changed from the family's tiny config (part of the fingerprint).
    overrides: dict[str, Any] = field(default_factory=dict)
    _fingerprint: str = ""

    @property
    def vocab(self) -> int:
        return VOCAB

    def fingerprint(self) -> str:
        """A hash of the config (as built, before any save touches it) and every weight: the conversion
        cache's key."""
        if not self._fingerprint:
            self._fingerprint = self._hash()
        return self._fingerprint

    def _hash(self) -> str:
        h = hashlib.sha256(json.dumps(self.config.to_dict(), sort_keys=True, default=str).encode())
        for name in sorted(self.state):
            h.update(name.encode())
            h.update(self.state[name].to(torch.float32).numpy().tobytes())
        return h.hexdigest()[:24]

    def layer_types(self) -> list[str]:
        lt = getattr(self.config, "layer_types", None)
        if lt:
            return list(lt)
        from impl.hf.families import layer_pattern

        return layer_pattern(self.arch, self.config.num_hidden_layers)


#: Gemma 3's published layer pattern (every checkpoint Google released: five sliding layers, then one
#: global), as six layers. Two converters hard-code it instead of reading the HF ``layer_types``:
#: llama.cpp's ``llama_model_gemma3::load_arch_hparams`` calls ``load_swa_pattern(ml, 6)`` when the GGUF
#: has no pattern key, and ``convert_hf_to_gguf.py``'s ``Gemma3Model`` writes none (llama-cpp-python
#: 0.3.36: ``src/models/gemma3.cpp`` line 7, ``conversion/gemma.py`` lines 141-159; docs/findings/
#: llama-gemma3-layer-types-dropped.md); keras-hub's ``Gemma3Backbone`` builds layer ``i`` sliding iff
#: ``i % 6 < 5`` with RoPE bases 10 000 / 1 000 000 (0.32.0, ``gemma3_backbone.py`` lines 248-249) and
#: ``convert_gemma3.py`` reads neither ``layer_types`` nor the RoPE bases. An engine target that builds
#: Gemma 3 for them uses this pattern and these bases (``rope_local_base_freq`` is what 4.x configs
#: read; 5.x's defaults in ``rope_parameters`` are already 10 000 / 1 000 000), so what it compares is the
#: window, not a pattern the converter cannot carry.
GEMMA3_PUBLISHED = {"num_hidden_layers": 6, "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
                    "rope_local_base_freq": 10000.0}


def _model_class(arch: str) -> type:
    import transformers

    return {"mistral": transformers.MistralForCausalLM, "gemma2": transformers.Gemma2ForCausalLM,
            "gemma3_text": transformers.Gemma3ForCausalLM}[arch]


def build(arch: str, window: int, seed: int = 0, overrides: Optional[dict[str, Any]] = None) -> TinyModel:
    """The tiny ``arch`` model with ``sliding_window = window`` and weights from ``seed`` (the same
    weights for every window)."""
    if arch not in ARCHS:
        raise ValueError(f"arch {arch!r} is not one of {ARCHS}")
    if not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an int >= 1, got {window!r}")
    cfg = tiny_config(arch, window, "eager")
    for k, v in (overrides or {}).items():
        setattr(cfg, k, v)
    key = (arch, seed, json.dumps(overrides or {}, sort_keys=True, default=str))
    state = _STATES.get(key)
    if state is None:  # the weights do not depend on the window: one seeded draw per (arch, seed, overrides)
        with warnings.catch_warnings(), _no_init():
            warnings.simplefilter("ignore")
            model = _model_class(arch)(cfg)
        state = {k: v.to(torch.float32).to(torch.float64) for k, v in seeded_state_dict(model, arch, seed).items()}
        if getattr(cfg, "tie_word_embeddings", False) and "lm_head.weight" in state:
            state["lm_head.weight"] = state["model.embed_tokens.weight"]  # tied: one tensor, as HF loads it
        _STATES[key] = state
    out = TinyModel(arch, window, seed, cfg, dict(state), dict(overrides or {}))
    out.fingerprint()
    return out


#: (arch, seed, overrides) -> the seeded float32-valued weights (as float64), shared by every window.
_STATES: dict[tuple, dict[str, torch.Tensor]] = {}


def _no_init() -> Any:
    """transformers' ``no_init_weights`` (skip the random init of weights that are overwritten anyway: ~2 s of
    CPU per 6-layer Gemma 3), where the release has it; else a no-op."""
    import contextlib

    for mod in ("transformers.initialization", "transformers.modeling_utils"):
        try:
            return importlib.import_module(mod).no_init_weights()
        except (ImportError, AttributeError):
            continue
    return contextlib.nullcontext()


def hf_model(tiny: TinyModel) -> Any:
    """A float32 transformers model holding ``tiny``'s weights (what a converter loads)."""
    with warnings.catch_warnings(), _no_init():
        warnings.simplefilter("ignore")
        model = _model_class(tiny.arch)(copy.deepcopy(tiny.config))
        model.load_state_dict({k: v.to(torch.float32) for k, v in tiny.state.items()}, strict=False)
    return model.to(torch.float32).eval()


def tokenizer() -> Any:
    """A word-level fast tokenizer over ``<t0> .. <t{VOCAB-1}>`` (pad 0, bos 1, eos 2)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token(i): i for i in range(VOCAB)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=token(PAD)))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=token(PAD), pad_token=token(PAD),
                                   bos_token=token(BOS), eos_token=token(EOS))


def save_hf(tiny: TinyModel, folder: Path) -> Path:
    """Write ``tiny`` as a Hugging Face checkpoint (safetensors, config, tokenizer) into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf_model(tiny).save_pretrained(folder)
        tokenizer().save_pretrained(folder)
    return folder
