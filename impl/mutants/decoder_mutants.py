"""Negative controls for the decoder: each class is a copy of one piece of the real logic
in :mod:`impl.decoder` with a realistic one-line bug (DESIGN §5 bug classes).

The decoder properties (``fuzz.targets.decoder_props``) and the campaign target
``decoder`` (``fuzz.targets.decoder``) must fail on every one of them;
``tests/test_decoder_mutants.py`` asserts that. The mutant catalogue
(:mod:`impl.mutants.catalogue`) lists them; the harness wraps them as targets
(:func:`fuzz.targets.mutants.mutant_target`, through ``fuzz.targets.decoder.make_decoder(mutant=NAME)``,
or ``DecoderTarget(model_cls=m.model_cls, cache_cls=m.cache_cls)``).

Each mutant needs a config that can show its bug: ``cache-length-position``
reads layer 0's length, so layer 0 must slide; ``full-mask-diagonal`` needs a
global layer. ``DecoderMutant.needs`` says which.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from impl.decoder import Decoder, RingKVCache, TorchRingStore, window_mask


class CacheLengthPositionCache(RingKVCache):
    """Bug class: absolute position replaced by the cache length after eviction (seed 000's
    wrong-position case; HF ``get_seq_length()`` used as the next position).

    Correct while ``n <= W``; from the first eviction on, the new token is rotated
    and stored at ``W`` instead of ``n``.
    """

    def next_position(self) -> int:
        return self.length(0)  # BUG: should be self.n (tokens seen), not the cache length


class KeepsWPlusOneStore(TorchRingStore):
    """Bug class: window edge off by one in storage (keeps ``W + 1`` entries; evict-after-append
    with a non-strict bound)."""

    def capacity(self) -> int | None:
        return None if self.window is None else self.window + 1  # BUG: should be self.window


class KeepsWPlusOneCache(RingKVCache):
    """Bug class: window edge off by one in storage — a cache whose sliding layers keep ``W + 1``
    entries (see :class:`KeepsWPlusOneStore`)."""

    store_cls = KeepsWPlusOneStore


class SlotRopeDecoder(Decoder):
    """Bug class: RoPE at the wrong position — keys rotated at their ring slot index
    ``p mod W`` instead of their absolute position ``p`` before caching."""

    def _key_rope_positions(self, positions: torch.Tensor, window: int | None) -> torch.Tensor:
        return positions if window is None else positions % window  # BUG: should be positions


class FullMaskDiagonalDecoder(Decoder):
    """Bug class: mask diagonal off by one on the full-attention side — global (full-attention)
    layers build their causal mask with the diagonal shifted (``triu(diagonal=2)`` instead of
    ``diagonal=1``), so each query also sees the next token."""

    @staticmethod
    def _mask(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int | None) -> torch.Tensor:
        if window is not None:
            return window_mask(q_pos, k_pos, window)
        q = torch.as_tensor(q_pos)[:, None]
        k = torch.as_tensor(k_pos)[None, :]
        return k <= q + 1  # BUG: should be k <= q

    def _full_mask(self, q_pos, k_pos, window):
        return self._mask(q_pos, k_pos, window)

    def _cached_mask(self, q_pos, k_pos, window):
        return self._mask(q_pos, k_pos, window)


class WindowEdgeDecoder(Decoder):
    """Bug class: window edge off by one in the mask (FlashAttention ``window_size=(W, 0)``
    instead of ``(W-1, 0)``): a decode step attends ``W + 1`` keys — the ``W`` cached
    ones plus itself."""

    def _cached_mask(self, q_pos, k_pos, window):
        q = torch.as_tensor(q_pos)[:, None]
        k = torch.as_tensor(k_pos)[None, :]
        m = k <= q
        if window is not None:
            m = m & (q < k + window + 1)  # BUG: should be q < k + window
        return m


@dataclass(frozen=True)
class DecoderMutant:
    name: str
    bug_class: str
    model_cls: type
    cache_cls: type
    #: what the config must have for the bug to be observable: "sliding-layer-0" or "global-layer"
    needs: str = "sliding-layer-0"

    @property
    def doc(self) -> str:
        cls = self.cache_cls if self.model_cls is Decoder else self.model_cls
        return (cls.__doc__ or "").strip().splitlines()[0]


DECODER_MUTANTS: dict[str, DecoderMutant] = {m.name: m for m in (
    DecoderMutant("cache-length-position", "absolute position replaced by cache length",
                  Decoder, CacheLengthPositionCache),
    DecoderMutant("keeps-w-plus-1", "window edge off by one (storage keeps W+1)",
                  Decoder, KeepsWPlusOneCache),
    DecoderMutant("rope-at-slot", "RoPE at the slot index instead of the absolute position",
                  SlotRopeDecoder, RingKVCache),
    DecoderMutant("full-mask-diagonal", "mask diagonal off by one on the full-attention side",
                  FullMaskDiagonalDecoder, RingKVCache, needs="global-layer"),
    DecoderMutant("window-edge-mask", "window edge off by one in the mask (FlashAttention (W,0))",
                  WindowEdgeDecoder, RingKVCache),
)}
