"""CTranslate2: a tiny seeded Hugging Face model converted by CTranslate2's own converter and driven
through the ``ctranslate2.Generator`` calls users make.

**The window convention.** CTranslate2's ``TransformersConverter`` copies the HF config's window
unchanged into the model spec: ``MistralLoader.get_model_spec`` reads ``sliding_window =
getattr(model.config, "sliding_window", 0)`` and passes ``sliding_window=sliding_window`` to
``TransformerDecoderModelSpec.from_config`` (ctranslate2 4.8.5,
``ctranslate2/converters/transformers.py`` lines 3009 and 3048); ``Gemma3Loader`` sets each sliding
layer's ``self_attention.sliding_window`` to the HF ``sliding_window`` and each global layer's to 0
(lines 2499 and 2564-2571). So the spec's ``W`` is the HF ``sliding_window = W`` and the engine's
``sliding_window = W``: one rule, every release, applied by converting a checkpoint whose config
says ``sliding_window = W`` (this module never writes the engine's window itself). ``Gemma2Loader``
passes no window at all (lines 2211-2260): a Gemma 2 conversion has no sliding layers; that is the
converter's behaviour under test, not a convention of this module.

**What is driven** (:class:`Ct2Model`): ``Generator.forward_batch`` (the full forward of each row,
logits of every position), ``score_batch`` (log-probabilities of each next token),
``generate_batch`` with ``return_logits_vocab=True`` — the prompt forwarded at once
(``include_prompt_in_result=False``: the prefill, chunked by the engine when longer than the window)
or stepped through token by token (``include_prompt_in_result=True``: the decode path over known
tokens), with a ``static_prompt`` (a cached first chunk, the rest forwarded onto it) — and
``generate_tokens`` with log-probs. Batches of several rows with different lengths are padded by the
engine. Threads: ``intra_threads`` 1 or 2.

Conversions are cached (:mod:`impl.engines.store`) by the model's fingerprint, the window and the
ctranslate2 and transformers versions.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from impl.engines import EngineIncompatible, EngineUnavailable, installed, store
from impl.engines.tiny import ARCHS, TinyModel, save_hf, token

DIST = "ctranslate2"
#: The architectures this adapter converts (HF config class -> CTranslate2 loader registered).
CONFIG_CLASS = {"mistral": "MistralConfig", "gemma2": "Gemma2Config", "gemma3_text": "Gemma3TextConfig"}
#: The Generator calls and keywords each path of the ``ct2:`` targets drives (fuzz/targets/engines/ct2.py).
PATH_NEEDS: dict[str, dict[str, tuple[str, ...]]] = {
    "forward": {"forward_batch": ("return_log_probs",)},
    "batch": {"forward_batch": ("return_log_probs",)},
    "score": {"score_batch": ()},
    "stepped": {"generate_batch": ("return_logits_vocab", "include_prompt_in_result", "end_token")},
    "generate": {"generate_batch": ("static_prompt", "return_logits_vocab", "include_prompt_in_result", "end_token"),
                 "generate_tokens": ("return_log_prob",)},
}
#: What an unavailable path's reason says (scripts/engine_compat.py reads it as "n/a", not a harness fault).
LACKS = "the release has no"


def release() -> str:
    return installed(DIST, "ct2")


def _doc_params(fn: Any) -> str:
    """A pybind11 function's signature line (its first docstring line): how keywords are detected."""
    return (getattr(fn, "__doc__", "") or "").split("\n", 1)[0]


def check(arch: str) -> str:
    """The installed release, if the adapter can drive ``arch`` on it; else :class:`EngineIncompatible`
    naming the API that is missing (feature detection, never a version comparison)."""
    rel = release()
    if arch not in ARCHS:
        raise EngineUnavailable(f"ct2:{arch}: no tiny model for {arch!r} (ct2 targets build {', '.join(ARCHS)})")
    try:
        import ctranslate2
        from ctranslate2.converters import transformers as conv
    except ImportError as e:
        raise EngineIncompatible(DIST, rel, "import ctranslate2.converters.transformers", str(e)) from e
    loaders = getattr(conv, "_MODEL_LOADERS", None)
    if not isinstance(loaders, dict) or not hasattr(conv, "TransformersConverter"):
        raise EngineIncompatible(DIST, rel, "ctranslate2.converters.TransformersConverter", "no loader registry")
    if CONFIG_CLASS[arch] not in loaders:  # the release predates the model (Gemma 2: 4.4, Gemma 3: 4.7): n/a
        raise EngineUnavailable(f"ctranslate2 {rel}: {LACKS} TransformersConverter loader for {CONFIG_CLASS[arch]}")
    lacking = lacking_paths()
    if len(lacking) == len(PATH_NEEDS):
        raise EngineUnavailable(f"ctranslate2 {rel}: {LACKS} Generator call the ct2 targets drive ("
                                + "; ".join(f"{p}: {why}" for p, why in lacking.items()) + ")")
    return rel


def _accepts(gen: Any, name: str, kw: str) -> bool:
    fn = getattr(gen, name, None)
    if fn is None:
        return False
    sig = _doc_params(fn)
    if name == "generate_tokens":
        try:
            sig = str(inspect.signature(fn))
        except (TypeError, ValueError):
            pass
    return kw in sig


def lacking_paths() -> dict[str, str]:
    """The paths the installed release cannot drive, each with what it lacks (feature detection on the
    ``Generator`` calls' signatures, never a version number: ``return_logits_vocab`` came with 4.4)."""
    import ctranslate2

    gen = getattr(ctranslate2, "Generator", None)
    out = {}
    for path, calls in PATH_NEEDS.items():
        for name, kws in calls.items():
            if getattr(gen, name, None) is None:
                out[path] = f"{LACKS} Generator.{name}"
                break
            bad = [kw for kw in kws if not _accepts(gen, name, kw)]
            if bad:
                out[path] = f"{LACKS} Generator.{name}({', '.join(k + '=' for k in bad)})"
                break
    return out


def converted(tiny: TinyModel) -> Path:
    """The CTranslate2 model folder of ``tiny`` (float32), converted by ``TransformersConverter`` from
    a saved checkpoint exactly as a user converts one, once per key (:mod:`impl.engines.store`)."""
    import transformers

    key = {"engine": DIST, "release": release(), "transformers": transformers.__version__, "arch": tiny.arch,
           "window": tiny.window, "weights": tiny.fingerprint(), "quantization": "float32"}

    def build(out: Path) -> None:
        import tempfile

        from ctranslate2.converters import TransformersConverter

        with tempfile.TemporaryDirectory(prefix="kvwindow-hf-") as src:
            save_hf(tiny, Path(src))
            TransformersConverter(src).convert(str(out / "model"), quantization="float32", force=True)

    return store.entry("ct2", key, build) / "model"


def _rows(rows: Sequence[Sequence[int]]) -> list[list[str]]:
    return [[token(int(t)) for t in r] for r in rows]


class Ct2Model:
    """One converted model on one ``Generator`` (``threads`` intra-op threads)."""

    def __init__(self, tiny: TinyModel, threads: int = 1):
        import ctranslate2

        self.tiny, self.threads = tiny, threads
        self.path = converted(tiny)
        self.generator = ctranslate2.Generator(str(self.path), device="cpu", compute_type="float32",
                                               intra_threads=threads, inter_threads=1)

    def forward(self, rows: Sequence[Sequence[int]], log_probs: bool = False) -> list[np.ndarray]:
        """``forward_batch`` of ragged ``rows`` at once: each row's ``[T_i, V]`` logits (or log-probs)."""
        out = np.asarray(self.generator.forward_batch(_rows(rows), return_log_probs=log_probs))
        return [out[b, :len(r)].astype(np.float64) for b, r in enumerate(rows)]

    def score(self, rows: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """``score_batch``: the log-probability of each token after the first, per row."""
        res = self.generator.score_batch(_rows(rows))
        return [np.asarray(r.log_probs, dtype=np.float64) for r in res]

    def generate(self, prompts: Sequence[Sequence[int]], steps: int, *, static: Sequence[int] = (),
                 stepped: bool = False) -> list[tuple[list[int], np.ndarray]]:
        """Greedy ``generate_batch`` of ``steps`` tokens after each prompt (``static``, when given, is the
        ``static_prompt`` every row shares, cached by the engine and forwarded first). Returns per row the
        generated ids and the logits of every step (``[steps, V]``; ``stepped``: the prompt is stepped
        through token by token and the logits of those steps come first, ``[len(prompt) - 1 + steps, V]``)."""
        kw: dict[str, Any] = dict(max_length=steps, sampling_topk=1, return_logits_vocab=True,
                                  include_prompt_in_result=stepped, end_token=[])
        if static:
            kw["static_prompt"] = [token(int(t)) for t in static]
        if stepped:
            kw["max_length"] = max(len(p) for p in prompts) - 1 + steps
            kw["min_length"] = kw["max_length"]
        else:
            kw["min_length"] = steps
        res = self.generator.generate_batch(_rows(prompts), **kw)
        out = []
        for p, r in zip(prompts, res):
            ids = list(r.sequences_ids[0])
            logits = np.stack([np.asarray(x, dtype=np.float64) for x in r.logits[0]]) if r.logits[0] else \
                np.zeros((0, self.tiny.vocab))
            out.append((ids[len(p):] if stepped else ids, logits))
        return out

    def stream(self, prompt: Sequence[int], steps: int) -> list[tuple[int, float]]:
        """``generate_tokens`` (greedy, with log-probs): ``(token id, log-prob)`` of each step."""
        return [(int(s.token_id), float(s.log_prob)) for s in
                self.generator.generate_tokens([token(int(t)) for t in prompt], max_length=steps,
                                               min_length=steps, sampling_topk=1, return_log_prob=True,
                                               end_token=[])]
