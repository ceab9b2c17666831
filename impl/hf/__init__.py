"""Adapters that hold Hugging Face transformers' sliding-window caches and models to the spec.

* :mod:`impl.hf.compat` — which transformers is installed and which cache API it has;
* :mod:`impl.hf.conventions` — each cache's convention, pinned from its source (version + lines);
* :mod:`impl.hf.caches` — drive one sliding layer through ``update``;
* :mod:`impl.hf.reference` — this project's own full-mask Mistral and Gemma 2 forwards;
* :mod:`impl.hf.models` — tiny random-weight models driven by ``generate()`` and manual chunks;
* :mod:`impl.hf.findings` — disagreements written up in ``docs/findings/``.

Nothing here imports transformers at module import time, so ``import impl.hf``
works without it; the targets raise ``TargetUnavailable`` with the reason.
"""
