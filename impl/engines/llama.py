"""llama.cpp through llama-cpp-python's low-level API: a GGUF written from a tiny seeded Hugging Face
model by llama.cpp's own converter (``convert_hf_to_gguf.py`` of the same sdist the library was built
from), driven with ``llama_batch`` / ``llama_decode`` / ``llama_get_logits_ith`` and the memory API
(``llama_memory_seq_rm`` / ``seq_cp`` / ``seq_add``), f32 KV cache.

**The window convention.** The converter writes the HF ``sliding_window`` unchanged:
``Gemma2Model.set_gguf_parameters`` calls ``self.gguf_writer.add_sliding_window(self.hparams[
"sliding_window"])`` (llama-cpp-python 0.3.36 sdist, ``vendor/llama.cpp/conversion/gemma.py`` line
103; Gemma 3: line 157, written unless ``sliding_window_pattern == 1``), which llama.cpp loads as
``hparams.n_swa``; ``llama_hparams::is_masked_swa`` (``src/llama-hparams.h`` lines 475-487) hides key
``p0`` from query ``p1`` when ``p1 - p0 >= n_swa`` (``LLAMA_SWA_TYPE_STANDARD``): the query sees
``p1 - W + 1 .. p1``, the spec's ``W``. So the spec's ``W`` is ``sliding_window = W`` in the
checkpoint and ``n_swa = W`` in the engine — one rule, applied by the converter, never by this module.

**The converter** is not in the wheel: :func:`converter_dir` finds it where
``scripts/ci_engines_heavy.sh`` puts it (``<venv>/share/kvwindow/llama.cpp-<release>/``, extracted from
the release's sdist) or at ``$KVWINDOW_LLAMA_CONVERTER``. It runs in process; its model class is
subclassed only to write a hand-made vocabulary (``<t0> .. <t63>``, an SPM-type token list: our
checkpoint has no ``tokenizer.model``), nothing else.

Feature detection: the low-level functions the adapter calls must exist
(:data:`NEEDS`); a missing one makes the target unavailable naming the release.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys
import threading
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from impl.engines import EngineIncompatible, EngineUnavailable, installed, store
from impl.engines.tiny import BOS, EOS, PAD, TinyModel, save_hf, token

DIST = "llama-cpp-python"
#: HF architecture -> the GGUF arch llama.cpp names it (the ``llama:<arch>`` targets).
GGUF_ARCH = {"gemma2": "gemma2", "gemma3_text": "gemma3"}
HF_CLASS = {"gemma2": "Gemma2ForCausalLM", "gemma3_text": "Gemma3ForCausalLM"}
NEEDS = ("llama_backend_init", "llama_model_load_from_file", "llama_init_from_model", "llama_batch_init",
         "llama_batch_free", "llama_decode", "llama_get_logits_ith", "llama_get_memory", "llama_memory_clear",
         "llama_memory_seq_rm", "llama_memory_seq_cp", "llama_memory_seq_add", "llama_memory_seq_pos_max",
         "llama_model_n_swa", "llama_free", "llama_model_free", "llama_context_default_params",
         "llama_model_default_params", "llama_set_n_threads")
_lock = threading.Lock()
_backend = False


def release() -> str:
    return installed(DIST, "llama")


def converter_dir(rel: str) -> Path:
    env = os.environ.get("KVWINDOW_LLAMA_CONVERTER")
    cands = [Path(env)] if env else []
    cands.append(Path(sys.prefix) / "share" / "kvwindow" / f"llama.cpp-{rel}")
    for c in cands:
        if (c / "convert_hf_to_gguf.py").is_file() and (c / "gguf-py").is_dir():
            return c
    raise EngineUnavailable(f"llama.cpp's convert_hf_to_gguf.py for llama-cpp-python {rel} is not at "
                            f"{cands[-1]} (scripts/ci_engines_heavy.sh extracts it from the release's sdist; "
                            f"or set KVWINDOW_LLAMA_CONVERTER)")


def check(arch: str) -> str:
    rel = release()
    if arch not in GGUF_ARCH:
        raise EngineUnavailable(f"llama:{arch}: no tiny model for this architecture (llama targets: "
                                f"{', '.join(GGUF_ARCH.values())})")
    try:
        import llama_cpp
    except Exception as e:  # noqa: BLE001 - a build without its shared library
        raise EngineIncompatible(DIST, rel, "import llama_cpp", f"{type(e).__name__}: {e}") from e
    for name in NEEDS:
        if not hasattr(llama_cpp, name):
            raise EngineIncompatible(DIST, rel, f"llama_cpp.{name}", "missing from the low-level API")
    fields = {f for f, _ in llama_cpp.llama_context_params._fields_}
    for f in ("swa_full", "type_k", "type_v", "n_seq_max", "kv_unified"):
        if f not in fields:
            raise EngineIncompatible(DIST, rel, f"llama_context_params.{f}", "field missing")
    converter_dir(rel)
    return rel


def _write_gguf(tiny: TinyModel, out: Path, rel: str) -> None:
    """Run the release's converter on ``tiny``'s checkpoint, f32, into ``out/model.gguf``."""
    import tempfile

    conv = converter_dir(rel)
    for p in (str(conv / "gguf-py"), str(conv)):
        if p not in sys.path:
            sys.path.insert(0, p)
    stale = [m for m in sys.modules if m == "gguf" or m.startswith("gguf.")]
    for m in stale:  # the converter's own gguf-py, not another copy
        if not str(getattr(sys.modules[m], "__file__", "") or "").startswith(str(conv)):
            del sys.modules[m]
    gguf = importlib.import_module("gguf")
    conversion = importlib.import_module("conversion")
    base = conversion.get_model_class(HF_CLASS[tiny.arch])

    class HandVocab(base):  # type: ignore[misc, valid-type]
        model_arch = base.model_arch

        def set_vocab(self):
            w = self.gguf_writer
            w.add_tokenizer_model("llama")
            w.add_tokenizer_pre("default")
            w.add_token_list([token(i).encode() for i in range(tiny.vocab)])
            w.add_token_scores([0.0] * tiny.vocab)
            w.add_token_types([gguf.TokenType.CONTROL if i in (PAD, BOS, EOS) else gguf.TokenType.NORMAL
                               for i in range(tiny.vocab)])
            w.add_bos_token_id(BOS)
            w.add_eos_token_id(EOS)
            w.add_pad_token_id(PAD)
            w.add_add_bos_token(False)

    with tempfile.TemporaryDirectory(prefix="kvwindow-hf-") as src:
        save_hf(tiny, Path(src))
        model = HandVocab(Path(src), gguf.LlamaFileType.ALL_F32, out / "model.gguf", eager=True)
        model.write()


def converted(tiny: TinyModel) -> Path:
    rel = release()
    import transformers

    key = {"engine": DIST, "release": rel, "transformers": transformers.__version__, "arch": tiny.arch,
           "window": tiny.window, "weights": tiny.fingerprint(), "outtype": "f32"}
    return store.entry("gguf", key, lambda out: _write_gguf(tiny, out, rel)) / "model.gguf"


class LlamaModel:
    """One GGUF on one context: ``n_seq`` sequences, f32 K/V, the SWA cache (``swa_full = False``)."""

    def __init__(self, tiny: TinyModel, n_ctx: int = 128, n_seq: int = 2, threads: int = 1):
        import llama_cpp as L

        global _backend
        self.L, self.tiny, self.n_seq = L, tiny, n_seq
        self.path = converted(tiny)
        with _lock:
            if not _backend:
                L.llama_backend_init()
                L.llama_log_set(_SILENT, ctypes.c_void_p(0)) if hasattr(L, "llama_log_set") else None
                _backend = True
        mp = L.llama_model_default_params()
        self.model = L.llama_model_load_from_file(str(self.path).encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama_model_load_from_file({self.path}) returned NULL")
        cp = L.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = n_ctx, n_ctx, n_ctx, n_seq
        cp.n_threads = cp.n_threads_batch = threads
        cp.type_k = cp.type_v = L.GGML_TYPE_F32
        cp.swa_full = False
        cp.kv_unified = True
        if hasattr(cp, "flash_attn_type"):
            cp.flash_attn_type = getattr(L, "LLAMA_FLASH_ATTN_TYPE_DISABLED", 0)
        self.ctx = L.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError("llama_init_from_model returned NULL")
        self.mem = L.llama_get_memory(self.ctx)
        self.n_vocab = tiny.vocab
        self.batch = L.llama_batch_init(n_ctx, 0, n_seq)
        self.n_ctx = n_ctx

    def n_swa(self) -> int:
        return int(self.L.llama_model_n_swa(self.model))

    def set_threads(self, n: int) -> None:
        self.L.llama_set_n_threads(self.ctx, n, n)

    def clear(self) -> None:
        self.L.llama_memory_clear(self.mem, True)

    def decode(self, items: Sequence[tuple[int, int, int]]) -> np.ndarray:
        """One ``llama_decode`` of ``(token, pos, seq)`` items, logits requested for every item;
        returns ``[len(items), V]`` float64. A non-zero status raises ``RuntimeError`` naming it."""
        if not items or len(items) > self.n_ctx:
            raise ValueError(f"a batch takes 1..{self.n_ctx} items, got {len(items)}")
        b = self.batch
        for j, (t, p, s) in enumerate(items):
            b.token[j], b.pos[j], b.n_seq_id[j] = int(t), int(p), 1
            b.seq_id[j][0] = int(s)
            b.logits[j] = 1
        b.n_tokens = len(items)
        rc = self.L.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        out = np.empty((len(items), self.n_vocab))
        for j in range(len(items)):
            ptr = self.L.llama_get_logits_ith(self.ctx, j)
            out[j] = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))
        return out

    def seq_rm(self, seq: int, p0: int, p1: int) -> bool:
        return bool(self.L.llama_memory_seq_rm(self.mem, seq, p0, p1))

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        self.L.llama_memory_seq_cp(self.mem, src, dst, p0, p1)

    def seq_add(self, seq: int, p0: int, p1: int, delta: int) -> None:
        self.L.llama_memory_seq_add(self.mem, seq, p0, p1, delta)

    def pos_max(self, seq: int) -> int:
        return int(self.L.llama_memory_seq_pos_max(self.mem, seq))

    def close(self) -> None:
        L = self.L
        if getattr(self, "batch", None) is not None:
            L.llama_batch_free(self.batch)
            self.batch = None
        if getattr(self, "ctx", None):
            L.llama_free(self.ctx)
            self.ctx = None
        if getattr(self, "model", None):
            L.llama_model_free(self.model)
            self.model = None

    def __del__(self):  # noqa: D401 - best effort at interpreter exit
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


def _silent(level, text, user_data):  # llama.cpp's log callback: keep campaign output clean
    return None


try:
    import llama_cpp as _L

    _SILENT = _L.llama_log_callback(_silent)
except Exception:  # noqa: BLE001 - not installed: nothing to silence
    _SILENT = None


def optional(x: Optional[int]) -> int:
    return -1 if x is None else x
