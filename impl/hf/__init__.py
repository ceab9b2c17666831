"""Adapters that hold Hugging Face transformers' sliding-window caches and models to the spec.

* :mod:`impl.hf.compat` — which transformers is installed, and shims for every cache API it touches
  (feature-detected; :class:`~impl.hf.compat.HFIncompatible` names the release and API it cannot drive);
* :mod:`impl.hf.conventions` — each cache's convention, pinned from its source (version + lines);
* :mod:`impl.hf.caches` — drive one sliding layer through ``update``;
* :mod:`impl.hf.reference` — this project's own full-mask Mistral and Gemma 2 forwards;
* :mod:`impl.hf.models` — tiny random-weight models and the calls users make (forward, ``generate()``);
* :mod:`impl.hf.families` — every sliding-window model family of the installed release, driven with
  a cache and held to a window-disabled reference that attends through the caller's masks;
* :mod:`impl.hf.cb` — the same families through transformers' continuous batching (the manager ``generate_batch``
  opens, its paged cache), concurrent requests, their block tables read at every step.

Each driver has a ``probe()`` (:func:`impl.hf.caches.probe`, :func:`impl.hf.families.probe`) that
exercises it once and raises :class:`~impl.hf.compat.HFIncompatible` where the release lacks an API.

The harness side — which cases hit a written-up finding (:mod:`fuzz.targets.hf.findings`),
the campaign targets (:mod:`fuzz.targets.hf.caches`, :mod:`fuzz.targets.hf.models`) and the check
of each pinned convention against the spec (:mod:`fuzz.targets.hf.conventions`) — lives
in ``fuzz/``; nothing here imports ``fuzz`` or ``pyspec`` (DESIGN §2).

Nothing here imports transformers at module import time, so ``import impl.hf``
works without it; the harness's targets raise :class:`impl.errors.Unavailable` with the reason.
"""
