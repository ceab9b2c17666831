"""``llama:<arch>``: llama.cpp through llama-cpp-python's low-level API (:mod:`impl.engines.llama`), a GGUF
written by llama.cpp's own converter from a tiny seeded Hugging Face model (tied embeddings, as Gemma
ships them: the converter drops ``lm_head``), f32 KV cache, the SWA cache (``swa_full = False``).

Per stream (tokens from the stream's seed, :mod:`fuzz.targets.engines.lm`), on one context per window
with two sequences (kept across cases, cleared with ``llama_memory_clear`` before each path), one thread
(``threads=None``: 1 or 2 from the case's seed; ggml's thread pool waits at a barrier after every graph node,
and on this shared 2-core machine a two-thread decode of the tiny model took 270-300 ms against 0.3 ms with
one, so campaigns run one thread and the tests drive two):

* ``chunks`` — each op that feeds tokens is one ``llama_decode`` of sequence 0 (the prefill, chunked
  continuations onto a non-empty cache, chunks longer than ``W``, decode steps), logits of every token;
* ``batch`` — sequence 1 (the stream's second row, another length) decoded in the same batches, in
  chunks of the same sizes until it runs out (ragged steps: one sequence advances, the other not);
* ``verify`` — a speculative verify step: before each ``Chunk`` after the first call, the same number of
  draft tokens (seeded) is decoded at those positions, removed with ``llama_memory_seq_rm(0, n, -1)``,
  and the real chunk decoded — after the ring wrapped this is a multi-token step on a trimmed cache;
* ``fork`` — after the first call ``llama_memory_seq_cp(0, 1)``, then every later call decodes the same
  tokens on both sequences: the fork must see what the original sees;
* ``shift`` — after the first call ``llama_memory_seq_add(0, 0, -1, +d)`` (positions shifted by ``d``,
  RoPE re-applied by the engine), later calls at shifted positions: attention is relative, so the
  logits are the unshifted reference's (only where ``llama_memory_can_shift``).

The logits of every call are compared with the float64 spec-mask reference (:func:`impl.hf.reference
.forward`). Tolerance ``|got - ref| <= 1e-2 + 1e-3 * |ref|``: ggml's CPU GELU is a float16 table
(measured differences up to 2e-3 at position 0, with no cache involved); a window off by one moves
logits by 0.4 .. 4 with these weights.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from fuzz.ops import Case, Chunk
from fuzz.targets.base import Crash, Mismatch, RunStats
from fuzz.targets.engines import lm
from fuzz.targets.engines.base import EngineCallFailed, EngineTarget
from fuzz.targets.engines.lm import as_outcome, pick
from fuzz.targets.known import Finding, case_stats
from impl.engines import llama, tiny
from impl.hf import reference

PATHS = ("chunks", "batch", "verify", "fork", "shift")
ATOL, RTOL = 1e-2, 1e-3
#: Gemma ships tied embeddings (the converter drops ``lm_head``); Gemma 3 is built with its published 5:1
#: layer pattern, the one llama.cpp assumes (its converter writes no ``layer_types``:
#: docs/findings/llama-gemma3-layer-types-dropped.md, impl/engines/tiny.py).
OVERRIDES = {"gemma2": {"tie_word_embeddings": True},
             "gemma3_text": dict(tiny.GEMMA3_PUBLISHED, tie_word_embeddings=True)}
#: Positions a stream may reach (the context holds both sequences of the longest case).
N_CTX = 128
FINDINGS: tuple[Finding, ...] = ()


class LlamaTarget(EngineTarget):
    every_path_runs = True  # run_case drives every path, lm.pick raises the unexplained failure
    distribution = "llama-cpp-python"
    package = "llama_cpp"
    window_max = 12
    max_tokens = 40
    #: llama.cpp's concurrency model is one context per thread (ggml-org/llama.cpp PR #9274): a ``Llama`` object
    #: (one llama_context) is not for concurrent calls, so the threads phase has no shared object to drive.
    threads_doc = ("llama.cpp: one llama_context (one Llama object) per thread (ggml-org/llama.cpp#9274); nothing "
                   "promises concurrent calls on one")

    def __init__(self, arch: str, *, strict: bool = False, paths: Sequence[str] = PATHS,
                 threads: Optional[int] = 1, name: Optional[str] = None):
        hf_arch = {v: k for k, v in llama.GGUF_ARCH.items()}.get(arch)
        if hf_arch is None:
            from impl.engines import EngineUnavailable

            raise EngineUnavailable(f"llama:{arch}: not an architecture these targets build "
                                    f"({', '.join(llama.GGUF_ARCH.values())})")
        self.release = llama.check(hf_arch)
        self.arch, self.hf_arch, self.strict, self.paths, self.threads = arch, hf_arch, strict, tuple(paths), threads
        self.name = name or f"llama:{arch}"
        self.finding_kind = f"llama:{arch}"
        self.findings = FINDINGS
        self._tiny: dict[int, tiny.TinyModel] = {}
        self._models: dict[int, llama.LlamaModel] = {}
        self.ref = lm.Reference(self._reference)

    def tolerances(self) -> dict[str, dict[str, float]]:
        return {"logits": {"atol": ATOL, "rtol": RTOL}}

    def versions(self) -> dict[str, str]:
        return dict(super().versions(), paths=",".join(self.paths),
                    tolerance=f"abs(logits - ref) <= {ATOL:g} + {RTOL:g} * abs(ref)")

    def tiny_for(self, w: int) -> tiny.TinyModel:
        if w not in self._tiny:
            with self.setting_up():  # one-time setup per window: never part of an op's time limit
                self._tiny[w] = tiny.build(self.hf_arch, w, overrides=OVERRIDES[self.hf_arch])
        return self._tiny[w]

    def model(self, w: int) -> llama.LlamaModel:
        if w not in self._models:
            try:
                with self.setting_up():  # converting to GGUF and loading it is setup, not an op
                    self._models[w] = llama.LlamaModel(self.tiny_for(w), n_ctx=N_CTX, n_seq=2)
            except Exception as e:  # noqa: BLE001 - conversion/loading is setup
                raise self.fault(e, f"converting/loading the tiny {self.arch} GGUF (W={w})") from e
        return self._models[w]

    def _reference(self, w: int, tokens: Sequence[int]) -> np.ndarray:
        t = self.tiny_for(w)
        return reference.forward(reference.ref_spec(self.hf_arch, t.config, w), t.state, tokens)[0].numpy()

    # -- running

    def run_case(self, case: Case) -> RunStats:
        stats = case_stats(case)
        seed = lm.case_seed(case)
        threads = self.threads if self.threads is not None else 1 + seed % 2
        for s in lm.plan(case, tiny.VOCAB):
            m = self.model(s.window)
            with self.calling("llama_set_n_threads", *s.last):
                m.set_threads(threads)
            failures = []
            for path in self.paths:
                try:
                    with self.calling("llama_memory_clear", *s.last):
                        m.clear()
                    getattr(self, "_" + path)(m, s, seed)
                except (Mismatch, Crash, EngineCallFailed) as e:
                    failures.append(as_outcome(self, e))
            if failures:
                raise pick(self, case, failures)
        return stats

    def _decode(self, m: llama.LlamaModel, s: lm.Stream, items, what: str) -> np.ndarray:
        with self.calling(f"llama_decode ({what}, {len(items)} tokens)", *s.last):
            return m.decode(items)

    def _check(self, tag: str, s: lm.Stream, got: np.ndarray, seq: Sequence[int], positions: Sequence[int]) -> None:
        want = self.ref.logits(s.window, seq)[list(positions)]
        lm.check_rows(self.name, tag, s, got, want, positions, s.cols, ATOL, RTOL)

    def _chunks(self, m: llama.LlamaModel, s: lm.Stream, seed: int) -> None:
        rows = [self._decode(m, s, [(s.tokens[p], p, 0) for p in range(st, st + n)], f"call {k}")
                for k, (_, _, st, n) in enumerate(s.calls)]
        self._check("[llama_decode per op]", s, np.concatenate(rows), s.tokens, range(s.length))

    def _batch(self, m: llama.LlamaModel, s: lm.Stream, seed: int) -> None:
        got0, got1, q = [], [], 0
        for k, (_, _, st, n) in enumerate(s.calls):
            items = [(s.tokens[p], p, 0) for p in range(st, st + n)]
            take = min(n, len(s.other) - q) if k < len(s.calls) - 1 else len(s.other) - q
            items += [(s.other[p], p, 1) for p in range(q, q + take)]
            out = self._decode(m, s, items, f"call {k}, 2 sequences")
            got0.append(out[:n])
            got1.append(out[n:])
            q += take
        self._check("[llama_decode, seq 0 of a ragged 2-sequence batch]", s, np.concatenate(got0), s.tokens,
                    range(s.length))
        self._check("[llama_decode, seq 1 of a ragged 2-sequence batch]", s, np.concatenate(got1), s.other,
                    range(len(s.other)))

    def _verify(self, m: llama.LlamaModel, s: lm.Stream, seed: int) -> None:
        rng = np.random.default_rng([seed, 7])
        rows = []
        for k, (_, op, st, n) in enumerate(s.calls):
            if k > 0 and isinstance(op, Chunk):
                draft = [int(t) for t in rng.integers(lm.LOW, tiny.VOCAB, size=n)]
                self._decode(m, s, [(draft[j], st + j, 0) for j in range(n)], f"draft of call {k}")
                with self.calling(f"llama_memory_seq_rm(0, {st}, -1)", *s.last):
                    ok = m.seq_rm(0, st, -1)
                if not ok:
                    i, last = s.last
                    raise Mismatch(self.name, i, last, f"[verify] llama_memory_seq_rm(0, {st}, -1) refused to drop "
                                                       f"a {n}-token draft (W={s.window})")
            rows.append(self._decode(m, s, [(s.tokens[p], p, 0) for p in range(st, st + n)], f"call {k}"))
        self._check("[llama_decode after a rejected draft + seq_rm]", s, np.concatenate(rows), s.tokens,
                    range(s.length))

    def _fork(self, m: llama.LlamaModel, s: lm.Stream, seed: int) -> None:
        rows0, rows1 = [], []
        for k, (_, _, st, n) in enumerate(s.calls):
            items = [(s.tokens[p], p, 0) for p in range(st, st + n)]
            if k == 0:
                rows0.append(self._decode(m, s, items, "call 0"))
                with self.calling("llama_memory_seq_cp(0, 1)", *s.last):
                    m.seq_cp(0, 1)
                continue
            out = self._decode(m, s, items + [(t, p, 1) for t, p, _ in items], f"call {k} on both sequences")
            rows0.append(out[:n])
            rows1.append(out[n:])
        self._check("[llama_decode, original of a seq_cp fork]", s, np.concatenate(rows0), s.tokens, range(s.length))
        if rows1:
            first = s.calls[1][2]
            self._check("[llama_decode, seq_cp fork]", s, np.concatenate(rows1), s.tokens, range(first, s.length))

    def _shift(self, m: llama.LlamaModel, s: lm.Stream, seed: int) -> None:
        L = m.L
        if not (hasattr(L, "llama_memory_can_shift") and L.llama_memory_can_shift(m.mem)):
            return
        d = 1 + seed % 5
        if s.length + d > N_CTX:
            return
        rows = []
        for k, (_, _, st, n) in enumerate(s.calls):
            off = 0 if k == 0 else d
            rows.append(self._decode(m, s, [(s.tokens[p], p + off, 0) for p in range(st, st + n)], f"call {k}"))
            if k == 0:
                with self.calling(f"llama_memory_seq_add(0, 0, -1, {d})", *s.last):
                    m.seq_add(0, 0, -1, d)
        self._check(f"[llama_decode after seq_add(+{d})]", s, np.concatenate(rows), s.tokens, range(s.length))


def make(arch: str) -> LlamaTarget:
    return LlamaTarget(arch)


#: Listed (and in the default campaign). ``llama:gemma3`` runs a six-layer Gemma 3 with its published
#: pattern: the converter writes no ``layer_types`` and llama.cpp assumes that pattern
#: (docs/findings/llama-gemma3-layer-types-dropped.md), and with every layer sliding the ``shift`` path
#: aborts the process (docs/findings/llama-swa-only-kshift-abort.md); both are reproduced by
#: tests/test_engine_llama.py.
LISTED = ("gemma2", "gemma3")


def instances() -> list[str]:
    return [f"llama:{a}" for a in LISTED]
