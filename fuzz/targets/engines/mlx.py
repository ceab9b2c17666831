"""``mlx:rotating``, ``mlx:batch-rotating`` and ``mlx:<model_type>``: mlx-lm's rotating KV caches driven as
its model files drive them (:mod:`impl.engines.mlx`), held to the float64 spec-mask reference.

Per stream of a case (payloads from the case, :mod:`.streams`; one call per op: the first is the
prompt, a later ``Chunk(n)`` a multi-token step — a chunked-prefill continuation or a speculative verify
step — which after the ring wrapped takes ``update_and_fetch``'s concatenating path):

``mlx:rotating`` (``RotatingKVCache(max_size=W)``, mask ``window_size=W``):

* **window** — ``keep=0``: a sliding layer (``Model.make_cache``);
* **sinks** — ``keep = 1 + seed % min(4, W - 1)`` (W >= 2), no mask window: ``make_prompt_cache``'s
  ``max_kv_size`` cache; the spec is ``sinkWindow keep W``;
* **wide** — ``max_size = W + 1 + seed % 3`` with ``window_size = W``: the mask alone keeps the window (where
  the release's ``create_attention_mask`` takes ``window_size``: mlx-lm 0.28+; before, the mask's window is the
  cache's ``max_size``).

After every call the cache's keys in temporal order must contain the spec's window as a run ending at
the newest position (the cache may keep more: ``max_size - 1 + N`` after an N-token step).

``mlx:batch-rotating`` (``BatchRotatingKVCache(max_size=W, ...)``), two rows, row 1 its own stream:

* **left-padded** — row 1 ``d = 1 + seed % 3`` tokens shorter in the prompt, behind ``d`` pad columns
  (``left_padding=[0, d]``);
* **right-padded** — where the release has ``prepare``/``finalize``: the stream's leading chunks are the
  prompt, row 1's last ``d`` prompt slots are padding (``prepare(lengths=, right_padding=)``, as
  ``BatchGenerator.prompt`` does), ``finalize()`` after it.

Each row's contents (``extract(row)``, where the release has it) must contain the spec's window.
"""

from __future__ import annotations

import numpy as np

from fuzz.ops import Case, Chunk, Push
from fuzz.targets.base import RunStats, TargetError
from fuzz.targets.engines import streams as S
from fuzz.targets.engines.base import EngineTarget, probe_once
from fuzz.targets.known import Finding, case_stats

#: mlx's CPU sdpa in float32 against float64.
ATOL, RTOL = 2e-5, 2e-4
KINDS = ("rotating", "batch-rotating")
_PROBES: dict = {}



def _sink_chunk_past_window(case: Case) -> bool:
    """A stream with W >= 2 (the sinks view runs) and a multi-token call reaching position W or later."""
    return any(w >= 2 and any(c.n >= 2 and c.end > w for c in S.calls(ops)) for w, ops in case.streams())


def _one_token_prompt_chunk(case: Case) -> bool:
    """A stream whose right-padded prompt (a first call of >= 2 tokens, the chunks after it) has a 1-token chunk."""
    for _, ops in case.streams():
        calls = S.calls(ops)
        if not calls or calls[0].n < 2:
            continue
        for c in calls[1:]:
            if not isinstance(c.op, Chunk):
                break
            if c.n == 1:
                return True
    return False


def _prompt_calls(calls) -> int:
    """How many leading calls the right-padded view treats as the prompt: the first, and the chunks after it."""
    n = 1
    while n < len(calls) and isinstance(calls[n].op, Chunk):
        n += 1
    return n


def _chunk_after_wrap(case: Case) -> bool:
    """A multi-token call while the batch ring is wrapped part-way and still holds a pad column of row 1.

    ``BatchRotatingKVCache`` is wrapped (``rotated``) from a single-token step that found the ring full (the
    stream already had ``W`` tokens) until the next multi-token step; its write index is then ``k mod W``
    after ``k`` such steps. ``make_mask(N > 1)`` computes the step's trim from that index, ``_update_concat``
    from the ring's length (``W``): they differ unless ``k mod W == 0``, and the mask then hides the first
    valid key of a row whose padding is still in the ring. Row 1 is ``d <= 3`` tokens shorter (``d`` comes
    from the case's seed, which a prefix of the case does not share, so every ``d`` counts): its pad
    columns are the first ``d`` columns (left-padded view) or, after ``finalize()``, the first ``d`` columns
    of the buffer the prompt left (right-padded view)."""
    for w, ops in case.streams():
        calls = S.calls(ops)
        if w < 2 or not calls or calls[0].n < 2:
            continue  # W = 1 never wraps part-way; a one-token prompt makes no batch view
        dmax = min(3, calls[0].n - 1)
        prompt = _prompt_calls(calls)
        kept = calls[0].n  # the buffer's length after the right-padded prompt (update_concat keeps W - 1 + N)
        for c in calls[1:prompt]:
            kept = min(kept, w - 1) + c.n
        right_start = calls[prompt - 1].end - kept
        k = 0
        for ci, c in enumerate(calls[1:], 1):
            if c.n == 1:
                k += c.start >= w
                continue
            if k % w:
                oldest = c.start - w  # the ring holds columns c.start - W .. c.start - 1
                if oldest < dmax or (ci >= prompt and oldest < right_start + dmax):
                    return True
            k = 0
    return False


def _extract_after_eviction(case: Case) -> bool:
    """A batch view's call after which the ring has dropped ``D`` columns with ``1 <= D <= W + 1``.

    ``BatchRotatingKVCache`` counts every dropped column off each row's ``left_padding`` (row 0 has none, so
    its ``left_padding`` is ``-D``; row 1's is ``d - D``). An ``extract(row)`` that slices the buffer from a
    negative ``left_padding`` keeps only the newest ``D`` (row 1: ``D - d``) columns, which hold less than the
    window while that is below ``W - 1``; ``d <= 3`` comes from the case's seed (every ``d`` counts, as in
    :func:`_chunk_after_wrap`). The buffer keeps ``L`` columns: the first call's all, ``min(L, W - 1) + N``
    after a multi-token step (``update_concat``), ``W`` after a single-token step on a full ring."""
    for w, ops in case.streams():
        calls = S.calls(ops)
        if not calls or calls[0].n < 2:
            continue  # no batch view
        kept = calls[0].n
        for c in calls[1:]:
            kept = (min(kept + 1, w) if kept < w else w) if c.n == 1 else min(kept, w - 1) + c.n
            if 1 <= c.end - kept <= w + 1:
                return True
    return False


#: Written-up divergences (docs/findings/<id>.md), releases from scripts/engine_matrix.sh mlx.
FINDINGS: tuple[Finding, ...] = (
    Finding("mlx-rotating-keep-chunk-mask", frozenset({"mlx:rotating"}), ("0.26+",),
            ("0.26.4", "0.27.1", "0.28.4", "0.29.1", "0.30.7", "0.31.3", "0.32.0", "0.32.2"),
            _sink_chunk_past_window, "a multi-token step reaching position W with keep > 0 (the sinks view)",
            failure=lambda e: "[sinks" in str(e), upstream="https://github.com/ml-explore/mlx-lm/issues/1631"),
    Finding("mlx-batch-rotating-one-token-prompt-chunk", frozenset({"mlx:batch-rotating"}), ("0.28+",),
            ("0.28.4", "0.29.1", "0.30.7", "0.31.3", "0.32.0", "0.32.2"),
            _one_token_prompt_chunk, "a right-padded prompt processed in chunks, one of them a single token",
            failure=lambda e: "finalize()" in str(e)),
    Finding("mlx-batch-rotating-wrapped-chunk-mask", frozenset({"mlx:batch-rotating"}), ("0.28+",),
            ("0.28.4", "0.29.1", "0.31.3", "0.32.0", "0.32.2"),
            _chunk_after_wrap, "a multi-token step after single-token steps left the ring wrapped part-way, "
            "while it still holds a pad column of the shorter row",
            failure=lambda e: "batch row 1]" in str(e) and "attention output" in str(e)),
    Finding("mlx-batch-rotating-extract-negative-padding", frozenset({"mlx:batch-rotating"}), ("0.30",), ("0.30.7",),
            _extract_after_eviction, "extract(row) after the ring dropped fewer than W + 2 columns",
            failure=lambda e: "cache holds positions" in str(e) and "padded d=" in str(e),
            upstream="https://github.com/vllm-project/vllm-metal/pull/139"),
)
#: A case that reproduces each finding (tests/test_engine_mlx.py, the notes' repro).
REPRO = {"mlx-rotating-keep-chunk-mask": (3, "chunk:5"),
         "mlx-batch-rotating-one-token-prompt-chunk": (3, "chunk:4 chunk:1 push"),
         "mlx-batch-rotating-wrapped-chunk-mask": (3, "chunk:4 push chunk:2 push push"),  # d = 3: on 0.30 too
         "mlx-batch-rotating-extract-negative-padding": (3, "chunk:3 push")}


class MlxTarget(EngineTarget):
    kind = "model"
    distribution, package = "mlx-lm", "mlx_lm"
    window_max = 32
    max_tokens = 96
    findings = FINDINGS
    #: No promise of one model driven from several threads at once: MLX's thread safety is per-thread streams
    #: (ml-explore/mlx#3078: "each thread can only use its own stream"; #3281 gives each thread its own default
    #: stream); nothing promises one model's arrays and caches evaluated from several threads.
    threads_doc = ("mlx: thread safety is one stream per thread (ml-explore/mlx#3078, #3281); nothing promises "
                   "one model driven from several threads at once")

    def __init__(self, kind: str, *, strict: bool = False):
        from impl.engines import mlx

        self.mlx = mlx
        self.features = mlx.features()
        self.release = self.features.release
        self.finding_kind = self.name = f"mlx:{kind}"
        self.strict = strict

    def tolerances(self) -> dict[str, dict[str, float]]:
        return {"attention": {"atol": ATOL, "rtol": RTOL}}

    def versions(self) -> dict[str, str]:
        return {**super().versions(), "mlx": self.features.mlx}

    def from_engine(self, error: BaseException) -> bool:
        if super().from_engine(error):
            return True
        import mlx.core as mx  # mlx's own Python files raise too (mlx, not mlx_lm)
        import os

        from fuzz.targets.known import raised_inside, repo_root

        root = os.path.dirname(os.path.dirname(os.path.abspath(mx.__file__ or "")))
        return raised_inside(error, root, repo_root())

    def run_case(self, case: Case) -> RunStats:
        seed = S.case_seed(case)
        m = self.mlx
        for si, (w, ops) in enumerate(case.streams()):
            calls = S.calls(ops)
            if not calls:
                continue
            total = calls[-1].end
            # Row 1 is drawn only where a batch view feeds it (a target that never asks gets only row 0).
            rows = _Rows(lambda r, si=si: S.payload(S.case_seed(case, f"{si}/row{r}"), total, m.HEADS, m.KV_HEADS, m.DIM))
            self.views(w, calls, rows, seed, ops)
        return case_stats(case)

    def views(self, w, calls, rows, seed, ops) -> None:
        raise NotImplementedError

    def _drive(self, stepper, calls, p, ref, view: str, contents: bool = True) -> None:
        out = S.Outputs(self.name, ref, ATOL, RTOL, view)
        with S.deferred(out):
            for c in calls:
                a, e = c.start, c.end
                m = self.mlx
                with self.calling(f"RotatingKVCache ({view})", c.index, c.op):
                    y = stepper.step_lazy(p.q[None, a:e], p.k[None, a:e], p.v[None, a:e])
                    # the output and the cache's keys in one evaluation (the engine runs lazily)
                    y, keys = m.evaluate(y, m.temporal_keys_lazy(stepper.cache) if contents else None)
                out.put(c, y[0])
                if contents:
                    S.check_holds(self.name, c, p.positions(m.keys_of(keys)), ref, view)


class _Rows:
    """The payloads of a stream's batch rows, each drawn on first use (``rows[r]``)."""

    def __init__(self, draw):
        self.draw, self.got = draw, {}

    def __getitem__(self, r: int) -> S.Payload:
        if r not in self.got:
            self.got[r] = self.draw(r)
        return self.got[r]


class RotatingTarget(MlxTarget):
    def probe_calls(self) -> dict:
        """:func:`impl.engines.mlx.probe`'s call is this target's window view of ``Case(2, [push])``:
        ``RotatingKVCache(max_size=2)`` masked at W = 2, one token stepped."""
        return {"mlx": ("the RotatingKVCache probe (one token stepped at W=2)", Case(2, (Push(),)))}

    def views(self, w, calls, rows, seed, ops) -> None:
        m, p = self.mlx, rows[0]
        self._drive(m.rotating(w), calls, p, p.reference(w), "window")
        if w >= 2:
            keep = 1 + seed % min(4, w - 1)
            self._drive(m.rotating(w, keep=keep, masked=False), calls, p, p.reference(w, sinks=keep),
                        f"sinks keep={keep}")
        if self.features.mask_window:  # a mask window narrower than max_size needs window_size= (mlx-lm 0.28+)
            extra = 1 + seed % 3
            self._drive(m.rotating(w, extra=extra), calls, p, p.reference(w), f"wide max_size=W+{extra}")


class BatchRotatingTarget(MlxTarget):
    def views(self, w, calls, rows, seed, ops) -> None:
        d = 1 + seed % 3
        short = min(d, calls[0].n - 1)
        if short <= 0:
            return  # a one-token prompt leaves nothing to pad (mlx:rotating covers the single row)
        # Row 1's stream is a prefix of its full-length payload; its reference the prefix of that payload's.
        refs = S.references([rows[0], rows[1]], w)
        self._left(w, calls, rows, refs, short)
        if self.features.right_padding:
            self._right(w, calls, rows, refs, short)

    def _rows_step(self, stepper, c, rows, starts, ns, offsets, view):
        """One batch call: row ``r`` feeds ``ns[r]`` tokens from ``starts[r]``, placed at column ``offsets[r]``."""
        m = self.mlx
        q = np.zeros((2, c.n, m.HEADS, m.DIM), np.float32)
        k = np.zeros((2, c.n, m.KV_HEADS, m.DIM), np.float32)
        v = np.zeros_like(k)
        for r in (0, 1):
            a, n, o = starts[r], ns[r], offsets[r]
            q[r, o:o + n], k[r, o:o + n], v[r, o:o + n] = rows[r].q[a:a + n], rows[r].k[a:a + n], rows[r].v[a:a + n]
        with self.calling(f"BatchRotatingKVCache ({view})", c.index, c.op):
            return self.mlx.evaluate(stepper.step_lazy(q, k, v))[0]

    def _contents(self, stepper, c, rows, refs, lens, view):
        if not self.features.extract:
            return
        m = self.mlx
        with self.calling(f"BatchRotatingKVCache.extract ({view})", c.index, c.op):
            keys = m.evaluate(*(m.batch_row_keys_lazy(stepper.cache, r) for r in (0, 1)))
        for r in (0, 1):
            # extract() of a row whose right padding finalize() rolled in front keeps that pad row (its
            # left_padding went negative); no mask ever reads it, so only the window itself is checked.
            S.check_holds(self.name, S.Call(c.index, c.op, 0, lens[r]), rows[r].positions(m.keys_of(keys[r])),
                          refs[r], view, row=r, stale_ok=True)

    def _left(self, w, calls, rows, refs, short):
        view = f"left-padded d={short}"
        st = self.mlx.batch_rotating(w, [0, short])
        lens = [0, 0]
        outs = [S.Outputs(self.name, refs[r], ATOL, RTOL, view, row=r) for r in (0, 1)]
        with S.deferred(*outs):
            for ci, c in enumerate(calls):
                pad = short if ci == 0 else 0
                ns = [c.n, c.n - pad]
                y = self._rows_step(st, c, rows, lens, ns, [0, pad], view)
                outs[0].put(c, y[0], order=ci)
                outs[1].put(S.Call(c.index, c.op, lens[1], ns[1]), y[1, pad:], order=ci)  # row 1's own positions
                lens = [lens[0] + ns[0], lens[1] + ns[1]]
                self._contents(st, c, rows, refs, lens, view)

    def _right(self, w, calls, rows, refs, short):
        view = f"right-padded d={short}"
        prompt = _prompt_calls(calls)  # the stream's leading chunks (at least the first call) are the prompt
        plen = calls[prompt - 1].end
        if plen - short < 1:
            return
        st = self.mlx.batch_rotating(w, [0, 0])
        with self.calling("BatchRotatingKVCache.prepare", calls[0].index, calls[0].op):
            st.cache.prepare(lengths=[plen, plen - short], right_padding=[0, short])
        lens = [0, 0]
        outs = [S.Outputs(self.name, refs[r], ATOL, RTOL, view, row=r) for r in (0, 1)]
        with S.deferred(*outs):
            for ci, c in enumerate(calls):
                if ci < prompt:
                    n1 = max(0, min(c.n, plen - short - lens[1]))  # row 1's valid slots come first, padding after
                else:
                    n1 = c.n
                ns = [c.n, n1]
                y = self._rows_step(st, c, rows, lens, ns, [0, 0], view)
                outs[0].put(c, y[0], order=ci)
                if n1:
                    outs[1].put(S.Call(c.index, c.op, lens[1], n1), y[1, :n1], order=ci)
                lens = [lens[0] + ns[0], lens[1] + ns[1]]
                if ci == prompt - 1:
                    with self.calling("BatchRotatingKVCache.finalize", c.index, c.op):
                        st.cache.finalize()
                if ci >= prompt - 1:
                    self._contents(st, c, rows, refs, lens, view)


def make(rest: str, *, strict: bool = False):
    """``mlx:rotating`` / ``mlx:batch-rotating`` / ``mlx:<model_type>`` (:mod:`.mlx_models`)."""
    from impl.engines import mlx

    probe_once(_PROBES, "mlx", mlx.probe, plain=mlx.plain_probe)
    if rest == "rotating":
        return RotatingTarget(rest, strict=strict)
    if rest == "batch-rotating":
        if not mlx.features().batch:
            from impl.engines import EngineUnavailable

            raise EngineUnavailable(f"mlx-lm {mlx.features().release}: {mlx.LACKS} BatchRotatingKVCache "
                                    f"(mlx_lm.models.cache has no such class)")
        return BatchRotatingTarget(rest, strict=strict)
    from fuzz.targets.engines import mlx_models

    if rest in mlx_models.MODEL_TYPES:
        return mlx_models.make(rest, strict=strict)
    raise TargetError(f"unknown mlx-lm target 'mlx:{rest}'; known: "
                      + ", ".join(f"mlx:{k}" for k in KINDS + tuple(mlx_models.MODEL_TYPES)))


def instances() -> list[str]:
    from fuzz.targets.engines import mlx_models

    return [f"mlx:{k}" for k in KINDS + tuple(mlx_models.MODEL_TYPES)]
