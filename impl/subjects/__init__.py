"""Decoder-protocol adapters: implementations seen as the subjects of ``kvwindow gate`` (DESIGN §4, §7).

The decoder protocol is ``reset()``, ``prefill(token_ids) -> logits`` (one row per token),
``decode(token_id) -> logits``, ``full(token_ids) -> logits`` (no cache: the reference),
``identity() -> dict`` and, optionally, ``set_identity(**changes)``, ``snapshot()`` /
``restore(state)``. The gate drives every subject through it and nothing else, so one
check runs unchanged on this project's decoder, on a transformers family and on a user's class.

* :mod:`impl.subjects.decoder` — :class:`impl.decoder.Decoder` (each cache backend, each mutant);
* :mod:`impl.subjects.hf` — a transformers sliding-window family with a chosen cache implementation.

Both also offer the optional extras the gate uses where a subject has them (``kv_bytes``,
``kv_layers`` / ``full_kv``, ``batch``, ``inject``): their meaning is stated once, in
:mod:`fuzz.gate.protocol`. Nothing here imports ``fuzz`` or ``pyspec`` (DESIGN §2).
"""
