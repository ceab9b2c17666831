"""The Hugging Face transformers targets (``hf-dynamic``, ``hf-static``, ``hf-mistral``, ``hf-gemma2``); the
adapters they drive live in ``impl/hf/``."""
