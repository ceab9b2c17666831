"""``ov:<model_type>``: a tiny seeded HF model exported by optimum-intel (stateful), or by ``openvino.convert_model``
where optimum-intel does not import (:mod:`impl.engines.ov_models`: which, and why), and run on the CPU plugin, every logit row held to the float64 spec-mask reference
(:func:`impl.hf.reference.forward` over the same float32 weights), once per stream.

Per stream of a case (tokens from the case's seed, :mod:`fuzz.targets.engines.lm`):

* ``forward`` — the whole stream as one row (logits of every position: prefill up to, at and past ``W``);
* ``batch`` — the stream and its second row of another length (``lm.Stream.other``), right-padded with an
  attention mask of zeros: both rows checked (padding must not shift the window of the shorter row);
* ``steps`` (optimum-intel's stateful model only) — the stream's calls onto the model's state as the ops say:
  the first call the prefill, ``Push`` a one-token decode step, ``Chunk(n)`` an n-token chunked prefill onto the
  state; every logit row checked.

A ``convert_model`` graph has no cache, so ``steps`` is not driven there (the target's versions say so). Tolerance as for the other float32 engines: ``|got - ref| <= 2e-4 + 2e-4 * |ref|``.
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
PATHS = ("forward", "batch", "steps")
ATOL = RTOL = 2e-4
#: optimum-intel exports Gemma 2 with SDPA attention (huggingface/optimum-intel#976, "Restore SDPA in Gemma2 models"),
#: which has no attention-logit soft-capping: the tiny model is built without it on that path, so the comparison is
#: about the window (with it, logits differ by up to 3e-3 from position 1 on, whatever the window: measured on
#: 2.2.0 with transformers 4.57.6; not a window divergence, not written up), as the ct2: targets do for CTranslate2.
OPTIMUM_OVERRIDES = {"gemma2": {"attn_logit_softcapping": None}}
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
        from impl.engines import ov_models

        self.exporter, self.exporter_release = ov_models.exporter(arch)
        self.paths = PATHS if self.exporter == "optimum-intel" else PATHS[:2]
        self._tiny: dict = {}
        self._models: dict = {}
        self.ref = lm.Reference(self._reference)

    def tolerances(self) -> dict[str, dict[str, float]]:
        return {"logits": {"atol": ATOL, "rtol": RTOL}}

    def versions(self) -> dict[str, str]:
        import torch
        import transformers

        out = {**super().versions(), "transformers": transformers.__version__, "torch": torch.__version__,
                "exporter": self.exporter if self.exporter != "convert_model" else
                f"openvino.convert_model ({self.exporter_release})", "paths": ",".join(self.paths),
                "not driven": "" if self.exporter == "optimum-intel" else "steps (needs optimum-intel's stateful export)"}
        if self.exporter == "optimum-intel":
            out["optimum-intel"] = self.exporter_release
        return out

    def tiny_for(self, w: int):
        if w not in self._tiny:
            with self.setting_up():
                over = OPTIMUM_OVERRIDES.get(self.arch) if self.exporter == "optimum-intel" else None
                self._tiny[w] = self.tinymod.build(self.arch, w, overrides=over)
        return self._tiny[w]

    def model(self, w: int):
        if w not in self._models:
            from impl.engines import ov_models

            try:
                with self.setting_up():  # converting (or loading the stored IR) is setup, not an op
                    cls = ov_models.OptimumModel if self.exporter == "optimum-intel" else ov_models.OvModel
                    self._models[w] = cls(self.tiny_for(w), self.threads)
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
            for path in self.paths:
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

    def _steps(self, m, s: lm.Stream) -> None:
        i, op = s.last
        sizes = [n for _, _, _, n in s.calls]
        with self.calling(f"OVModelForCausalLM stateful steps {sizes}", i, op):
            got = m.steps(s.tokens, sizes)
        self._check("[stateful steps: prefill, decode, chunks]", s, got, s.tokens)


def make(arch: str, *, strict: bool = False) -> OvModelTarget:
    return OvModelTarget(arch, strict=strict)
