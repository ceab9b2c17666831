"""Decoders of the decoder protocol for the gate's and the ``py-decoder:`` target's tests (``py-decoder:
tests.support.gate_decoders:NAME``): built on :class:`impl.subjects.decoder.DecoderSubject`, each one
thing a user's class can be — complete, minimal, approximate, buggy, or broken in a way the gate must
turn into a usage error or a harness fault."""

from __future__ import annotations

import torch

from impl.decoder import RingKVCache, TorchRingStore
from impl.errors import Unavailable
from impl.mutants.decoder_mutants import CacheLengthPositionCache
from impl.subjects.decoder import DecoderSubject


class MyDecoder(DecoderSubject):
    """The project's decoder as a user's class: every optional method of the protocol."""

    tolerance = 1e-10


class MinimalDecoder:
    """Only the required methods: no set_identity, snapshot or extras."""

    tolerance = 1e-10

    def __init__(self):
        self._d = DecoderSubject()

    def reset(self):
        self._d.reset()

    def prefill(self, token_ids):
        return self._d.prefill(token_ids)

    def decode(self, token_id):
        return self._d.decode(token_id)

    def full(self, token_ids):
        return self._d.full(token_ids)

    def identity(self):
        return {"window": [8, None]}


class Float16Store(TorchRingStore):
    """K/V rounded to float16 when written (a quantised cache)."""

    def write(self, positions, k, v):
        super().write(positions, k.to(torch.float16).to(k.dtype), v.to(torch.float16).to(v.dtype))


class Float16Cache(RingKVCache):
    store_cls = Float16Store


class QuantisedDecoder(DecoderSubject):
    """A quantisation candidate: the decoder with its K/V stored at float16 precision."""

    tolerance = 1e-10

    def __init__(self):
        super().__init__(cache_cls=Float16Cache)


class PositionBugDecoder(DecoderSubject):
    """A user's decoder with a bug: the next position is the cache length once the window is full."""

    tolerance = 1e-10

    def __init__(self):
        super().__init__(cache_cls=CacheLengthPositionCache)


class IgnoresWindowDecoder(DecoderSubject):
    """Accepts set_identity(window=...) and reports it, but keeps computing with its own window: a class
    on which the window +/- 1 controls cannot be seen (the gate must fail step 5 on it)."""

    tolerance = 1e-10

    def set_identity(self, **changes):
        if "window" in changes:
            self._said_window = list(changes.pop("window"))
        if changes:
            super().set_identity(**changes)

    def identity(self):
        ident = super().identity()
        if getattr(self, "_said_window", None) is not None:
            ident["window"] = self._said_window
        return ident


class NeedsArgs(MinimalDecoder):
    def __init__(self, size):
        super().__init__()


class IdentityRaises(MinimalDecoder):
    def identity(self):
        raise RuntimeError("identity is not wired up yet")


class NoFull:
    def reset(self): ...
    def prefill(self, token_ids): ...
    def decode(self, token_id): ...
    def identity(self): return {}


class UnavailableMidRun(MinimalDecoder):
    """Its backend goes away after the first calls (what an adapter raises when a release cannot be driven)."""

    calls = 0

    def decode(self, token_id):
        type(self).calls += 1
        if type(self).calls > 3:
            raise Unavailable("the accelerator backend of this decoder is gone")
        return super().decode(token_id)


class BlockDecoder(MinimalDecoder):
    """Reports a block size, as a paged cache would: step 4's lengths go around it too."""

    def identity(self):
        return {"window": [8, None], "block_size": 4}


class Window9Decoder(DecoderSubject):
    """The decoder with its sliding window at 9: not the same model as ``decoder`` (W = 8)."""

    tolerance = 1e-10

    def __init__(self):
        super().__init__()
        self.set_identity(window=[9, None])
        self.reset()
