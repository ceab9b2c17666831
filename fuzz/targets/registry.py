"""Which targets exist, which run here, and how ``--target`` strings resolve.

Built-in targets are listed by name with the factory that builds them;
a factory raises :class:`TargetUnavailable` with the reason when the target
cannot run on this machine (no compiler output, no GPU, no transformers).
``c:PATH.so`` and ``py:module.path:ClassName`` bring the user's own cache.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from fuzz.targets.base import Target, TargetError, TargetUnavailable
from fuzz.targets.cache import CacheTarget, check_protocol


#: name -> ("module:function", runs on CPU). Factories are imported lazily so that a
#: missing optional dependency only disables its own targets.
BUILTIN: dict[str, tuple[str, bool]] = {
    "pyring": ("fuzz.targets.pyring:make_pyring", True),
    "ring-c": ("fuzz.targets.ring:make_ring_c", True),
    "cuda-index": ("fuzz.targets.cuda_index:make_cuda_index", True),
    "decoder": ("fuzz.targets.decoder:make_decoder", True),
    "hf-dynamic": ("fuzz.targets.hf.caches:make_hf_dynamic", True),
    "hf-static": ("fuzz.targets.hf.caches:make_hf_static", True),
    "hf-mistral": ("fuzz.targets.hf.models:make_hf_mistral", True),
    "hf-gemma2": ("fuzz.targets.hf.models:make_hf_gemma2", True),
    "cuda-ring": ("fuzz.targets.cuda:make_cuda_ring", False),
    "cuda-decoder": ("fuzz.targets.cuda:make_cuda_decoder", False),
}


@dataclass
class TargetInfo:
    name: str
    available: bool
    reason: str
    cpu: bool


def _factory(path: str) -> Callable[[], Target]:
    mod, _, fn = path.partition(":")
    try:
        module = importlib.import_module(mod)
    except ModuleNotFoundError as e:
        raise TargetUnavailable(f"module {e.name} is not installed") from e
    return getattr(module, fn)


def make_builtin(name: str) -> Target:
    if name not in BUILTIN:
        raise TargetError(f"unknown target {name!r}; known: {', '.join(BUILTIN)}, c:PATH.so, py:module:Class")
    return _factory(BUILTIN[name][0])()


def list_targets() -> list[TargetInfo]:
    """Every built-in target, whether it runs here, and why not."""
    out = []
    for name, (_, cpu) in BUILTIN.items():
        try:
            make_builtin(name)
            out.append(TargetInfo(name, True, "ok", cpu))
        except TargetUnavailable as e:
            out.append(TargetInfo(name, False, str(e), cpu))
        except Exception as e:  # noqa: BLE001 - a broken factory disables its own target only
            out.append(TargetInfo(name, False, f"{type(e).__name__}: {e}", cpu))
    return out


def default_targets() -> list[str]:
    """The default campaign: every CPU target that runs on this machine."""
    return [t.name for t in list_targets() if t.available and t.cpu]


def resolve(spec: str) -> Target:
    """Turn a ``--target`` value into a :class:`Target`, or raise :class:`TargetError`."""
    if spec.startswith("py:"):
        return _resolve_py(spec)
    if spec.startswith("c:"):
        try:
            from fuzz.targets.ring import make_c_library
        except ModuleNotFoundError as e:
            raise TargetError(f"{spec}: C targets are unavailable ({e})") from e
        return make_c_library(spec[2:])
    try:
        return make_builtin(spec)
    except TargetUnavailable as e:
        raise TargetError(f"target {spec!r} is not available here: {e}") from e
    except (ImportError, OSError) as e:
        raise TargetError(f"target {spec!r} is not available here: {type(e).__name__}: {e}") from e


def _resolve_py(spec: str) -> Target:
    path = spec[3:]
    mod, sep, cls = path.rpartition(":")
    if not sep or not mod or not cls:
        raise TargetError(f"{spec}: expected py:module.path:ClassName")
    try:
        module = importlib.import_module(mod)
    except Exception as e:  # noqa: BLE001 - any import failure is the user's to see
        raise TargetError(f"{spec}: cannot import {mod!r}: {type(e).__name__}: {e}") from e
    factory = getattr(module, cls, None)
    if factory is None:
        raise TargetError(f"{spec}: module {mod!r} has no attribute {cls!r}")
    try:
        check_protocol(factory, f"{spec}")
    except TypeError as e:
        raise TargetError(str(e)) from e
    return CacheTarget(spec, factory)
