"""Which transformers is installed, and the shims that drive its cache API whatever the release.

Every API the adapters touch changed shape somewhere between 4.45 and 5.x. Each
shim here detects the feature it needs (a class, a constructor keyword, a
parameter name, an attribute) and never compares version numbers; the version is
only reported, and named in errors. The detected differences, with the releases
they were seen on (``scripts/hf_matrix.sh``):

* cache family (:attr:`HFInfo.api`): ``"layers"`` when ``cache_utils`` has both
  ``DynamicSlidingWindowLayer`` and ``StaticSlidingWindowLayer`` (4.57+; 5.24.0
  pinned in :mod:`impl.hf.conventions`), else ``"legacy"``: a ``DynamicCache``
  that never evicts and a whole-model static sliding buffer whose update follows
  4.45's ``HybridCache._sliding_update`` (4.45-4.53 in ``HybridCache``, 4.54-4.56
  in a ``SlidingWindowLayer`` that ``HybridCache`` builds);
* the batch keyword of the whole-model caches (:func:`static_sliding_cache`):
  ``batch_size`` (4.45-4.50, where ``max_batch_size`` is the deprecated one),
  ``max_batch_size`` (4.51-4.55, via ``Cache.__init__`` from 4.54), none (4.56+);
* ``DynamicCache(config=...)`` (4.56+) vs ``DynamicCache()`` (:func:`dynamic_cache`);
* where a layer's tensors live (:func:`layer_kv`): ``cache.layers[i].keys`` (4.54+;
  ``None`` before the first update and, from 5.2x, after ``reset``) or
  ``cache.key_cache[i]`` (up to 4.53; 4.54-4.55 still offer it as a wrapper whose
  items may be ``None``; gone in 4.56);
* ``Cache.update(k, v, layer, cache_kwargs)`` up to 5.0, where static layers place rows by
  ``cache_kwargs["cache_position"]``, vs ``update(k, v, layer)`` later (:func:`update_takes_cache_kwargs`);
* ``get_mask_sizes`` (:func:`mask_sizes`): takes the query's ``cache_position``
  tensor (4.53-5.0, where it is a layer method from 4.54) or the query length as an
  int (5.x later), and may return tensors;
* the model's cache keyword (:attr:`HFInfo.cache_kwarg`): ``cache`` or
  ``past_key_values``, and whether ``forward`` takes ``cache_position``.

Anything a shim cannot drive raises :class:`HFIncompatible`, naming the release
and the API; the probes (:func:`impl.hf.caches.probe`,
:func:`impl.hf.models.probe`, :func:`impl.hf.families.probe`) call them once.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional

from impl.errors import Unavailable


class HFUnavailable(Unavailable):
    """transformers (or the API a target needs) is not installed; the message says which."""


class HFIncompatible(HFUnavailable):
    """The installed transformers lacks, or changed, an API an adapter needs (a harness fault, not a
    finding): ``release`` is transformers' version, ``api`` the API, ``detail`` what happened."""

    def __init__(self, release: str, api: str, detail: str):
        self.release, self.api, self.detail = release, api, detail
        super().__init__(f"transformers {release}: {api}: {detail} (the adapter in impl/hf/ needs to learn "
                         f"this release's API; run scripts/hf_matrix.sh --releases {release})")


@dataclass(frozen=True)
class HFInfo:
    transformers: str
    torch: str
    api: str  # "layers" or "legacy"
    #: Model ``forward`` takes the cache as ``cache=`` (5.x) rather than ``past_key_values=``.
    cache_kwarg: str
    #: Model ``forward`` accepts an explicit ``cache_position`` (4.x); 5.x derives positions from the cache.
    takes_cache_position: bool

    def versions(self) -> dict[str, str]:
        return {"transformers": self.transformers, "torch": self.torch, "hf_cache_api": self.api}


def import_transformers() -> Any:
    try:
        import transformers  # noqa: F401
    except ModuleNotFoundError as e:
        raise HFUnavailable("transformers is not installed") from e
    return transformers


@lru_cache(maxsize=1)
def info() -> HFInfo:
    """Detect the installed transformers and its cache API (raises :class:`HFUnavailable`)."""
    tf = import_transformers()
    import torch
    from transformers import cache_utils as cu
    from transformers.models.mistral import modeling_mistral as mm

    if hasattr(cu, "DynamicSlidingWindowLayer") and hasattr(cu, "StaticSlidingWindowLayer"):
        api = "layers"
    elif hasattr(cu, "HybridCache") and hasattr(cu, "DynamicCache"):
        api = "legacy"
    else:
        raise HFIncompatible(tf.__version__, "cache_utils",
                             "no known sliding-window cache API (neither DynamicSlidingWindowLayer/"
                             "StaticSlidingWindowLayer nor HybridCache)")
    params = inspect.signature(mm.MistralForCausalLM.forward).parameters
    cache_kwarg = "cache" if "cache" in params else "past_key_values"
    return HFInfo(tf.__version__, torch.__version__, api, cache_kwarg, "cache_position" in params)


def incompatible(api: str, detail: str) -> HFIncompatible:
    return HFIncompatible(info().transformers, api, detail)


# ---------------------------------------------------------------------------
# constructors


def _init_params(cls: type) -> list[list[str]]:
    """Named ``__init__`` parameters of ``cls`` and of each base it forwards ``**kwargs`` to, nearest first."""
    out = []
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        ps = inspect.signature(init).parameters
        out.append([n for n, p in ps.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)])
        if not any(p.kind == p.VAR_KEYWORD for p in ps.values()):
            break
    return out


def _batch_keyword(cls: type) -> Optional[str]:
    """The batch keyword ``cls`` (or the base its ``**kwargs`` reach) names; ``batch_size`` first:
    4.45 deprecates ``max_batch_size`` in its favour, 4.51 the other way round."""
    for names in _init_params(cls):
        for kw in ("batch_size", "max_batch_size"):
            if kw in names:
                return kw
    return None


def dynamic_cache(config: Any = None) -> Any:
    """A ``DynamicCache``: built from ``config`` (its sliding layers) where the constructor takes one."""
    from transformers import cache_utils as cu

    if config is not None and "config" in inspect.signature(cu.DynamicCache.__init__).parameters:
        return cu.DynamicCache(config=config)
    return cu.DynamicCache()


def static_sliding_cache(config: Any, max_cache_len: int, dtype: Any, batch: int = 1) -> Any:
    """A whole-model static cache whose sliding layers have ``min(W, max_cache_len)`` slots:
    ``StaticCache(config=..., max_cache_len=...)`` on the ``layers`` API, else ``HybridCache`` with
    the batch, device and dtype keywords its constructor (or the base it forwards to) names."""
    from transformers import cache_utils as cu

    if info().api == "layers" or not hasattr(cu, "HybridCache"):
        return cu.StaticCache(config=config, max_cache_len=max_cache_len)
    cls = cu.HybridCache
    kw: dict[str, Any] = {"max_cache_len": max_cache_len}
    batch_kw = _batch_keyword(cls)
    names = {n for ns in _init_params(cls) for n in ns}
    if batch_kw is not None:
        kw[batch_kw] = batch
    if "device" in names:
        kw["device"] = "cpu"
    if "dtype" in names:
        kw["dtype"] = dtype
    try:
        return cls(config, **kw)
    except TypeError as e:
        raise incompatible(f"HybridCache(config, {', '.join(kw)})", str(e)) from e


# ---------------------------------------------------------------------------
# reading a cache


def cache_layers(cache: Any) -> Optional[list]:
    """``cache.layers`` where the cache is a list of layer objects (4.54+), else ``None``."""
    layers = getattr(cache, "layers", None)
    if isinstance(layers, list) and (not layers or hasattr(layers[0], "keys")):
        return layers
    return None


def layer_kv(cache: Any, index: int) -> Optional[tuple[Any, Any]]:
    """Layer ``index``'s stored ``(keys, values)`` tensors, or ``None`` where it holds nothing yet
    (no such layer, tensors ``None``, or not initialized)."""
    layers = cache_layers(cache)
    if layers is not None:
        if index >= len(layers):
            return None
        layer = layers[index]
        if getattr(layer, "is_initialized", True) is False or layer.keys is None:
            return None
        return layer.keys, layer.values
    kc = getattr(cache, "key_cache", None)
    if kc is None:
        raise incompatible(f"{type(cache).__name__}.key_cache / .layers",
                           "the cache has neither per-layer objects nor key_cache lists")
    if index >= len(kc) or kc[index] is None:
        return None
    return kc[index], cache.value_cache[index]


def update_takes_cache_kwargs(cache: Any) -> bool:
    """Does ``cache.update`` take a ``cache_kwargs`` dict (``cache_position``, ``sliding_window``)?
    Up to 5.0 it does, and static layers place rows by ``cache_position``; later it takes ``*args``."""
    return "cache_kwargs" in inspect.signature(cache.update).parameters


def mask_sizes(layer: Any, n: int, k: int) -> Optional[tuple[int, int]]:
    """``(length, offset)`` from ``layer.get_mask_sizes`` for a query of ``k`` tokens at positions
    ``n .. n+k-1``, or ``None`` where the layer has no such method. The argument is the query length
    (an int) or its ``cache_position`` (a tensor), whichever the method's parameter names."""
    fn = getattr(layer, "get_mask_sizes", None)
    if fn is None:
        return None
    params = [p for p in inspect.signature(fn).parameters if p != "self"]
    if not params:
        raise incompatible(f"{type(layer).__name__}.get_mask_sizes", "takes no argument")
    if params[0] == "query_length":
        arg: Any = k
    elif params[0] == "cache_position":
        import torch

        arg = torch.arange(n, n + k)
    else:
        raise incompatible(f"{type(layer).__name__}.get_mask_sizes({params[0]})",
                           "neither a query length nor a cache_position")
    length, offset = fn(arg)
    return int(length), int(offset)
