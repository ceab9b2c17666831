"""Serving engines' real block managers as paged caches (DESIGN §4 "Paged protocol", issue 22).

Each adapter drives an engine's own KV-block manager objects through a small copy of that engine's
scheduler loop, with no model and no GPU, and keeps a simulated KV store indexed by the physical
block ids the engine hands out (:mod:`impl.serving._base`): a block freed or reused too early reads
wrong. They need ``.venv-serving`` (``scripts/install_serving_cores.sh``); elsewhere building one
raises :class:`~impl.engines.EngineUnavailable` (never a finding).

``ADAPTERS`` maps the target names the harness wraps (``fuzz/``, built by the lead) to
``"module:Class"``; each class documents its supported ops (class attribute ``ops``), its window
convention (cited from the engine's source) and what efficiency to expect. Nothing here imports
``fuzz`` or ``pyspec`` (DESIGN §2).
"""

ADAPTERS = {
    "vllm:swa": "impl.serving.vllm:VllmSwa",
    "vllm:hybrid": "impl.serving.vllm:VllmHybrid",
    "sglang:swa": "impl.serving.sglang:SglangSwa",
}
