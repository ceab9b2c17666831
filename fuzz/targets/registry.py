"""Which targets exist, which run here, and how ``--target`` strings resolve.

* Built-in targets are listed by name (:data:`BUILTIN`) with the factory that builds them.
* Families take the rest of the string after a prefix (:data:`FAMILIES`): ``c:PATH.so`` and
  ``py:module.path:ClassName`` bring the user's own cache, ``mutant:NAME`` builds a mutant
  of the catalogue, ``hf:<model_type>`` a transformers sliding-window model family. A family whose
  members can be listed (:data:`LISTED`) has each of them listed, probed and, where it runs on a
  CPU, in the default campaign, like a built-in target.

Factories are named ``"module:function"`` and imported only when used, so a
missing optional dependency disables its own targets only. A factory raises
:class:`impl.errors.Unavailable` when its target cannot run on this machine
(no compiler output, no GPU, no transformers) and :class:`TargetError` when the
string names nothing usable; :func:`probe` is the one place that turns the first
into "unavailable here, because ...".
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from fuzz.targets.base import Target, TargetError, TargetFault
from impl.errors import Unavailable

#: name -> ("module:function", runs on CPU).
BUILTIN: dict[str, tuple[str, bool]] = {
    "pyring": ("fuzz.targets.pyring:make_pyring", True),
    "ring-c": ("fuzz.targets.ring:make_ring_c", True),
    "cuda-index": ("fuzz.targets.cuda_index:make_cuda_index", True),
    "paged-c": ("fuzz.targets.paged:make_paged_c", True),
    "decoder": ("fuzz.targets.decoder:make_decoder", True),
    "hf-dynamic": ("fuzz.targets.hf.caches:make_hf_dynamic", True),
    "hf-static": ("fuzz.targets.hf.caches:make_hf_static", True),
    "hf-mistral": ("fuzz.targets.hf.models:make_hf_mistral", True),
    "hf-gemma2": ("fuzz.targets.hf.models:make_hf_gemma2", True),
    "cuda-ring": ("fuzz.targets.cuda:make_cuda_ring", False),
    "cuda-decoder": ("fuzz.targets.cuda:make_cuda_decoder", False),
    # CUDA-only attention libraries (DESIGN §6, "GPU kernels without a GPU"; docs/kernels.md): unavailable without a
    # device, with the reason; scripts/gpu_check.sh runs them where one is lent.
    "gpu:flash-attn": ("fuzz.targets.engines.gpu_kernels:make_flash_attn", False),
    "gpu:flashinfer": ("fuzz.targets.engines.gpu_kernels:make_flashinfer", False),
}

#: prefix -> ("module:function" taking the rest of the string, what the rest names).
FAMILIES: dict[str, tuple[str, str]] = {
    "c:": ("fuzz.targets.ring:make_c_library", "PATH.so, any library implementing csrc/ringkv.h"),
    "py:": ("fuzz.targets.cache:make_py_class", "module:Class, any class implementing the Python target protocol"),
    "py-decoder:": ("fuzz.targets.py_decoder:make_py_decoder",
                    "module:Class, any class implementing the decoder protocol (the subjects of kvwindow gate)"),
    "mutant:": ("fuzz.targets.mutants:make_mutant", "NAME, a mutant of the catalogue (kvwindow mutants --list)"),
    "paged-c:": ("fuzz.targets.paged:make_paged_c_library", "PATH.so, any library implementing csrc/pagedkv.h"),
    "paged-py:": ("fuzz.targets.paged:make_paged_py",
                  "module:Class, any class implementing the Python paged protocol"),
    "vllm:": ("fuzz.targets.paged:make_vllm", "swa|hybrid, vLLM's paged sliding-window manager (impl.serving)"),
    "sglang:": ("fuzz.targets.paged:make_sglang", "swa, SGLang's sliding-window pool (impl.serving)"),
    "hf:": ("fuzz.targets.hf.family:make_hf_family",
            "MODEL_TYPE[@ATTN,...], a transformers sliding-window family (eager and sdpa; @flex_attention compiles)"),
    "hf-cb:": ("fuzz.targets.hf.cb:make_hf_cb",
               "MODEL_TYPE[@sdpa|paged|eager], a family through transformers' continuous batching (generate_batch's "
               "manager and paged cache; 5.x)"),
    # Engines beyond transformers (DESIGN §6): each resolves only where its package is installed.
    "ort:": ("fuzz.targets.engines.ort:make",
             "gqa|attention, ONNX Runtime's GroupQueryAttention / ONNX Attention-25 (pip install 'kvwindow[ort]')"),
    "mlx:": ("fuzz.targets.engines.mlx:make",
             "rotating|batch-rotating|MODEL_TYPE, mlx-lm's rotating KV caches and tiny models (pip install 'kvwindow[mlx]')"),
    "ct2:": ("fuzz.targets.engines.ct2:make", "mistral|gemma2|gemma3_text, a tiny seeded HF model converted to "
             "CTranslate2 by its own converter (pip install 'kvwindow[ct2]')"),
    "llama:": ("fuzz.targets.engines.llama:make", "gemma2|gemma3, a GGUF written by llama.cpp's converter from a tiny "
               "seeded HF model, driven through llama-cpp-python's low-level API (scripts/ci_engines_heavy.sh)"),
    "triton:": ("fuzz.targets.engines.triton_kernels:make",
                "vllm-unified|vllm-prefix|vllm-mla|sglang-decode|sglang-extend, a serving engine's Triton attention kernel under Triton's interpreter (pip install "
                "'kvwindow[triton-vllm]' / 'kvwindow[triton-sglang]')"),
    "flex:": ("fuzz.targets.engines.flex:make", "eager|compiled|dynamic, torch FlexAttention with a sliding-window "
              "mask_mod and create_block_mask (documents packed per call; compiled: static shapes)"),
    "ov:": ("fuzz.targets.engines.ov:make", "paged|mistral|gemma2|gemma3_text, OpenVINO's PagedAttention op on the CPU "
            "plugin (blocks of 32, forced) / a tiny seeded HF model converted by openvino.convert_model "
            "(pip install 'kvwindow[ov]')"),
    "keras:": ("fuzz.targets.engines.keras:make", "gemma2|gemma3, keras-hub's Gemma 2 / Gemma 3 (tensorflow backend) "
               "converted from a tiny seeded HF checkpoint by keras-hub's own converter (scripts/ci_engines_heavy.sh)"),
}

#: prefix -> "module:function" returning every member of the family to list, probe and run by default
#: (on CPU). A listing that fails (a missing optional dependency) lists the prefix itself as unavailable.
LISTED: dict[str, str] = {
    "hf:": "fuzz.targets.hf.family:instances",
    "hf-cb:": "fuzz.targets.hf.cb:instances",
    "ort:": "fuzz.targets.engines.ort:instances",
    "mlx:": "fuzz.targets.engines.mlx:instances",
    "ct2:": "fuzz.targets.engines.ct2:instances",
    "llama:": "fuzz.targets.engines.llama:instances",
    "keras:": "fuzz.targets.engines.keras:instances",
    "triton:": "fuzz.targets.engines.triton_kernels:instances",
    "flex:": "fuzz.targets.engines.flex:instances",
    "ov:": "fuzz.targets.engines.ov:instances",
    # the serving engines' block managers (impl.serving.ADAPTERS): available in .venv-serving only
    "vllm:": "fuzz.targets.paged:vllm_instances",
    "sglang:": "fuzz.targets.paged:sglang_instances",
}


@dataclass
class TargetInfo:
    name: str
    available: bool
    reason: str
    cpu: bool


def _factory(path: str) -> Callable[..., Target]:
    mod, _, fn = path.partition(":")
    return getattr(importlib.import_module(mod), fn)


def _build(spec: str) -> Target:
    for prefix, (path, _) in FAMILIES.items():
        if spec.startswith(prefix):
            return _factory(path)(spec[len(prefix):])
    if spec not in BUILTIN:
        raise TargetError(f"unknown target {spec!r}; known: {', '.join(BUILTIN)}, "
                          + ", ".join(prefix + what.split(",")[0] for prefix, (_, what) in FAMILIES.items()))
    return _factory(BUILTIN[spec][0])()


def probe(spec: str) -> tuple[Target | None, str | None]:
    """``(target, None)``, or ``(None, why)`` when ``spec`` names a target that cannot run on this
    machine. A string that names no target raises :class:`TargetError`."""
    return try_build(lambda: _build(spec))


def try_build(build: Callable[[], Target]) -> tuple[Target | None, str | None]:
    """``(build(), None)``, or ``(None, why)`` when the target cannot run on this machine: the one
    place an :class:`~impl.errors.Unavailable` (or a missing optional module) becomes a reason."""
    try:
        return build(), None
    except Unavailable as e:
        return None, str(e)
    except ModuleNotFoundError as e:  # an optional dependency of the factory's module
        return None, f"module {e.name} is not installed"
    except (ImportError, OSError) as e:
        return None, f"{type(e).__name__}: {e}"


def resolve(spec: str) -> Target:
    """Turn a ``--target`` value into a :class:`Target`, or raise :class:`TargetError` (exit 2); an adapter that
    cannot drive the installed release (an ``Unavailable`` naming its ``release`` and ``api``) raises
    :class:`TargetFault` (exit 3: a harness fault)."""
    seen: list[Unavailable] = []

    def build() -> Target:
        try:
            return _build(spec)
        except Unavailable as e:
            seen.append(e)
            raise
    target, why = try_build(build)
    if target is None:
        if seen and hasattr(seen[0], "release") and hasattr(seen[0], "api"):
            raise TargetFault(f"target {spec!r}: harness fault: {why}")
        raise TargetError(f"target {spec!r} is not available here: {why}")
    return target


def listed_names() -> list[tuple[str, bool]]:
    """``(name, runs on CPU)`` of every target :func:`list_targets` lists: the built-ins, then the
    members of each listed family (:data:`LISTED`)."""
    out = [(name, cpu) for name, (_, cpu) in BUILTIN.items()]
    for prefix, path in LISTED.items():
        try:
            names = _factory(path)()
        except Exception:  # noqa: BLE001 - listed below as the prefix, with the reason
            names = [prefix + "*"]
        out += [(n, True) for n in names]
    return out


def list_targets(keep: dict[str, Target] | None = None) -> list[TargetInfo]:
    """Every built-in target and every member of a listed family, whether it runs here, and why not; the
    targets built to find out go into ``keep`` (name -> target) when it is given, so a caller that runs them
    next does not build them twice."""
    out = []
    for name, cpu in listed_names():
        try:
            target, why = probe(name)
        except Exception as e:  # noqa: BLE001 - a broken factory disables its own target only
            target, why = None, f"{type(e).__name__}: {e}"
        if target is not None and keep is not None:
            keep[name] = target
        out.append(TargetInfo(name, target is not None, why or "ok", cpu))
    return out


def default_targets(keep: dict[str, Target] | None = None) -> list[str]:
    """The default campaign: every CPU target that runs on this machine (built into ``keep``, if given)."""
    return [t.name for t in list_targets(keep) if t.available and t.cpu]
