"""Adapters that hold Hugging Face transformers' sliding-window caches and models to the spec.

* :mod:`impl.hf.compat` — which transformers is installed and which cache API it has;
* :mod:`impl.hf.conventions` — each cache's convention, pinned from its source (version + lines);
* :mod:`impl.hf.caches` — drive one sliding layer through ``update``;
* :mod:`impl.hf.reference` — this project's own full-mask Mistral and Gemma 2 forwards;
* :mod:`impl.hf.models` — tiny random-weight models and the calls users make (forward, ``generate()``).

The harness side — which cases hit a written-up finding (:mod:`fuzz.hf_findings`),
the campaign targets (:mod:`fuzz.hf_targets`, :mod:`fuzz.hf_models`) and the check
of each pinned convention against the spec (:mod:`fuzz.hf_conventions`) — lives
in ``fuzz/``; nothing here imports ``fuzz`` or ``pyspec`` (DESIGN §2).

Nothing here imports transformers at module import time, so ``import impl.hf``
works without it; the harness's targets (:mod:`fuzz.hf_targets`) raise ``TargetUnavailable``
with the reason.
"""
