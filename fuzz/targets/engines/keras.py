"""``keras:<model>``: keras-hub's Gemma 2 (``keras:gemma2``) and Gemma 3 (``keras:gemma3``) on the tensorflow
backend, converted from a tiny seeded Hugging Face checkpoint by keras-hub's own HF converter
(:mod:`impl.engines.keras`: ``sliding_window_size = sliding_window = W``), one model per window reused
across cases, every logit row held to the float64 spec-mask reference (:func:`impl.hf.reference.forward`
over the same float32 weights), computed once per token sequence.

Per stream of a case (tokens from the stream's seed, :mod:`fuzz.targets.engines.lm`):

* ``forward`` — the full forward of the stream (``causal_lm({"token_ids", "padding_mask"})``, no cache):
  prefill around and past ``W``;
* ``batch`` — the full forward of the stream and its second row (another length) right-padded into one
  batch with ``padding_mask``, as keras-hub's preprocessors pad; both rows checked;
* ``cached`` — ``call_with_cache`` once per op that feeds tokens, on a cache laid out as ``_build_cache``
  lays it out: the first op is the prefill, a later ``Chunk`` a chunked continuation written at the
  stream's position (``cache_update_index = n``), a ``Push`` one decode step. The cache holds 48
  positions (a preprocessor's ``sequence_length``; one length keeps tensorflow from warming up a new
  shape per stream, ~50 ms each);
* ``generate`` — ``generate()`` of a two-row ragged batch: the stream's tokens before its last run of
  ``Push`` ops (its first op's at least) and the second row, right-padded to the stream's length (one
  more when it ends in a ``Chunk``); keras-hub's ``generate_step`` prefills the padded batch, steps
  every position from the shortest prompt on (prompt positions of the longer row included) and the
  greedy sampler extends each row; each step's logits are checked against the reference of the row's
  final tokens.

Tolerance: float32 engine against the float64 reference, ``|got - ref| <= 2e-4 + 2e-4 * |ref|``
(measured differences ~5e-6; a window off by one moves logits by 1e-2 .. 1 with these weights).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from fuzz.ops import Case, Push
from fuzz.targets.base import Crash, Mismatch, RunStats
from fuzz.targets.engines import lm
from fuzz.targets.engines.base import EngineCallFailed, EngineTarget
from fuzz.targets.engines.lm import as_outcome, pick
from fuzz.targets.known import Finding, case_stats
from impl.engines import keras as adapter
from impl.engines import tiny
from impl.hf import reference

PATHS = ("forward", "batch", "cached", "generate")
ATOL = RTOL = 2e-4
#: Gemma ties its output head to the embeddings (keras-hub's ``ReversibleEmbedding``); Gemma 3 is built
#: with its published layer pattern, which keras-hub's backbone hard-codes (impl/engines/tiny.py).
OVERRIDES = {"gemma2": {"tie_word_embeddings": True},
             "gemma3": dict(tiny.GEMMA3_PUBLISHED, tie_word_embeddings=True)}
#: The cache length of the ``cached`` path (a preprocessor's sequence_length: longer than any stream).
CACHE_LEN = 48
FINDINGS: tuple[Finding, ...] = ()


class KerasTarget(EngineTarget):
    every_path_runs = True  # run_case drives every path, lm.pick raises the unexplained failure
    distribution = "keras-hub"
    package = "keras_hub"
    #: Each window is its own converted model with its own traced functions and per-shape warm-up (3.5 s of CPU
    #: for Gemma 2, ~8 s for Gemma 3, measured), so a campaign draws few windows; 32 tokens cross W=6 five times.
    window_max = 6
    max_tokens = 32

    def __init__(self, name: str, *, strict: bool = False, paths: Sequence[str] = PATHS,
                 target_name: Optional[str] = None):
        bad = [p for p in paths if p not in PATHS]
        if bad:
            raise ValueError(f"paths {bad} are not among {PATHS}")
        self.release = adapter.check(name)
        self.model_name, self.hf_arch = name, adapter.MODELS[name][0]
        self.strict, self.paths = strict, tuple(paths)
        self.name = target_name or f"keras:{name}"
        self.finding_kind = f"keras:{name}"
        self.findings = FINDINGS
        self._tiny: dict[int, tiny.TinyModel] = {}
        self._models: dict[int, adapter.KerasModel] = {}
        self.ref = lm.Reference(self._reference)

    def tolerances(self) -> dict[str, dict[str, float]]:
        return {"logits": {"atol": ATOL, "rtol": RTOL}}

    def versions(self) -> dict[str, str]:
        keras, tf, _ = adapter.modules()
        return dict(super().versions(), keras=keras.__version__, tensorflow=tf.__version__,
                    backend=adapter.BACKEND, paths=",".join(self.paths),
                    tolerance=f"abs(logits - ref) <= {ATOL:g} + {RTOL:g} * abs(ref)")

    def tiny_for(self, w: int) -> tiny.TinyModel:
        if w not in self._tiny:
            with self.setting_up():  # one-time setup per window: never part of an op's time limit
                self._tiny[w] = tiny.build(self.hf_arch, w, overrides=OVERRIDES[self.model_name])
        return self._tiny[w]

    def model(self, w: int) -> adapter.KerasModel:
        if w not in self._models:
            try:
                with self.setting_up():  # converting the checkpoint is setup, not an op
                    self._models[w] = adapter.KerasModel(self.model_name, self.tiny_for(w))
            except Exception as e:  # noqa: BLE001 - converting/loading is setup: the adapter's fault
                raise self.fault(e, f"converting the tiny {self.model_name} checkpoint (W={w})") from e
        return self._models[w]

    def _reference(self, w: int, tokens: Sequence[int]) -> np.ndarray:
        t = self.tiny_for(w)
        return reference.forward(reference.ref_spec(self.hf_arch, t.config, w), t.state, tokens)[0].numpy()

    def finding_views(self, case: Case) -> list[Case]:
        return [case]

    # -- running

    def run_case(self, case: Case) -> RunStats:
        stats = case_stats(case)
        seed = lm.case_seed(case)
        for s in lm.plan(case, tiny.VOCAB):
            m = self.model(s.window)
            failures = []
            for path in self.paths:
                try:
                    getattr(self, "_" + path)(m, s, seed)
                except (Mismatch, Crash, EngineCallFailed) as e:
                    failures.append(as_outcome(self, e))
            if failures:
                raise pick(self, case, failures)
        return stats

    def _check(self, tag: str, s: lm.Stream, got: np.ndarray, seq: Sequence[int], positions: Sequence[int]) -> None:
        want = self.ref.logits(s.window, seq)[list(positions)]
        lm.check_rows(self.name, tag, s, got, want, positions, s.cols, ATOL, RTOL)

    def _forward(self, m: adapter.KerasModel, s: lm.Stream, seed: int) -> None:
        with self.calling("CausalLM forward", *s.last):
            got = m.forward([s.tokens])[0]
        self._check("[CausalLM forward]", s, got, s.tokens, range(s.length))

    def _batch(self, m: adapter.KerasModel, s: lm.Stream, seed: int) -> None:
        rows = [s.tokens, s.other]
        with self.calling("CausalLM forward (2 right-padded rows)", *s.last):
            got = m.forward(rows)
        for b, row in enumerate(rows):
            self._check(f"[CausalLM forward, row {b} of 2 right-padded, lengths {s.length}/{len(s.other)}]", s,
                        got[b], row, range(len(row)))

    def _cached(self, m: adapter.KerasModel, s: lm.Stream, seed: int) -> None:
        length = max(CACHE_LEN, s.length)
        i, op = s.last
        with self.calling("empty cache", i, op):
            cache = m.empty_cache(1, length)
        rows = []
        for k, (_, _, st, n) in enumerate(s.calls):
            with self.calling(f"call_with_cache(call {k}: {n} tokens at index {st}, cache of {length})", i, op):
                got, cache = m.step(s.tokens[st:st + n], cache, st)
            rows.append(got)
        self._check(f"[call_with_cache per op, cache of {length}]", s, np.concatenate(rows), s.tokens, range(s.length))

    @staticmethod
    def generation_plan(s: lm.Stream) -> tuple[int, int, int]:
        """``(row 0's prompt length, row 1's prompt length, total length)`` of the ``generate`` path."""
        k = len(s.calls)
        while k > 1 and isinstance(s.calls[k - 1][1], Push):
            k -= 1
        trailing = k < len(s.calls)
        n0 = s.calls[k - 1][2] + s.calls[k - 1][3] if trailing else s.length
        total = s.length if trailing else s.length + 1
        n1 = max(1, min(len(s.other), total - 1))
        return n0, n1, total

    def _generate(self, m: adapter.KerasModel, s: lm.Stream, seed: int) -> None:
        n0, n1, total = self.generation_plan(s)
        i, op = s.last
        with self.calling(f"generate (2 ragged prompts {n0}/{n1} into {total} positions)", i, op):
            ids, logits, first = m.generate([s.tokens[:n0], s.other[:n1]], total)
        steps = total - first
        if logits.shape[:2] != (steps, 2):
            raise Mismatch(self.name, i, op, f"[generate] the sampler saw logits of shape {logits.shape}, expected "
                                             f"{steps} steps of 2 rows (prompts {n0}/{n1}, {total} positions)")
        for b, (p, n) in enumerate(((s.tokens, n0), (s.other, n1))):
            final = [int(t) for t in ids[b]]
            if final[:n] != list(p[:n]):
                raise Mismatch(self.name, i, op, f"[generate] row {b}'s prompt was changed: {p[:n]} -> {final[:n]}")
            self._check(f"[generate, row {b} of 2, prompts {n0}/{n1}, {total} positions]", s, logits[:, b], final,
                        range(first - 1, total - 1))


def make(name: str) -> KerasTarget:
    """``keras:<model>`` (registry factory)."""
    return KerasTarget(name)


def instances() -> list[str]:
    return [f"keras:{n}" for n in adapter.MODELS]
