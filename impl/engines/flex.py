"""torch FlexAttention (``flex:eager``, ``flex:compiled``, ``flex:dynamic``): ``flex_attention`` with a block
mask from ``create_block_mask`` and the sliding-window ``mask_mod`` users write.

The window convention (DESIGN §6): FlexAttention has no converter; the mask users write (PyTorch's FlexAttention
blog and ``attention-gym``'s ``generate_sliding_window``) is causal and ``q_idx - kv_idx < W`` — here with the
query's absolute position (``q_idx + offset``: the queries of a decode or chunked-prefill step against a cache
of ``kv_len`` keys) — and :func:`mask_mod` writes exactly that, ``W`` a Python int captured by the closure as
users capture it.

One call per sequence (a document-packed call indexes captured id tensors inside ``mask_mod``, which torch
2.13's Inductor fails to lower with or without a window — ``unbacked_bindings`` — so packing would hide what is
tested here). Modes: ``eager`` (``flex_attention`` itself), ``compiled`` (``torch.compile(flex_attention)``, static
shapes: lengths padded to multiples of :data:`PAD` so a campaign compiles few shapes), ``dynamic``
(``torch.compile(..., dynamic=True)``).
"""

from __future__ import annotations

from functools import lru_cache

from impl.engines import EngineIncompatible, EngineUnavailable, installed

MODES = ("eager", "compiled", "dynamic")
#: Static-shape mode: query and key totals are padded to multiples of this (padded rows belong to no doc).
PAD = 64
BLOCK_SIZES = (16, 32, 64, 128)


def release() -> str:
    rel = installed("torch", "flex")
    try:
        from torch.nn.attention import flex_attention as _  # noqa: F401
    except ImportError as e:
        raise EngineUnavailable(f"torch {rel} has no torch.nn.attention.flex_attention ({e})") from e
    return rel


@lru_cache(maxsize=None)
def function(mode: str):
    from torch.nn.attention.flex_attention import flex_attention

    if mode == "eager":
        return flex_attention
    import torch

    if mode == "compiled":
        return torch.compile(flex_attention, dynamic=False)
    if mode == "dynamic":
        return torch.compile(flex_attention, dynamic=True)
    raise EngineIncompatible("torch", release(), f"flex mode {mode!r}", f"known: {', '.join(MODES)}")


def mask_mod(window: int, offset, kv_valid):
    """Causal and the user's sliding window ``q - kv < W``, the query's position ``q_idx + offset`` (a decode or
    chunked-prefill step against a cache); keys from ``kv_valid`` on are padding. ``offset`` and ``kv_valid`` are
    0-d tensors (compiled once per shape, not once per value); ``W`` a Python int, as users write it."""
    w = int(window)

    def mod(b, h, q_idx, kv_idx):
        qp = q_idx + offset
        return (qp >= kv_idx) & (qp - kv_idx < w) & (kv_idx < kv_valid)

    return mod


def causal_mod(offset, kv_valid):
    """The same mask without the window (a compile failure only with the window is the window's)."""

    def mod(b, h, q_idx, kv_idx):
        return (q_idx + offset >= kv_idx) & (kv_idx < kv_valid)

    return mod


def softcap_mod(cap: float):
    import torch

    def mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)

    return mod


def attend(mode: str, q, k, v, mod, block: int, score_mod=None, scale=None):
    """``q [1, H, Lq, D]``, ``k, v [1, Hkv, Lk, D]`` (GQA when ``H > Hkv``) under ``mod``'s block mask."""
    from torch.nn.attention.flex_attention import create_block_mask

    bm = create_block_mask(mod, 1, 1, q.shape[2], k.shape[2], device="cpu", BLOCK_SIZE=block)
    call = lambda: function(mode)(q, k, v, score_mod=score_mod, block_mask=bm, scale=scale,  # noqa: E731
                                  enable_gqa=q.shape[1] != k.shape[1])
    if mode == "eager":
        return call()
    import torch._dynamo

    # Each window, block size, score_mod and (static) shape is a recompile; past dynamo's limit (8) it would run
    # flex_attention eagerly without a word, and the compiled target would test eager code. Raise instead.
    with torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT, accumulated_recompile_limit=4 * RECOMPILE_LIMIT,
                                    fail_on_recompile_limit_hit=True):
        return call()


#: Recompiles allowed per process before a compiled target stops (a compile costs 10-120 s on a CPU).
RECOMPILE_LIMIT = 64


def recompile_limit_hit(error: BaseException) -> bool:
    """Did dynamo refuse to compile again (the limit), rather than fail to compile?"""
    e = error
    while e is not None:
        if "recompile_limit" in str(e) or "RecompileLimit" in type(e).__name__ or "CacheLimit" in type(e).__name__:
            return True
        e = e.__cause__ or e.__context__
    return False
