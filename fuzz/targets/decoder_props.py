"""Decoder properties: the ring-buffer cached path of :mod:`impl.decoder` held to the spec.

For random small configs (GQA and MQA, sliding and global layers), token
streams up to ``4W + 3`` long and random chunk schedules:

1. after every chunk, each layer's cache equals ``pyspec.last_window`` over
   that layer's K/V from the full forward — positions exactly, K/V within
   :data:`TOLERANCES` (``kv``);
2. the logits of every token equal the full forward's row (``logits``);
3. greedy decoding with the cache yields the same tokens as greedy decoding by
   full recompute (a step where the reference's top two logits are within the
   logit tolerance is a genuine tie and is not a failure).

The checkers return ``None`` or a one-line difference; :func:`check_chunks`
is shared with the campaign target ``decoder`` (``fuzz.targets.decoder``).
``run_parity_property``/``run_greedy_property`` run them under Hypothesis for
any ``model_cls``/``cache_cls`` pair, which is how the negative controls in
``impl.mutants.decoder_mutants`` are shown to fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import pyspec
from impl.decoder import Decoder, DecoderConfig, FullOutput, RingKVCache, torch_threads


@dataclass(frozen=True)
class Tolerance:
    logits: float
    kv: float


#: Absolute tolerances of cached path vs full forward, per dtype.
#: The two paths run the same operations on the same weights; only matrix shapes
#: (a chunk vs the whole sequence) and hence BLAS reduction orders differ, and
#: masked keys contribute exact zeros. Observed differences are ~1e-15 in
#: float64 and ~2e-6 in float32 (eps 1.2e-7 times a few layers of O(1)
#: activations). 1e-10 / 1e-4 leave orders of magnitude of margin, while every
#: real bug (wrong position, wrong mask edge, stale entry) moves logits by
#: 1e-3 .. 1 — far above both.
TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float64: Tolerance(logits=1e-10, kv=1e-10),
    torch.float32: Tolerance(logits=1e-4, kv=1e-4),
}


def tolerance(dtype: torch.dtype) -> Tolerance:
    return TOLERANCES[dtype]


def _maxdiff(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        return float("inf")
    if a.numel() == 0:
        return 0.0
    return float((a.to(torch.float64) - b.to(torch.float64)).abs().max())


def _exceeds(diff: float, tol: float) -> bool:
    return not diff <= tol  # NaN counts as a difference


def expected_positions(window: int | None, n: int) -> list[int]:
    """``pyspec.last_window(W, positions 0..n-1)``; a global layer keeps everything."""
    return pyspec.last_window(n if window is None else window, list(range(n)))


def check_cache(cache: RingKVCache, full: FullOutput, n: int) -> str | None:
    """Property 1 after ``n`` tokens: positions exact, K/V of each layer within ``kv`` tolerance."""
    tol = tolerance(cache.dtype).kv
    for layer, snap in enumerate(cache.snapshot()):
        want = expected_positions(snap.window, n)
        if snap.positions != want:
            return f"layer {layer} (window {snap.window}): cache positions {snap.positions} != spec lastWindow {want}"
        idx = torch.tensor(want, dtype=torch.int64, device=full.keys[layer].device)
        for label, got, ref in (("K", snap.k, full.keys[layer]), ("V", snap.v, full.values[layer])):
            d = _maxdiff(got.to(ref.device), ref[idx])
            if _exceeds(d, tol):
                return f"layer {layer} (window {snap.window}): cached {label} differs from full forward by {d:.3e} > {tol:g}"
    return None


def check_logits(logits: torch.Tensor, full: FullOutput, start: int, end: int) -> str | None:
    """Property 2: the logits of positions ``start..end-1`` equal the full forward's rows."""
    tol = tolerance(logits.dtype).logits
    ref = full.logits[start:end]
    if logits.shape != ref.shape:
        return f"logits of positions {start}..{end - 1}: shape {tuple(logits.shape)} != {tuple(ref.shape)}"
    d = _maxdiff(logits, ref.to(logits.device))
    if _exceeds(d, tol):
        row = int((logits.to(ref.device) - ref).abs().amax(dim=-1).nan_to_num(float("inf")).argmax())
        return f"logits of position {start + row} differ from full forward by {d:.3e} > {tol:g}"
    return None


def check_chunks(model: Decoder, tokens: Sequence[int], schedule: Sequence[int], *,
                 cache: RingKVCache | None = None, full: FullOutput | None = None) -> str | None:
    """Feed ``tokens`` to a fresh cache (or ``cache``) in chunks of ``schedule``; after every
    chunk check properties 1 and 2. ``None`` when all hold, else the first difference."""
    cache = cache if cache is not None else model.new_cache()
    if full is None:
        full = model.full_forward(list(tokens), cache.windows)
    n = 0
    for k in schedule:
        if k == 0:
            continue
        logits = model.forward_cached(cache, list(tokens[n:n + k]))
        start, n = n, n + k
        diff = check_logits(logits, full, start, n) or check_cache(cache, full, n)
        if diff is not None:
            return f"after chunk {start}..{n - 1} (schedule {list(schedule)}): {diff}"
    return None


def check_greedy(model: Decoder, prompt: Sequence[int], new_tokens: int, chunk: int | None = None,
                 cache: RingKVCache | None = None) -> str | None:
    """Property 3: greedy tokens with the cache equal greedy tokens by full recompute."""
    cache = cache if cache is not None else model.new_cache()
    got = model.generate(cache, list(prompt), new_tokens, chunk)
    want = model.generate_full(list(prompt), new_tokens, cache.windows)
    if got == want:
        return None
    i = next(j for j, (a, b) in enumerate(zip(got, want)) if a != b)
    ref = model.full_forward(list(prompt) + want[:i], cache.windows).logits[-1]
    top2 = torch.topk(ref, 2).values
    gap = float(top2[0] - top2[1])
    if gap <= 2 * tolerance(model.dtype).logits:
        return None  # a genuine tie: either token is a correct greedy choice
    return f"greedy step {i}: cached decoding chose {got[i]}, full recompute {want[i]} (gap {gap:.3e}); got {got} want {want}"


# ---------------------------------------------------------------------------
# Strategies


@st.composite
def configs(draw, dtypes: Sequence[str] = ("float64", "float32"), window_max: int = 8,
            need: str | None = None) -> DecoderConfig:
    """A small random config: d_model <= 32, layers <= 3, MHA/GQA/MQA, sliding and global layers.

    ``need="sliding-layer-0"`` forces layer 0 to slide, ``need="global-layer"`` forces
    one global layer (what some negative controls need to be observable).
    """
    kv = draw(st.sampled_from((1, 1, 2)))
    heads = kv * draw(st.integers(1, 3))
    layers = draw(st.integers(1, 3))
    windows = draw(st.lists(st.one_of(st.integers(1, window_max), st.integers(1, window_max), st.none()),
                            min_size=layers, max_size=layers))
    if need == "sliding-layer-0" and windows[0] is None:
        windows[0] = draw(st.integers(1, window_max))
    if need == "global-layer" and None not in windows:
        windows[draw(st.integers(0, layers - 1))] = None
    return DecoderConfig(
        vocab=draw(st.integers(2, 40)),
        d_model=draw(st.sampled_from((8, 16, 24, 32))),
        layers=layers,
        n_heads=heads,
        n_kv_heads=kv,
        head_dim=draw(st.sampled_from((2, 4, 8))),
        window=tuple(windows),
        rope_theta=draw(st.sampled_from((10000.0, 100.0, 1e6))),
        attn_softcap=draw(st.sampled_from((None, None, 20.0))),
        dtype=draw(st.sampled_from(tuple(dtypes))),
        seed=draw(st.integers(0, 2**16)),
    )


def stream_window(config: DecoderConfig) -> int:
    """The ``W`` streams are sized by: the widest sliding window (8 when all layers are global)."""
    ws = [w for w in config.windows if w is not None]
    return max(ws) if ws else 8


@st.composite
def schedules(draw, total: int, window: int) -> list[int]:
    """Chunk sizes summing to ``total``, biased to 1, W-1, W, W+1 and 2W+3."""
    out: list[int] = []
    left = total
    edges = sorted({1, max(window - 1, 1), window, window + 1, 2 * window + 3})
    while left > 0:
        k = draw(st.one_of(st.sampled_from(edges), st.integers(1, max(1, left))))
        k = min(k, left)
        out.append(k)
        left -= k
    return out


@st.composite
def token_streams(draw, config: DecoderConfig) -> tuple[list[int], list[int]]:
    """``(tokens, schedule)`` with up to ``4W + 3`` tokens."""
    w = stream_window(config)
    n = draw(st.one_of(st.sampled_from((w, w + 1, 2 * w, 4 * w + 3)), st.integers(1, 4 * w + 3)))
    tokens = draw(st.lists(st.integers(0, config.vocab - 1), min_size=n, max_size=n))
    return tokens, draw(schedules(n, w))


def build(model_cls: type, cache_cls: type, config: DecoderConfig) -> Decoder:
    model = model_cls(config)
    if cache_cls is not model_cls.cache_cls:
        model.cache_cls = cache_cls
    return model


def _settings(max_examples: int, shrink: bool) -> settings:
    phases = [Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(max_examples=max_examples, deadline=None, phases=phases, database=None,
                    suppress_health_check=list(HealthCheck), print_blob=False)


def run_parity_property(max_examples: int = 60, *, model_cls: type = Decoder,
                        cache_cls: type = RingKVCache, backend: str = "torch",
                        config_strategy: Any = None, shrink: bool = True, **cache_kw: Any) -> None:
    """Properties 1 and 2 under Hypothesis; raises ``AssertionError`` on the first failure."""
    cfgs = config_strategy if config_strategy is not None else configs()

    @_settings(max_examples, shrink)
    @given(st.data())
    def prop(data: Any) -> None:
        config = data.draw(cfgs, label="config")
        tokens, schedule = data.draw(token_streams(config), label="stream")
        model = build(model_cls, cache_cls, config)
        diff = check_chunks(model, tokens, schedule, cache=model.new_cache(backend=backend, **cache_kw))
        assert diff is None, diff

    with torch_threads(1):
        prop()


def run_greedy_property(max_examples: int = 30, *, model_cls: type = Decoder,
                        cache_cls: type = RingKVCache, config_strategy: Any = None,
                        shrink: bool = True) -> None:
    """Property 3 under Hypothesis; raises ``AssertionError`` on the first failure."""
    cfgs = config_strategy if config_strategy is not None else configs()

    @_settings(max_examples, shrink)
    @given(st.data())
    def prop(data: Any) -> None:
        config = data.draw(cfgs, label="config")
        w = stream_window(config)
        prompt = data.draw(st.lists(st.integers(0, config.vocab - 1), min_size=1, max_size=2 * w + 3), label="prompt")
        new_tokens = data.draw(st.integers(1, 2 * w + 3), label="new tokens")
        chunk = data.draw(st.one_of(st.none(), st.integers(1, w + 2)), label="chunk")
        model = build(model_cls, cache_cls, config)
        diff = check_greedy(model, prompt, new_tokens, chunk)
        assert diff is None, diff

    with torch_threads(1):
        prop()
