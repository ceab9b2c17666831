"""``ort:gqa`` and ``ort:attention``: ONNX Runtime's attention operators as one-op graphs (:mod:`impl.engines.ort`),
driven through every cache path they have and held to the float64 spec-mask reference.

Each case runs per stream (``Reset(w)`` starts one; payloads come from the case, :mod:`.streams`), on
``1 + seed % 2`` intra-op threads (the case's seed picks 1 or 2), through these views:

``ort:gqa`` (``local_window_size = W``, onnxruntime-genai's convention):

* **grow** — batch 1, ``past_key`` in, ``present_key`` out, one call per op (``Push`` one token,
  ``Chunk(n)`` ``n``; the first call is the prompt); ``present`` must hold the whole history;
* **shared** — past and present are one buffer through IOBinding (``past_present_share_buffer``);
* **windowed** — ``sliding_window_cache=1`` where the release has it: window-sized buffers of capacity
  ``C = W + seed % 3`` evicted inside the op; rows ``[0, L(T))`` must hold the most recent positions
  (the operator's own ``L(T)``), which must contain the spec's ``lastWindow W``;
* **batch** — two rows on one shared buffer: row 1 is its own stream, ``d = 1 + seed % 3`` tokens
  shorter in the prompt (right-padded, ragged ``seqlens_k`` from then on); later multi-token steps go
  through ``query_seqlens`` where the release has it (without it ORT refuses a multi-token step of a
  batch onto a non-empty cache, so the view stops there).

``ort:attention`` (ONNX Attention-25, ``left_window_size = W - 1``, ``right_window_size = 0``):

* **past** — batch 1, the op's own ``past_key``/``present_key``;
* **left-padded** — two rows through ``past_key`` with a boolean ``attn_mask``: row 1 is ``d`` tokens
  shorter, behind ``d`` pad columns;
* **right-padded** — two rows over a caller-kept cache (``nonpad_kv_seqlen``): row 1 ``d`` tokens
  shorter, its keys right-padded, its queries aligned to its own length as the spec's offset rule says.

Outputs of every call are compared row by row (rows a spec leaves undefined — pad rows — are skipped).
"""

from __future__ import annotations

import numpy as np

from fuzz.ops import Case, Push
from fuzz.targets.base import Mismatch, RunStats, TargetError
from fuzz.targets.engines import streams as S
from fuzz.targets.engines.base import EngineTarget, probe_once
from fuzz.targets.known import Finding, case_stats

#: float32 kernels against float64: softmax over at most a few hundred keys of unit-normal payloads.
ATOL, RTOL = 2e-5, 2e-4
KINDS = ("gqa", "attention")
_PROBES: dict = {}



def _beyond_window(case: Case) -> bool:
    """Some stream has a query at position W or later: one that ``W + 1`` keys would reach past the window."""
    return any(S.stream_tokens(ops) > w for w, ops in case.streams())


#: Written-up divergences (docs/findings/<id>.md), releases from scripts/engine_matrix.sh ort.
FINDINGS: tuple[Finding, ...] = (
    Finding("ort-gqa-local-window-plus-one", frozenset({"ort:gqa"}), ("1.20-1.23",),
            ("1.20.1", "1.21.1", "1.22.1", "1.23.2"), _beyond_window,
            "any stream longer than W (local_window_size = W attends W + 1 keys)",
            failure=lambda e: "attention output" in str(e),
            upstream="https://github.com/microsoft/onnxruntime/pull/25927"),
)


class OrtTarget(EngineTarget):
    kind = "model"
    distribution = package = "onnxruntime"
    window_max = 32
    max_tokens = 96
    findings = FINDINGS
    #: ONNX Runtime promises that ``InferenceSession::Run`` may be called concurrently on one session
    #: (microsoft/onnxruntime commit 674afbe, PR #19301: "InferenceSession::Run() is guaranteed to be thread-safe
    #: meaning multiple threads can call this function concurrently"; the Python binding's ``run`` releases the
    #: GIL into it). Each thread keeps its own past/present (or its own IOBinding buffer): its own stream.
    thread_safe = True
    threads_doc = ("onnxruntime: InferenceSession::Run is guaranteed thread-safe on one session "
                   "(microsoft/onnxruntime#19301, commit 674afbe)")

    def __init__(self, kind: str, *, strict: bool = False):
        from impl.engines import ort

        self.ort = ort
        self.features = ort.features()
        self.release = self.features.release
        self.finding_kind = self.name = f"ort:{kind}"
        self.strict = strict

    def tolerances(self) -> dict[str, dict[str, float]]:
        return {"attention": {"atol": ATOL, "rtol": RTOL}}

    def versions(self) -> dict[str, str]:
        from importlib import metadata

        return {**super().versions(), "onnx": metadata.version("onnx")}

    def run_case(self, case: Case) -> RunStats:
        seed = S.case_seed(case)
        # In a threaded case every thread draws the intra-op count from the whole case: one session, all callers.
        threads = 1 + S.case_seed(self.threads_parent or case) % 2
        o = self.ort
        for si, (w, ops) in enumerate(case.streams()):
            calls = S.calls(ops)
            if not calls:
                continue
            total = calls[-1].end
            d = 1 + seed % 3
            first = calls[0].n
            short = min(d, first - 1)  # row 1's prompt is `short` tokens shorter (never empty)
            # Row 1 (only where a batch view runs) is its own stream; its data is a prefix of a full-length payload
            # and its reference the prefix of that payload's (attention is causal): one reference per row.
            rows = [S.payload(S.case_seed(case, f"{si}/row{r}"), total, o.HEADS, o.KV_HEADS, o.DIM)
                    for r in ((0, 1) if short > 0 else (0,))]
            refs = S.references(rows, w)
            self.views(w, calls, rows, refs, short, threads, seed)
        return case_stats(case)

    def views(self, w, calls, rows, refs, short, threads, seed) -> None:
        raise NotImplementedError

    def _out(self, ref, view, row=None) -> S.Outputs:
        return S.Outputs(self.name, ref, ATOL, RTOL, view, row)


def _holds(cache_keys: np.ndarray, p: S.Payload, start: int, end: int) -> bool:
    """Do the rows of ``cache_keys`` (``[L, Hkv, D]``) hold positions ``start .. end - 1`` in order, bit for bit?"""
    return cache_keys.shape[0] == end - start and bool((cache_keys.view(np.uint32) == p.k[start:end].view(np.uint32)).all())


class GqaTarget(OrtTarget):
    def probe_calls(self) -> dict:
        """:func:`impl.engines.ort.probe`'s call is this target's first call of ``Case(2, [push])``: a W = 2 session,
        one token on an empty past."""
        return {"gqa": ("the GroupQueryAttention probe (one token on an empty past at W=2)", Case(2, (Push(),)))}

    def views(self, w, calls, rows, refs, short, threads, seed) -> None:
        o, f, p = self.ort, self.features, rows[0]
        total = calls[-1].end
        qf, kf, vf = p.flat()
        sess = o.gqa_session(w, threads)
        # grow
        pk = np.zeros((1, o.KV_HEADS, 0, o.DIM), np.float32)
        pv = pk
        out = self._out(refs[0], "grow")
        with S.deferred(out):
            for c in calls:
                a, e = c.start, c.end
                with self.calling("GroupQueryAttention (grow)", c.index, c.op):
                    y, pk, pv = o.gqa_run(sess, qf[None, a:e], kf[None, a:e], vf[None, a:e], pk, pv, [e - 1], e)
                out.put(c, y[0])
                self._present(c, pk[0], p, "grow", exact_len=e)
        # shared buffer
        buf = o.SharedBuffer(sess, 1, total)
        out = self._out(refs[0], "shared")
        with S.deferred(out):
            for c in calls:
                a, e = c.start, c.end
                with self.calling("GroupQueryAttention (shared buffer)", c.index, c.op):
                    y = buf.run(qf[None, a:e], kf[None, a:e], vf[None, a:e], [e - 1], e)
                out.put(c, y[0])
            self._present(calls[-1], buf.keys()[0, :, :total], p, "shared", exact_len=total)
        if f.windowed_cache:
            self._windowed(w, calls, p, refs[0], threads, seed)
        if short > 0:
            self._batch(w, calls, rows, refs, short, threads)

    def _present(self, c, present, p, view, exact_len):
        """``present [Hkv, L, D]`` of a full-length cache must hold positions ``0 .. exact_len - 1`` in order."""
        keys = np.transpose(present, (1, 0, 2))
        if _holds(keys, p, 0, exact_len):
            return
        held = p.positions(keys)
        raise Mismatch(self.name, c.index, c.op, f"[{view}] present_key holds positions {S._short(held)}, "
                                                 f"not the history 0..{exact_len - 1}")

    def _windowed(self, w, calls, p, ref, threads, seed):
        o = self.ort
        cap = w + seed % 3
        view = f"windowed C={cap}"
        qf, kf, vf = p.flat()
        sess = o.gqa_session(w, threads, windowed=True)
        pk = np.zeros((1, o.KV_HEADS, cap, o.DIM), np.float32)
        pv = pk.copy()
        out = self._out(ref, view)
        with S.deferred(out):
            for c in calls:
                a, e = c.start, c.end
                with self.calling("GroupQueryAttention (sliding_window_cache)", c.index, c.op):
                    y, pk, pv = o.gqa_run(sess, qf[None, a:e], kf[None, a:e], vf[None, a:e], pk, pv, [e - 1], e)
                out.put(c, y[0])
                n_res = o.windowed_resident(e, cap, o.gqa_local_window_size(w))
                keys = np.transpose(pk[0], (1, 0, 2))[:n_res]
                if not _holds(keys, p, e - n_res, e):
                    raise Mismatch(self.name, c.index, c.op,
                                   f"[{view}] rows 0..{n_res - 1} hold positions {S._short(p.positions(keys))}; the "
                                   f"operator's L(T={e}) = {n_res} most recent positions are {e - n_res}..{e - 1}")
                S.check_holds(self.name, c, list(range(e - n_res, e)), ref, view)

    def _batch(self, w, calls, rows, refs, short, threads):
        o, f = self.ort, self.features
        total = calls[-1].end
        view = f"batch d={short}"
        flat = [r.flat() for r in rows]
        lens = [0, 0]
        buf = None
        outs = [self._out(refs[r], view, row=r) for r in (0, 1)]
        with S.deferred(*outs):
            for ci, c in enumerate(calls):
                n1 = c.n - short if ci == 0 else c.n
                multi = ci > 0 and c.n > 1
                if multi and not f.query_seqlens:
                    return  # ORT refuses a multi-token batch step onto a cache without query_seqlens
                sess = o.gqa_session(w, threads, query_seqlens=multi)
                if buf is None or buf.sess is not sess:
                    old = buf
                    buf = o.SharedBuffer(sess, 2, total)
                    if old is not None:
                        buf.k, buf.v = old.k, old.v
                q = np.zeros((2, c.n, o.HEADS * o.DIM), np.float32)
                k = np.zeros((2, c.n, o.KV_HEADS * o.DIM), np.float32)
                v = np.zeros_like(k)
                for r, n in ((0, c.n), (1, n1)):
                    a = lens[r]
                    q[r, :n], k[r, :n], v[r, :n] = flat[r][0][a:a + n], flat[r][1][a:a + n], flat[r][2][a:a + n]
                new = [lens[0] + c.n, lens[1] + n1]
                with self.calling("GroupQueryAttention (batch, shared buffer)", c.index, c.op):
                    y = buf.run(q, k, v, [x - 1 for x in new], max(new), [c.n, n1] if multi else None)
                for r, n in ((0, c.n), (1, n1)):
                    outs[r].put(S.Call(c.index, c.op, lens[r], n), y[r, :n], order=ci)
                lens = new


class AttentionTarget(OrtTarget):
    def views(self, w, calls, rows, refs, short, threads, seed) -> None:
        o, p = self.ort, rows[0]
        qf, kf, vf = p.flat()
        sess = o.attention_session(w, threads, "past")
        pk = np.zeros((1, o.KV_HEADS, 0, o.DIM), np.float32)
        pv = pk
        ones = np.ones((1, 1, calls[-1].end, calls[-1].end), bool)
        out = self._out(refs[0], "past")
        with S.deferred(out):
            for c in calls:
                a, e = c.start, c.end
                with self.calling("Attention (past/present)", c.index, c.op):
                    y, pk, pv = o.attention_past(sess, qf[None, a:e], kf[None, a:e], vf[None, a:e],
                                                 ones[:, :, :c.n, :e], pk, pv)
                out.put(c, y[0])
            keys = np.transpose(pk[0], (1, 0, 2))
            if not _holds(keys, p, 0, calls[-1].end):
                c = calls[-1]
                raise Mismatch(self.name, c.index, c.op, f"[past] present_key holds positions {S._short(p.positions(keys))}")
        if short > 0:
            self._left_padded(w, calls, rows, refs, short, threads)
            self._right_padded(w, calls, rows, refs, short, threads)

    def _left_padded(self, w, calls, rows, refs, short, threads):
        o = self.ort
        view = f"left-padded d={short}"
        sess = o.attention_session(w, threads, "past")
        total = calls[-1].end
        # Column j of the batch: row 0's position j; row 1's position j - short (its first `short` columns pad).
        cols = [r.flat() for r in rows]
        qb = np.zeros((2, total, o.HEADS * o.DIM), np.float32)
        kb = np.zeros((2, total, o.KV_HEADS * o.DIM), np.float32)
        vb = np.zeros_like(kb)
        qb[0], kb[0], vb[0] = cols[0]
        qb[1, short:], kb[1, short:], vb[1, short:] = (x[:total - short] for x in cols[1])
        valid = np.ones((2, 1, 1, total), bool)
        valid[1, :, :, :short] = False
        pk = np.zeros((2, o.KV_HEADS, 0, o.DIM), np.float32)
        pv = pk
        outs = [self._out(refs[r], view, row=r) for r in (0, 1)]
        with S.deferred(*outs):
            for ci, c in enumerate(calls):
                a, e = c.start, c.end
                mask = np.ascontiguousarray(np.broadcast_to(valid[..., :e], (2, 1, c.n, e)))
                with self.calling("Attention (left-padded batch)", c.index, c.op):
                    y, pk, pv = o.attention_past(sess, qb[:, a:e], kb[:, a:e], vb[:, a:e], mask, pk, pv)
                outs[0].put(c, y[0], order=ci)
                pad = max(0, short - a)  # pad columns inside this call (only the first call has them)
                outs[1].put(S.Call(c.index, c.op, a + pad - short, c.n - pad), y[1, pad:], order=ci)

    def _right_padded(self, w, calls, rows, refs, short, threads):
        o = self.ort
        view = f"right-padded d={short}"
        sess = o.attention_session(w, threads, "external")
        total = calls[-1].end
        flat = [r.flat() for r in rows]
        kk = np.zeros((2, total, o.KV_HEADS * o.DIM), np.float32)
        vv = np.zeros_like(kk)
        lens = [0, 0]
        outs = [self._out(refs[r], view, row=r) for r in (0, 1)]
        with S.deferred(*outs):
            for ci, c in enumerate(calls):
                n1 = c.n - short if ci == 0 else c.n
                q = np.zeros((2, c.n, o.HEADS * o.DIM), np.float32)
                a = lens[1]
                q[0] = flat[0][0][c.start:c.end]
                q[1, c.n - n1:] = flat[1][0][a:a + n1]  # query i sits at offset + i, offset = len - S
                kk[0, c.start:c.end], vv[0, c.start:c.end] = flat[0][1][c.start:c.end], flat[0][2][c.start:c.end]
                kk[1, a:a + n1], vv[1, a:a + n1] = flat[1][1][a:a + n1], flat[1][2][a:a + n1]
                new = [c.end, a + n1]
                with self.calling("Attention (right-padded batch, nonpad_kv_seqlen)", c.index, c.op):
                    y = o.attention_external(sess, q, kk, vv, new)
                outs[0].put(c, y[0], order=ci)
                outs[1].put(S.Call(c.index, c.op, a, n1), y[1, c.n - n1:], order=ci)
                lens = new


def _plain_gqa_probe() -> None:
    """:func:`impl.engines.ort.probe`'s call with a local window longer than any stream (it never binds): the
    second question of a probe that died (:func:`fuzz.targets.engines.base.probe_once`)."""
    from impl.engines import ort

    s = ort.gqa_session(1 << 16, 1)
    z = np.zeros((1, 1, ort.HEADS, ort.DIM), np.float32)
    zk = np.zeros((1, 1, ort.KV_HEADS, ort.DIM), np.float32)
    empty = np.zeros((1, ort.KV_HEADS, 0, ort.DIM), np.float32)
    ort.gqa_run(s, z, zk, zk, empty, empty, [0], 1)


def make(rest: str, *, strict: bool = False) -> OrtTarget:
    """``ort:gqa`` / ``ort:attention``; unavailable (with the reason) without onnxruntime or the operator."""
    if rest not in KINDS:
        raise TargetError(f"unknown ONNX Runtime target 'ort:{rest}'; known: {', '.join('ort:' + k for k in KINDS)}")
    from impl.engines import ort

    probe_once(_PROBES, "gqa", ort.probe, plain=_plain_gqa_probe)
    if rest == "attention":
        probe_once(_PROBES, "attention", ort.attention_probe)
        return AttentionTarget(rest, strict=strict)
    return GqaTarget(rest, strict=strict)


def instances() -> list[str]:
    return [f"ort:{k}" for k in KINDS]
