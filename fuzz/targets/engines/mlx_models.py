"""``mlx:<model_type>``: a tiny mlx-lm model (:mod:`impl.engines.mlx_models`) driven by the op language — one
forward call per op on the model's own ``make_cache()`` (``Push`` one token, ``Chunk(n)`` ``n``; the first call
is the prompt, later chunks continuations / verify steps) — and every logit row compared with the float64
reference (:mod:`impl.hf.reference`: the same weights, this project's forward over the whole history, each
sliding layer masked with the spec's ``W``). Tokens come from the case's seed. Batches are the op-level
``mlx:batch-rotating`` target's (the model calls the same cache).
"""

from __future__ import annotations

import numpy as np

from fuzz.ops import Case
from fuzz.targets.base import RunStats
from fuzz.targets.engines import streams as S
from fuzz.targets.engines.base import EngineTarget, probe_once
from fuzz.targets.known import Finding, case_stats

MODEL_TYPES = ("llama", "mistral", "gemma2")
#: float32 model (2 layers, hidden 32) against float64.
ATOL, RTOL = 1e-4, 1e-3
_PROBES: dict = {}


def _beyond_window(case: Case) -> bool:
    """Some stream has a query at position W or later (one that a window hides a key from)."""
    return any(S.stream_tokens(ops) > w for w, ops in case.streams())


FINDINGS: tuple[Finding, ...] = (
    Finding("mlx-window-ignored", frozenset({"mlx:mistral", "mlx:gemma2"}), ("0.26+",),
            ("0.26.4", "0.27.1", "0.28.4", "0.29.1", "0.30.7", "0.31.3", "0.32.0", "0.32.2"),
            _beyond_window, "any stream longer than W"),
    # mlx-lm 0.26/0.27's llama.py reads no layer_types: the sliding layer of mlx:llama's config attends fully too.
    Finding("mlx-window-ignored", frozenset({"mlx:llama"}), ("0.26-0.27",), ("0.26.4", "0.27.1"),
            _beyond_window, "any stream longer than W (llama.py reads no layer_types)"),
)


class MlxModelTarget(EngineTarget):
    kind = "model"
    distribution, package = "mlx-lm", "mlx_lm"
    window_max = 16
    max_tokens = 48
    findings = FINDINGS
    #: No promise of one model driven from several threads at once: MLX's thread safety is per-thread streams
    #: (ml-explore/mlx#3078: "each thread can only use its own stream"; #3281 gives each thread its own default
    #: stream); nothing promises one model's arrays and caches evaluated from several threads.
    threads_doc = ("mlx: thread safety is one stream per thread (ml-explore/mlx#3078, #3281); nothing promises "
                   "one model driven from several threads at once")

    def __init__(self, model_type: str, *, strict: bool = False):
        from impl.engines import mlx, mlx_models

        self.m, self.model_type = mlx_models, model_type
        self.release = mlx.features().release
        self.finding_kind = self.name = f"mlx:{model_type}"
        self.strict = strict

    def tolerances(self) -> dict[str, dict[str, float]]:
        return {"logits": {"atol": ATOL, "rtol": RTOL}}

    def versions(self) -> dict[str, str]:
        from impl.engines import mlx

        return {**super().versions(), "mlx": mlx.features().mlx}

    def run_case(self, case: Case) -> RunStats:
        for si, (w, ops) in enumerate(case.streams()):
            calls = S.calls(ops)
            if not calls:
                continue
            model, sd, cfg = self.m.tiny(self.model_type, w)
            rng = np.random.default_rng(S.case_seed(case, f"tokens/{si}"))
            ids = rng.integers(0, self.m.VOCAB, size=calls[-1].end)
            ref = self.m.reference(self.model_type, sd, cfg, w, ids)
            with self.calling("make_prompt_cache", calls[0].index, calls[0].op):
                cache = self.m.make_cache(model)
            for c in calls:
                with self.calling(f"{self.model_type} forward", c.index, c.op):
                    got = self.m.logits(model, cache, ids[c.start:c.end])
                S.compare(self.name, c, got, ref[c.start:c.end], ATOL, RTOL, "model", what="logits")
        return case_stats(case)


def make(model_type: str, *, strict: bool = False) -> MlxModelTarget:
    from impl.engines import mlx, mlx_models

    probe_once(_PROBES, "mlx", mlx.probe, plain=mlx.plain_probe)
    probe_once(_PROBES, model_type, mlx_models.tiny, model_type, 2)
    return MlxModelTarget(model_type, strict=strict)
