"""``ct2:<model_type>``: a tiny seeded Hugging Face model converted by CTranslate2's own
``TransformersConverter`` (float32) and driven through ``ctranslate2.Generator`` the way users
drive it (:mod:`impl.engines.ct2`), every logit row held to the float64 spec-mask reference
(:func:`impl.hf.reference.forward` over the same float32 weights), once per stream.

Per stream of a case (tokens from the case's seed, :mod:`fuzz.targets.engines.lm`), on a
``Generator`` with one intra-op thread (``threads=None``: 1 or 2 from the case's seed; on this shared 2-core
machine a two-thread ``generate_batch`` of the tiny model took 650 ms against 5 ms with one — its thread pool
waits for a core at every barrier — so campaigns run one thread and a test drives two), each of the paths
below:

* ``forward`` — ``forward_batch`` of the whole stream (logits of every position: prefill around and
  past ``W``);
* ``batch`` (opt-in, not a default path) — ``forward_batch`` of the stream and a second row of another
  length (the engine pads the shorter one), both rows checked: it raises for every window below 32
  (ct2-forward-past-window), so by default it would only make every case a known finding;
* ``score`` — ``score_batch`` of the stream (each next token's log-probability);
* ``stepped`` — ``generate_batch(include_prompt_in_result=True)``: the stream stepped through one
  token at a time (the decode path across ``W`` and around the ring many times), then one generated;
* ``generate`` — the op structure as generation: ``Chunk`` ops are user tokens, a run of ``Push``
  ops after them is that many greedily generated tokens (``generate_batch`` with
  ``return_logits_vocab``: the prompt forwarded at once, chunked by the engine when it is longer than
  ``W`` — multi-token steps after the window wrapped). When a stream's history came from two or more
  calls, every other case (by seed) passes the first call's tokens as ``static_prompt`` (cached, the
  rest forwarded onto it: a second chunk onto a non-empty cache) — except where that writes past a heap
  block of the process (:func:`static_prompt_overflows`, docs/findings/ct2-static-prompt-heap-overflow.md;
  ``tests/test_engine_ct2.py`` reproduces it in a child), where the whole history is the prompt instead; the
  first generation also runs as
  a two-row batch with the stream's second row (the engine forwards the shorter prompt's length at
  once and steps the rest) and through ``generate_tokens`` (its log-probs checked).

CTranslate2 exposes no cache contents and no speculative or cache-editing API; outputs are compared.
Tolerance: float32 engine against the float64 reference, ``|got - ref| <= 2e-4 + 2e-4 * |ref|``
(measured differences ~1e-6; a window off by one moves logits by 1e-2 .. 1).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from fuzz.ops import Case, Chunk, Op, Push
from fuzz.targets.base import Crash, Mismatch, RunStats
from fuzz.targets.engines import lm
from fuzz.targets.engines.lm import as_outcome, pick
from fuzz.targets.engines.base import EngineCallFailed, EngineTarget
from fuzz.targets.engines.ct2_findings import BATCH, FINDINGS
from fuzz.targets.known import case_stats
from impl.engines import ct2, tiny
from impl.hf import reference

#: Every path; ``batch`` (a ragged two-row ``forward_batch``) is opt-in: it raises on every case for every
#: window a campaign draws (ct2-forward-past-window), so it would only count each case as known.
ALL_PATHS = ("forward", "batch", "score", "stepped", "generate")
PATHS = ("forward", "score", "stepped", "generate")
ATOL = RTOL = 2e-4
#: CTranslate2 converts no soft-capping: the Gemma 2 source model is built without it (so the window
#: is the one thing the comparison is about; the missing caps are not a window finding).
OVERRIDES = {"gemma2": {"attn_logit_softcapping": None, "final_logit_softcapping": None}}


def static_prompt_overflows(window: int, static: int, prompt: int) -> bool:
    """Whether ``generate_batch(static_prompt=...)`` of ``static`` cached tokens and a ``prompt`` forwarded onto
    them may write past a heap block on a sliding model (docs/findings/ct2-static-prompt-heap-overflow.md;
    valgrind saw it at W = 4 from a static prompt of 7 and a prompt of 5, at W = 8 from 11 and 9 or 12 and 8;
    nothing at static prompts <= W). A superset of what was measured: the corruption is detected only later,
    by another allocation, so a campaign that drove it would blame innocent cases."""
    return static > window and 2 * prompt > window


class Ct2Target(EngineTarget):
    every_path_runs = True  # run_case drives every path, lm.pick raises the unexplained failure
    distribution = "ctranslate2"
    package = "ctranslate2"
    window_max = 12
    max_tokens = 40
    #: CTranslate2 does promise concurrent batches on one Generator (docs/parallel.md: "Multiple batches should be
    #: submitted concurrently"), but this adapter builds its tiny models and generators lazily in plain dicts
    #: (:meth:`tiny_for`, :meth:`model`) that are not safe across threads: n/a here is the adapter's limit, not
    #: the engine's.
    threads_doc = ("ctranslate2 promises concurrent batches on one Generator (docs/parallel.md), but this adapter "
                   "builds models lazily in dicts not safe across threads (Ct2Target.tiny_for/model): not driven")

    def __init__(self, arch: str, *, strict: bool = False, paths: Sequence[str] = PATHS,
                 threads: Optional[int] = 1, name: Optional[str] = None):
        bad = [p for p in paths if p not in ALL_PATHS]
        if bad:
            raise ValueError(f"paths {bad} are not among {ALL_PATHS}")
        self.release = ct2.check(arch)
        #: Paths this release cannot drive (feature detection: e.g. no return_logits_vocab before 4.4), with why.
        self.lacking = {p: why for p, why in ct2.lacking_paths().items() if p in paths}
        if len(self.lacking) == len(set(paths)):
            from impl.engines import EngineUnavailable

            raise EngineUnavailable(f"ct2:{arch}: ctranslate2 {self.release}: " + "; ".join(self.lacking.values()))
        paths = tuple(p for p in paths if p not in self.lacking)
        self.arch, self.strict, self.paths, self.threads = arch, strict, tuple(paths), threads
        self.name = name or f"ct2:{arch}"
        self.finding_kind = f"ct2:{arch}"
        self.findings = FINDINGS
        self._tiny: dict[int, tiny.TinyModel] = {}
        self._models: dict[tuple[int, int], ct2.Ct2Model] = {}
        self.ref = lm.Reference(self._reference)

    def tolerances(self) -> dict[str, dict[str, float]]:
        return {"logits": {"atol": ATOL, "rtol": RTOL}}

    def versions(self) -> dict[str, str]:
        import transformers

        out = dict(super().versions(), transformers=transformers.__version__, paths=",".join(self.paths),
                   tolerance=f"abs(logits - ref) <= {ATOL:g} + {RTOL:g} * abs(ref)")
        not_driven = [f"{p} ({why})" for p, why in self.lacking.items()]
        if "generate" in self.paths:
            not_driven.append("static_prompt longer than W onto a prompt over W/2 (ct2-static-prompt-heap-overflow)")
        out["not driven"] = "; ".join(not_driven)
        return out

    # -- models and reference

    def tiny_for(self, w: int) -> tiny.TinyModel:
        if w not in self._tiny:
            with self.setting_up():  # one-time setup per window: never part of an op's time limit
                self._tiny[w] = tiny.build(self.arch, w, overrides=OVERRIDES.get(self.arch))
        return self._tiny[w]

    def model(self, w: int, threads: int) -> ct2.Ct2Model:
        key = (w, threads)
        if key not in self._models:
            try:
                with self.setting_up():  # converting (or loading the stored conversion) is setup, not an op
                    self._models[key] = ct2.Ct2Model(self.tiny_for(w), threads)
            except Exception as e:  # noqa: BLE001 - converting/loading is setup: the adapter's fault
                raise self.fault(e, f"converting the tiny {self.arch} model (W={w})") from e
        return self._models[key]

    def _reference(self, w: int, tokens: Sequence[int]) -> np.ndarray:
        t = self.tiny_for(w)
        return reference.forward(reference.ref_spec(self.arch, t.config, w), t.state, tokens)[0].numpy()

    # -- findings see the case

    def finding_views(self, case: Case) -> list[Case]:
        return [case]

    def findings_here(self):
        """The rows for this model on this release, and those of the ragged ``batch`` path where it runs."""
        kinds = {self.finding_kind} | ({self.finding_kind + BATCH} if "batch" in self.paths else set())
        return [f for f in self.findings if any(f.applies(k, self.release) for k in kinds)]

    # -- running

    def run_case(self, case: Case) -> RunStats:
        stats = case_stats(case)
        seed = lm.case_seed(case)
        threads = self.threads if self.threads is not None else 1 + seed % 2
        static = bool((seed >> 1) & 1)
        for s in lm.plan(case, tiny.VOCAB):
            m = self.model(s.window, threads)
            failures = []
            for path in self.paths:
                try:
                    getattr(self, "_" + path)(m, s, static)
                except (Mismatch, Crash, EngineCallFailed) as e:
                    failures.append(as_outcome(self, e))
            if failures:
                raise pick(self, case, failures)
        return stats

    def _check(self, tag: str, s: lm.Stream, got: np.ndarray, seq: Sequence[int], positions: Sequence[int],
               cols: Sequence[tuple[int, Op]]) -> None:
        want = self.ref.logits(s.window, seq)[list(positions)]
        lm.check_rows(self.name, tag, s, got, want, positions, cols, ATOL, RTOL)

    @staticmethod
    def _past_window(s: lm.Stream) -> tuple[int, Op]:
        """The op a call is charged to: the stream's last (:mod:`fuzz.targets.engines.lm`)."""
        return s.last

    def _forward(self, m: ct2.Ct2Model, s: lm.Stream, static: bool) -> None:
        i, op = self._past_window(s)
        with self.calling("Generator.forward_batch", i, op):
            got = m.forward([s.tokens])[0]
        self._check("[forward_batch]", s, got, s.tokens, range(s.length), s.cols)

    def _batch(self, m: ct2.Ct2Model, s: lm.Stream, static: bool) -> None:
        i, op = self._past_window(s)
        with self.calling("Generator.forward_batch (2 ragged rows)", i, op):
            got = m.forward([s.tokens, s.other])
        for b, row in enumerate((s.tokens, s.other)):
            self._check(f"[forward_batch row {b} of 2, lengths {s.length}/{len(s.other)}]", s, got[b], row,
                        range(len(row)), s.cols)

    def _score(self, m: ct2.Ct2Model, s: lm.Stream, static: bool) -> None:
        if s.length < 2:
            return
        i, op = self._past_window(s)
        with self.calling("Generator.score_batch", i, op):
            got = m.score([s.tokens])[0]
        lp = lm.log_softmax(self.ref.logits(s.window, s.tokens))
        want = lp[np.arange(s.length - 1), s.tokens[1:]]
        bad = lm.first_bad(got[:, None], want[:, None], ATOL, RTOL) if got.shape == want.shape else (0, float("inf"))
        if bad is not None:
            j, err = bad
            ci, cop = s.last
            raise Mismatch(self.name, ci, cop, f"[score_batch] log-prob of the token at position {j + 1} "
                                               f"(fed by {lm.fed_by(s.cols, j + 1)}, W={s.window}) differs from the spec-masked reference by {err:.3g} "
                                               f"(got shape {got.shape}, reference {want.shape})")

    def _stepped(self, m: ct2.Ct2Model, s: lm.Stream, static: bool) -> None:
        i, op = s.last
        with self.calling("Generator.generate_batch(include_prompt_in_result=True)", i, op):
            gen, logits = m.generate([s.tokens], 1, stepped=True)[0]
        seq = s.tokens + gen
        L = len(logits)
        self._check("[generate_batch, prompt stepped token by token]", s, logits, seq,
                    range(len(seq) - 1 - L, len(seq) - 1), s.cols)

    def _generate(self, m: ct2.Ct2Model, s: lm.Stream, static: bool) -> None:
        hist: list[int] = []
        cols: list[tuple[int, Op]] = []
        first_len = 0
        calls = list(s.calls)
        first_generation = True
        k = 0
        while k < len(calls):
            i, op, start, n = calls[k]
            if isinstance(op, Chunk) or not hist:
                hist += s.tokens[start:start + n]
                cols += [(i, op)] * n
                first_len = first_len or n
                k += 1
                if isinstance(op, Chunk):
                    continue
            pushes = []
            while k < len(calls) and isinstance(calls[k][1], Push):
                pushes.append(calls[k][:2])
                k += 1
            if not pushes:
                continue
            st = hist[:first_len] if static and first_len < len(hist) else []
            if st and static_prompt_overflows(s.window, len(st), len(hist) - len(st)):
                st = []
            prompt = hist[len(st):]
            gi, gop = s.last
            what = f"Generator.generate_batch({len(pushes)} steps after a {len(hist)}-token history" + \
                   (f", static_prompt of {len(st)})" if st else ")")
            with self.calling(what, gi, gop):
                gen, logits = m.generate([prompt], len(pushes), static=st)[0]
            seq = hist + gen
            gcols = cols + [(pi, pop) for pi, pop in pushes]
            self._check(f"[generate_batch{', static_prompt' if st else ''}]", s, logits, seq,
                        range(len(seq) - 1 - len(logits), len(seq) - 1), gcols)
            if first_generation:
                first_generation = False
                self._generate_extra(m, s, hist, gcols, len(pushes), gi, gop)
            hist, cols = seq, gcols

    def _generate_extra(self, m: ct2.Ct2Model, s: lm.Stream, hist: list[int], gcols: list, steps: int,
                        gi: int, gop: Op) -> None:
        """The first generation again as a two-row ragged batch and through ``generate_tokens``."""
        rows = [hist, s.other]
        with self.calling("Generator.generate_batch (2 ragged prompts)", gi, gop):
            res = m.generate(rows, steps)
        for b, (row, (gen, logits)) in enumerate(zip(rows, res)):
            seq = row + gen
            self._check(f"[generate_batch row {b} of 2, prompts {len(hist)}/{len(s.other)}]", s, logits,
                        seq, range(len(seq) - 1 - len(logits), len(seq) - 1), gcols)
        with self.calling("Generator.generate_tokens", gi, gop):
            steps_out = m.stream(hist, steps)
        seq = hist + [t for t, _ in steps_out]
        lp = lm.log_softmax(self.ref.logits(s.window, seq))
        for j, (t, got) in enumerate(steps_out):
            want = lp[len(hist) - 1 + j, t]
            if not abs(got - want) <= ATOL + RTOL * abs(want):
                ci, cop = s.last
                raise Mismatch(self.name, ci, cop, f"[generate_tokens] step {j} ({lm.fed_by(gcols, len(hist) + j)}): log-prob {got:.6g} of token {t} "
                                                   f"differs from the spec-masked reference {want:.6g} (W={s.window})")


def make(arch: str) -> Ct2Target:
    """``ct2:<model_type>`` (registry factory)."""
    return Ct2Target(arch)


def instances() -> list[str]:
    """Every ``ct2:`` member the registry lists (those the installed release can convert)."""
    return [f"ct2:{a}" for a in tiny.ARCHS]
