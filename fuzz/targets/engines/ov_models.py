"""``ov:<model_type>``: a tiny seeded HF model converted by ``openvino.convert_model`` (:mod:`impl.engines.ov_models`:
why not optimum-intel) and run on the CPU plugin, every logit row held to the float64 spec-mask reference
(:func:`impl.hf.reference.forward` over the same float32 weights), once per stream.

Per stream of a case (tokens from the case's seed, :mod:`fuzz.targets.engines.lm`):

* ``forward`` — the whole stream as one row (logits of every position: prefill up to, at and past ``W``);
* ``batch`` — the stream and its second row of another length (``lm.Stream.other``), right-padded with an
  attention mask of zeros: both rows checked (padding must not shift the window of the shorter row).

Every prefix of the stream is checked at once (a causal forward's row ``t`` is the decode output of position
``t``); the converted graph has no cache, so decode steps against a cache are not driven here (``ov:paged`` drives
the paged op). Tolerance as for the other float32 engines: ``|got - ref| <= 2e-4 + 2e-4 * |ref|``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from fuzz.ops import Case
from fuzz.targets.base import Crash, Mismatch, RunStats
from fuzz.targets.engines import lm
from fuzz.targets.engines.base import EngineCallFailed, EngineTarget
from fuzz.targets.known import Finding, case_stats

ARCHS = ("mistral", "gemma2", "gemma3_text")
PATHS = ("forward", "batch")
ATOL = RTOL = 2e-4
#: Written-up divergences: none found on 2026.4.1.
FINDINGS: tuple[Finding, ...] = ()


class OvModelTarget(EngineTarget):
    every_path_runs = True
    distribution = package = "openvino"
    window_max = 12
    max_tokens = 40
    findings = FINDINGS

    def __init__(self, arch: str, *, strict: bool = False, threads: int = 1):
        from impl.engines import ov, tiny

        self.tinymod = tiny
        self.release = ov.release()
        self.arch, self.strict, self.threads = arch, strict, threads
        self.name = self.finding_kind = f"ov:{arch}"
        self._tiny: dict = {}
        self._models: dict = {}
        self.ref = lm.Reference(self._reference)

    def tolerances(self) -> dict[str, dict[str, float]]:
        return {"logits": {"atol": ATOL, "rtol": RTOL}}

    def versions(self) -> dict[str, str]:
        import torch
        import transformers

        return {**super().versions(), "transformers": transformers.__version__, "torch": torch.__version__,
                "exporter": "openvino.convert_model (optimum-intel does not install beside transformers "
                            f"{transformers.__version__})", "paths": ",".join(PATHS),
                "not driven": "stateful decode (optimum-intel's export)"}

    def tiny_for(self, w: int):
        if w not in self._tiny:
            with self.setting_up():
                self._tiny[w] = self.tinymod.build(self.arch, w)
        return self._tiny[w]

    def model(self, w: int):
        if w not in self._models:
            from impl.engines import ov_models

            try:
                with self.setting_up():  # converting (or loading the stored IR) is setup, not an op
                    self._models[w] = ov_models.OvModel(self.tiny_for(w), self.threads)
            except Exception as e:  # noqa: BLE001 - conversion is setup: the adapter's fault
                raise self.fault(e, f"converting the tiny {self.arch} model (W={w})") from e
        return self._models[w]

    def _reference(self, w: int, tokens: Sequence[int]) -> np.ndarray:
        from impl.hf import reference

        t = self.tiny_for(w)
        return reference.forward(reference.ref_spec(self.arch, t.config, w), t.state, tokens)[0].numpy()

    def finding_views(self, case: Case) -> list[Case]:
        return [case]

    def run_case(self, case: Case) -> RunStats:
        stats = case_stats(case)
        for s in lm.plan(case, self.tinymod.VOCAB):
            m = self.model(s.window)
            failures = []
            for path in PATHS:
                try:
                    getattr(self, "_" + path)(m, s)
                except (Mismatch, Crash, EngineCallFailed) as e:
                    failures.append(lm.as_outcome(self, e))
            if failures:
                raise lm.pick(self, case, failures)
        return stats

    def _check(self, tag, s, got, seq) -> None:
        want = self.ref.logits(s.window, seq)
        lm.check_rows(self.name, tag, s, got, want, range(len(seq)), s.cols, ATOL, RTOL)

    def _forward(self, m, s: lm.Stream) -> None:
        i, op = s.last
        with self.calling("CompiledModel infer (one row)", i, op):
            got = m.forward([s.tokens])[0]
        self._check("[forward]", s, got, s.tokens)

    def _batch(self, m, s: lm.Stream) -> None:
        i, op = s.last
        with self.calling("CompiledModel infer (2 right-padded rows)", i, op):
            got = m.forward([s.tokens, s.other])
        for b, row in enumerate((s.tokens, s.other)):
            self._check(f"[batch row {b} of 2, lengths {s.length}/{len(s.other)}]", s, got[b], row)


def make(arch: str, *, strict: bool = False) -> OvModelTarget:
    return OvModelTarget(arch, strict=strict)
