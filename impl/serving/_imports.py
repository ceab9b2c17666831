"""Importing the engines' block managers on a CPU machine: feature detection and one bridge.

Each ``import_*`` returns a namespace of the engine objects an adapter drives, or raises
:class:`~impl.engines.EngineUnavailable` (the package is not installed: build ``.venv-serving``
with ``scripts/install_serving_cores.sh``) or :class:`~impl.engines.EngineIncompatible` naming the
release and the API that is missing or changed. Features are detected (the names and the
parameters the adapters pass), never chosen by comparing version numbers.

The bridge: transformers and ``sglang.srt.configs`` import ``torchvision``. The only torchvision
wheel the registry has for torch 2.13.0 is built against CUDA torch, so its C operators
(``torchvision._C``) do not load against the CPU torch; torchvision's Python code copes with that
(``torchvision.extension._has_ops()`` is False and every operator registration checks it) except
two unguarded ``torch.library.register_fake("torchvision::nms" / "::qnms")`` calls in
``torchvision/_meta_registrations.py``, which raise "operator torchvision::nms does not exist".
:func:`_bridge_torchvision` defines those two operator *schemas* (no kernel) before torchvision is
imported, only when its C operators did not load, so the import succeeds; nothing in the block
managers calls them (a call would raise "no kernel registered", never compute something wrong).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from importlib import metadata
from types import SimpleNamespace

from impl.engines import EngineIncompatible, EngineUnavailable
from impl.serving._base import TOKEN_ID_BITS

_NMS_SCHEMA = "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"
_bridged = False


def _bridge_torchvision() -> None:
    """Define ``torchvision::nms`` / ``::qnms`` schemas when torchvision's C ops cannot load (see above)."""
    global _bridged
    if _bridged or "torchvision" in sys.modules:
        return
    _bridged = True
    try:
        import torch
    except ImportError:
        return
    try:
        metadata.version("torchvision")
    except metadata.PackageNotFoundError:
        return
    for op in ("nms", "qnms"):
        try:
            torch._C._dispatch_find_schema_or_throw(f"torchvision::{op}", "")
        except RuntimeError:
            torch.library.define(f"torchvision::{op}", _NMS_SCHEMA)


def _release(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        raise EngineUnavailable(f"{dist} is not installed here: build .venv-serving with "
                                "scripts/install_serving_cores.sh and run under .venv-serving/bin/python") from None


def _need(engine: str, release: str, module: str, names: tuple[str, ...]) -> list:
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise EngineIncompatible(engine, release, module, f"cannot be imported ({e})") from e
    out = []
    for n in names:
        if not hasattr(mod, n):
            raise EngineIncompatible(engine, release, f"{module}.{n}", "is missing")
        out.append(getattr(mod, n))
    return out


def _params(engine: str, release: str, func, api: str, wanted: tuple[str, ...]) -> None:
    """``func`` must take every parameter in ``wanted`` (the adapters pass them by name)."""
    have = set(inspect.signature(func).parameters)
    missing = [p for p in wanted if p not in have]
    if missing:
        raise EngineIncompatible(engine, release, api, f"has no parameter {', '.join(missing)} "
                                 f"(it takes {', '.join(sorted(have - {'self'}))})")


_VLLM: SimpleNamespace | None = None
_SGLANG: SimpleNamespace | None = None


def import_vllm() -> SimpleNamespace:
    """vLLM's KV-cache manager, block pool, specs, request and block hasher."""
    global _VLLM
    if _VLLM is not None:
        return _VLLM
    rel = _release("vllm")
    _bridge_torchvision()
    (KVCacheManager,) = _need("vllm", rel, "vllm.v1.core.kv_cache_manager", ("KVCacheManager",))
    SlidingWindowSpec, FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec = _need(
        "vllm", rel, "vllm.v1.kv_cache_interface",
        ("SlidingWindowSpec", "FullAttentionSpec", "KVCacheConfig", "KVCacheGroupSpec"))
    get_request_block_hasher, init_none_hash = _need(
        "vllm", rel, "vllm.v1.core.kv_cache_utils", ("get_request_block_hasher", "init_none_hash"))
    (get_hash_fn_by_name,) = _need("vllm", rel, "vllm.utils.hashing", ("get_hash_fn_by_name",))
    Request, RequestStatus = _need("vllm", rel, "vllm.v1.request", ("Request", "RequestStatus"))
    (SamplingParams,) = _need("vllm", rel, "vllm.sampling_params", ("SamplingParams",))
    (SlidingWindowManager, FullAttentionManager) = _need(
        "vllm", rel, "vllm.v1.core.single_type_kv_cache_manager", ("SlidingWindowManager", "FullAttentionManager"))
    _params("vllm", rel, KVCacheManager.__init__, "KVCacheManager(...)",
            ("kv_cache_config", "max_model_len", "scheduler_block_size", "hash_block_size", "enable_caching"))
    _params("vllm", rel, KVCacheManager.allocate_slots, "KVCacheManager.allocate_slots",
            ("request", "num_new_tokens", "num_new_computed_tokens", "new_computed_blocks"))
    _params("vllm", rel, KVCacheManager.get_computed_blocks, "KVCacheManager.get_computed_blocks", ("request",))
    _params("vllm", rel, KVCacheManager.remove_skipped_blocks, "KVCacheManager.remove_skipped_blocks",
            ("request_id", "processed_computed_tokens"))
    _params("vllm", rel, Request.__init__, "Request(...)",
            ("request_id", "prompt_token_ids", "sampling_params", "pooling_params", "cache_salt", "block_hasher"))
    for attr in ("get_block_ids", "free", "block_pool"):
        if attr != "block_pool" and not hasattr(KVCacheManager, attr):
            raise EngineIncompatible("vllm", rel, f"KVCacheManager.{attr}", "is missing")
    # The adapter's token ids are interned payloads below 2**31 (impl/serving/_base.py TokenIds): 0.34.0 keeps them
    # in an int32 TokenBuffer (vllm/v1/token_buffer.py). A release that held fewer bits would lose ids silently
    # or refuse them at the first step: say so here, naming the release.
    top = (1 << TOKEN_ID_BITS) - 1
    try:
        probe = Request("kvwindow-probe", [top], SamplingParams(max_tokens=1), None, cache_salt=None, block_hasher=None)
        kept = list(probe.all_token_ids)
    except (OverflowError, ValueError, TypeError) as e:
        raise EngineIncompatible("vllm", rel, "Request(prompt_token_ids)",
                                 f"refuses token id {top} ({type(e).__name__}: {e}); the adapter's ids are interned "
                                 f"payloads of up to {TOKEN_ID_BITS} bits") from e
    if kept != [top]:
        raise EngineIncompatible("vllm", rel, "Request(prompt_token_ids)",
                                 f"token id {top} came back as {kept}: it holds fewer than {TOKEN_ID_BITS} bits")
    _VLLM = SimpleNamespace(release=rel, KVCacheManager=KVCacheManager, SlidingWindowSpec=SlidingWindowSpec,
                            FullAttentionSpec=FullAttentionSpec, KVCacheConfig=KVCacheConfig,
                            KVCacheGroupSpec=KVCacheGroupSpec, get_request_block_hasher=get_request_block_hasher,
                            init_none_hash=init_none_hash, get_hash_fn_by_name=get_hash_fn_by_name,
                            Request=Request, RequestStatus=RequestStatus, SamplingParams=SamplingParams,
                            SlidingWindowManager=SlidingWindowManager, FullAttentionManager=FullAttentionManager)
    return _VLLM


def import_sglang() -> SimpleNamespace:
    """SGLang's SWA allocator, SWA KV pool and the SWA radix cache."""
    global _SGLANG
    if _SGLANG is not None:
        return _SGLANG
    rel = _release("sglang")
    _bridge_torchvision()
    (SWATokenToKVPoolAllocator,) = _need("sglang", rel, "sglang.srt.mem_cache.allocator.swa",
                                         ("SWATokenToKVPoolAllocator",))
    (SWAKVPool,) = _need("sglang", rel, "sglang.srt.mem_cache.swa_memory_pool", ("SWAKVPool",))
    (ReqToTokenPool,) = _need("sglang", rel, "sglang.srt.mem_cache.memory_pool", ("ReqToTokenPool",))
    (ReqKvInfo,) = _need("sglang", rel, "sglang.srt.managers.schedule_batch", ("ReqKvInfo",))
    free_swa_out_of_window_slots, free_kv_row_segments = _need(
        "sglang", rel, "sglang.srt.mem_cache.common", ("free_swa_out_of_window_slots", "free_kv_row_segments"))
    (get_num_new_pages,) = _need("sglang", rel, "sglang.srt.utils.common", ("get_num_new_pages",))
    (ComponentType,) = _need("sglang", rel, "sglang.srt.mem_cache.unified_cache.component_type", ("ComponentType",))
    for name in ("alloc", "alloc_extend", "alloc_decode", "new_pages_available", "translate_loc_from_full_to_swa",
                 "full_available_size", "swa_available_size"):
        if not hasattr(SWATokenToKVPoolAllocator, name):
            raise EngineIncompatible("sglang", rel, f"SWATokenToKVPoolAllocator.{name}", "is missing")
    _params("sglang", rel, free_swa_out_of_window_slots, "free_swa_out_of_window_slots",
            ("req", "pre_len", "sliding_window_size", "page_size", "req_to_token_pool", "token_to_kv_pool_allocator",
             "supports_prefix_sharing"))
    _params("sglang", rel, SWAKVPool.__init__, "SWAKVPool(...)",
            ("size", "size_swa", "page_size", "dtype", "head_num", "head_dim", "swa_attention_layer_ids",
             "full_attention_layer_ids", "device"))
    if not hasattr(ComponentType, "SWA"):
        raise EngineIncompatible("sglang", rel, "ComponentType.SWA", "is missing")
    _SGLANG = SimpleNamespace(release=rel, SWATokenToKVPoolAllocator=SWATokenToKVPoolAllocator, SWAKVPool=SWAKVPool,
                              ReqToTokenPool=ReqToTokenPool, ReqKvInfo=ReqKvInfo,
                              free_swa_out_of_window_slots=free_swa_out_of_window_slots,
                              free_kv_row_segments=free_kv_row_segments, get_num_new_pages=get_num_new_pages,
                              SWA=ComponentType.SWA)
    return _SGLANG
