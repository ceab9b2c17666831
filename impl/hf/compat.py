"""Which transformers is installed, and which of its cache APIs the adapters must drive.

The cache API changed shape several times; the adapters detect it by feature
(what ``transformers.cache_utils`` exports), not by a version table, and report
the version for campaign reports:

* ``"layers"`` — per-layer cache objects (``DynamicSlidingWindowLayer`` and
  ``StaticSlidingWindowLayer`` inside ``DynamicCache``/``StaticCache``, built
  from a config's ``layer_types``). Pinned against transformers 5.24.0.
* ``"legacy"`` — whole-model cache classes: ``DynamicCache`` (no eviction; the
  window is applied by the attention mask only), ``SlidingWindowCache`` and
  ``HybridCache`` (static buffers of ``min(W, max_cache_len)`` slots, updated
  through ``cache_kwargs={"cache_position": ..., "sliding_window": ...}``).
  Pinned against transformers 4.45.2.

Tested releases: 4.45.2 and 5.24.0 (see ``scripts/ci_hf_older.sh``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from impl.errors import Unavailable


class HFUnavailable(Unavailable):
    """transformers (or the API a target needs) is not installed; the message says which."""


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
        raise HFUnavailable(
            f"transformers {tf.__version__}: no known sliding-window cache API "
            "(neither DynamicSlidingWindowLayer/StaticSlidingWindowLayer nor HybridCache)")
    params = inspect.signature(mm.MistralForCausalLM.forward).parameters
    cache_kwarg = "cache" if "cache" in params else "past_key_values"
    return HFInfo(tf.__version__, torch.__version__, api, cache_kwarg, "cache_position" in params)
