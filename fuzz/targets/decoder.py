"""Campaign target ``decoder``: the Torch sliding-window decoder driven by the op language.

``Push`` decodes one token, ``Chunk(n)`` prefills/decodes ``n`` tokens at once
(``n = 0`` is a no-op), ``Reset(w)`` starts a new cache with window ``w`` over
the same weights (the window is a mask/cache parameter, not a weight). Token
ids are a pure function of ``(stream epoch, position)``, like
``fuzz.ops.payload``, so a seed replays identically.

After every op: each sliding layer's cache positions equal the oracle's
``lastWindow W positions`` (``SpecStream``), the global layer holds every
position, every cached K/V equals the full forward's row at that position, and
the new tokens' logits equal the full forward's rows (``fuzz.targets.decoder_props``
tolerances). The model is a fixed small float64 config with one sliding layer
(the case's window) and one global layer, so a case takes milliseconds.

``make_decoder(mutant=NAME)`` wraps a negative control from
``impl.mutants.decoder_mutants`` instead; ``DecoderTarget(model_cls=..., cache_cls=...)``
takes any pair.
"""

from __future__ import annotations

from typing import Any

import torch

from fuzz.targets.decoder_props import check_cache, check_logits, tolerance
from impl.decoder import torch_threads
from fuzz.ops import Case, Op, Reset
from fuzz.oracle import SpecStream
from fuzz.targets.base import Mismatch, RunStats, Target
from fuzz.targets.progress import OP
from impl.decoder import Decoder, DecoderConfig, RingKVCache

#: The target's model: 2 layers (layer 0 slides with the case's window, layer 1 is
#: global), GQA 4 query heads over 2 KV heads, float64 so the 1e-10 tolerance applies.
TARGET_CONFIG = DecoderConfig(vocab=32, d_model=16, layers=2, n_heads=4, n_kv_heads=2, head_dim=4,
                              window=(8, None), dtype="float64", seed=5)


def token_of(epoch: int, pos: int, vocab: int) -> int:
    """The token id at ``pos`` in stream ``epoch`` (deterministic, well mixed, in ``[0, vocab)``)."""
    x = (pos * 2654435761 + epoch * 40503 + 12345) & 0xFFFFFFFF
    x ^= x >> 13
    x = (x * 0x5BD1E995) & 0xFFFFFFFF
    return (x ^ (x >> 15)) % vocab


class DecoderTarget(Target):
    name = "decoder"
    kind = "model"
    window_max = 16
    max_tokens = 64
    publishes_ops = True

    def __init__(self, model_cls: type = Decoder, cache_cls: type = RingKVCache, *,
                 name: str = "decoder", config: DecoderConfig = TARGET_CONFIG, backend: str = "torch"):
        self.name, self.backend = name, backend
        self.model = model_cls(config)
        self.model.cache_cls = cache_cls

    def versions(self) -> dict[str, str]:
        return {"torch": torch.__version__}

    def tolerances(self) -> dict[str, dict[str, float]]:
        """Absolute tolerances of the cached path against the full forward (decoder_props.TOLERANCES)."""
        tol = tolerance(self.model.dtype)
        return {"logits": {"atol": tol.logits}, "kv": {"atol": tol.kv}}

    def _new_cache(self, window: int) -> RingKVCache:
        return self.model.new_cache(window, backend=self.backend)

    def run(self, case: Case) -> RunStats:
        with torch_threads(1):  # tiny matrices: extra intra-op threads only spin
            return self._run(case)

    def _run(self, case: Case) -> RunStats:
        window, ops = case.window, case.ops
        model = self.model
        vocab = model.config.vocab
        spec = SpecStream(window)
        stats = RunStats()
        lengths = [sum(op.tokens for _, op in seg) for _, seg in case.streams()]  # per stream epoch
        cache = self._new_cache(window)

        def reference(epoch: int) -> Any:
            n = lengths[epoch]
            if n == 0:
                return None
            return model.full_forward([token_of(epoch, p, vocab) for p in range(n)], cache.windows)

        full = reference(0)
        self._check(cache, spec, full, None, -1, None)
        slot = self.op_slot
        for i, op in enumerate(ops):
            if slot is not None:
                slot[OP] = i
            start = spec.n
            logits = None
            if isinstance(op, Reset):
                cache = self._new_cache(op.window)
            else:
                k = op.tokens
                if k:
                    logits = model.forward_cached(cache, [token_of(spec.epoch, p, vocab)
                                                          for p in range(start, start + k)])
                    stats.tokens += k
            stats.phases |= spec.apply(op)
            if isinstance(op, Reset):
                full = reference(spec.epoch)
            self._check(cache, spec, full, logits, i, op, start)
        return stats

    def _check(self, cache: RingKVCache, spec: SpecStream, full: Any, logits: Any, i: int,
               op: Op | None, start: int = 0) -> None:
        n = spec.n
        if cache.next_position() != n:
            raise Mismatch(self.name, i, op, f"next position {cache.next_position()} != tokens seen {n}")
        snaps = cache.snapshot()
        for layer, w in enumerate(cache.windows):
            got = snaps[layer].positions
            want = spec.positions() if w == spec.window else list(range(n))
            if w is not None and w != spec.window:
                raise Mismatch(self.name, i, op, f"layer {layer} window {w} != stream window {spec.window}")
            if got != want:
                raise Mismatch(self.name, i, op,
                               f"layer {layer} (window {w}): cache positions {got} != spec lastWindow {want}")
        if n == 0:
            return
        diff = check_cache(cache, full, n)
        if diff is None and logits is not None:
            diff = check_logits(logits, full, start, n)
        if diff is not None:
            raise Mismatch(self.name, i, op, diff)


def make_decoder(mutant: str | None = None, backend: str = "torch") -> Target:
    """The ``decoder`` campaign target, or the negative control ``mutant`` (a name in
    ``impl.mutants.decoder_mutants.DECODER_MUTANTS``) wrapped the same way and named
    ``mutant:decoder-NAME``, its name in the mutant catalogue (what ``--target`` resolves)."""
    if backend == "c":
        from impl.decoder import _c_ring_factory

        _c_ring_factory()  # raises BackendUnavailable (an impl.errors.Unavailable) when the C ring is not built
    if mutant is None:
        return DecoderTarget(backend=backend, name="decoder" if backend == "torch" else f"decoder-{backend}")
    from impl.mutants.decoder_mutants import DECODER_MUTANTS

    if mutant not in DECODER_MUTANTS:
        raise KeyError(f"unknown decoder mutant {mutant!r}; known: {', '.join(DECODER_MUTANTS)}")
    m = DECODER_MUTANTS[mutant]
    return DecoderTarget(m.model_cls, m.cache_cls, name=f"mutant:decoder-{mutant}", backend=backend)
