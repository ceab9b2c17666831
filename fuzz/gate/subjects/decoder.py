"""``decoder[@BACKEND]``: this project's Torch decoder (:mod:`impl.decoder`) on one cache backend, as a gate
subject (the adapter: :class:`impl.subjects.decoder.DecoderSubject`).

Backends: ``torch`` (ring in torch tensors, the default), ``c`` (the C ring of ``csrc/ringkv.c``
through :class:`impl.ring.CRing`; float64 K/V as three exact float32 limbs, so it matches ``torch``
bit for bit), ``cuda`` (torch storage on a CUDA device). Tolerance of cached against ``full()``:
:data:`fuzz.targets.decoder_props.TOLERANCES` for the model's dtype.
"""

from __future__ import annotations

import torch

from fuzz.gate.protocol import Subject
from fuzz.targets.decoder_props import tolerance
from impl.decoder import BackendUnavailable, _c_ring_factory
from impl.subjects.decoder import GATE_CONFIG, DecoderSubject

NAMES = ("decoder",)
SYNTAX = ("decoder[@torch|@c|@cuda] (this project's Torch decoder on one cache backend)",)
BACKENDS = {"torch": ("torch", None), "c": ("c", None), "cuda": ("torch", "cuda")}


def check_backend(backend: str, spec: str) -> tuple[str, str | None]:
    """``(cache backend, device)`` of a backend name; raises where it cannot run here."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown decoder backend {backend!r}; known: {', '.join('@' + b for b in BACKENDS)}")
    store, device = BACKENDS[backend]
    if store == "c":
        _c_ring_factory()  # BackendUnavailable (an Unavailable) when the C ring is not built
    if device == "cuda" and not torch.cuda.is_available():
        raise BackendUnavailable(f"{spec}: no CUDA device (torch {torch.__version__} sees none)")
    return store, device


def decoder_subject(spec: str, backend: str, description: str, **kw) -> Subject:
    store, device = check_backend(backend, spec)
    factory = lambda: DecoderSubject(backend=store, device=device, **kw)  # noqa: E731
    factory()  # built once now: a subject that cannot be built is a usage error, before anything runs
    c = GATE_CONFIG
    return Subject(spec, factory, (tolerance(c.torch_dtype).logits, 0.0),
                   f"{description}: {c.layers} layers (windows {list(c.windows)}), {c.n_heads}/{c.n_kv_heads} "
                   f"query/KV heads, head_dim {c.head_dim}, {c.dtype}, {backend} cache", {"torch": torch.__version__})


def build(spec: str) -> Subject:
    _, _, backend = spec.partition("@")
    return decoder_subject(spec, backend or "torch", "impl.decoder.Decoder")
