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

from fuzz.ops import Case
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
        threads = 1 + seed % 2
        for si, (w, ops) in enumerate(case.streams()):
            calls = S.calls(ops)
            if not calls:
                continue
            total = calls[-1].end
            d = 1 + seed % 3
            rows = [S.payload(S.case_seed(case, f"{si}/row{r}"), total, self.ort.HEADS, self.ort.KV_HEADS, self.ort.DIM)
                    for r in (0, 1)]
            refs = [S.Reference(rows[0], w)]
            first = calls[0].n
            short = min(d, first - 1)  # row 1's prompt is `short` tokens shorter (never empty)
            if short > 0:
                refs.append(S.Reference(S.Payload(*(x[:total - short] for x in (rows[1].q, rows[1].k, rows[1].v))), w))
            self.views(w, calls, rows, refs, short, threads, seed)
        return case_stats(case)

    def views(self, w, calls, rows, refs, short, threads, seed) -> None:
        raise NotImplementedError


class GqaTarget(OrtTarget):
    def views(self, w, calls, rows, refs, short, threads, seed) -> None:
        o, f, p = self.ort, self.features, rows[0]
        total = calls[-1].end
        sess = o.gqa_session(w, threads)
        # grow
        pk = np.zeros((1, o.KV_HEADS, 0, o.DIM), np.float32)
        pv = pk.copy()
        for c in calls:
            with self.calling("GroupQueryAttention (grow)", c.index, c.op):
                out, pk, pv = o.gqa_run(sess, p.q[None, c.start:c.end], p.k[None, c.start:c.end], p.v[None, c.start:c.end],
                                        pk, pv, [c.end - 1], c.end)
            S.compare(self.name, c, out[0], refs[0].rows(c), ATOL, RTOL, "grow")
            self._present(c, pk[0], p, refs[0], "grow", exact_len=c.end)
        # shared buffer
        buf = o.SharedBuffer(sess, 1, total)
        for c in calls:
            with self.calling("GroupQueryAttention (shared buffer)", c.index, c.op):
                out = buf.run(p.q[None, c.start:c.end], p.k[None, c.start:c.end], p.v[None, c.start:c.end], [c.end - 1], c.end)
            S.compare(self.name, c, out[0], refs[0].rows(c), ATOL, RTOL, "shared")
        self._present(calls[-1], buf.keys()[0, :, :total], p, refs[0], "shared", exact_len=total)
        if f.windowed_cache:
            self._windowed(w, calls, p, refs[0], threads, seed)
        if short > 0:
            self._batch(w, calls, rows, refs, short, threads)

    def _present(self, c, present, p, ref, view, exact_len):
        """``present [Hkv, L, D]`` of a full-length cache must hold positions ``0 .. exact_len - 1`` in order."""
        held = S.positions_of(np.transpose(present, (1, 0, 2)), p.k)
        if held != list(range(exact_len)):
            raise Mismatch(self.name, c.index, c.op, f"[{view}] present_key holds positions {S._short(held)}, "
                                                     f"not the history 0..{exact_len - 1}")

    def _windowed(self, w, calls, p, ref, threads, seed):
        o = self.ort
        cap = w + seed % 3
        sess = o.gqa_session(w, threads, windowed=True)
        pk = np.zeros((1, o.KV_HEADS, cap, o.DIM), np.float32)
        pv = pk.copy()
        for c in calls:
            with self.calling("GroupQueryAttention (sliding_window_cache)", c.index, c.op):
                out, pk, pv = o.gqa_run(sess, p.q[None, c.start:c.end], p.k[None, c.start:c.end], p.v[None, c.start:c.end],
                                        pk, pv, [c.end - 1], c.end)
            S.compare(self.name, c, out[0], ref.rows(c), ATOL, RTOL, f"windowed C={cap}")
            n_res = o.windowed_resident(c.end, cap, o.gqa_local_window_size(w))
            held = S.positions_of(np.transpose(pk[0], (1, 0, 2))[:n_res], p.k)
            if held != list(range(c.end - n_res, c.end)):
                raise Mismatch(self.name, c.index, c.op,
                               f"[windowed C={cap}] rows 0..{n_res - 1} hold positions {S._short(held)}; the operator's "
                               f"L(T={c.end}) = {n_res} most recent positions are {c.end - n_res}..{c.end - 1}")
            S.check_holds(self.name, c, held, ref, f"windowed C={cap}")

    def _batch(self, w, calls, rows, refs, short, threads):
        o, f = self.ort, self.features
        total = calls[-1].end
        lens = [0, 0]
        buf = None
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
            q = np.zeros((2, c.n, o.HEADS, o.DIM), np.float32)
            k = np.zeros((2, c.n, o.KV_HEADS, o.DIM), np.float32)
            v = np.zeros_like(k)
            for r, n in ((0, c.n), (1, n1)):
                a = lens[r]
                q[r, :n], k[r, :n], v[r, :n] = rows[r].q[a:a + n], rows[r].k[a:a + n], rows[r].v[a:a + n]
            new = [lens[0] + c.n, lens[1] + n1]
            with self.calling("GroupQueryAttention (batch, shared buffer)", c.index, c.op):
                out = buf.run(q, k, v, [x - 1 for x in new], max(new), [c.n, n1] if multi else None)
            for r, n in ((0, c.n), (1, n1)):
                rc = S.Call(c.index, c.op, lens[r], n)
                S.compare(self.name, rc, out[r, :n], refs[r].rows(rc), ATOL, RTOL, f"batch d={short}", row=r)
            lens = new


class AttentionTarget(OrtTarget):
    def views(self, w, calls, rows, refs, short, threads, seed) -> None:
        o, p = self.ort, rows[0]
        sess = o.attention_session(w, threads, "past")
        pk = np.zeros((1, o.KV_HEADS, 0, o.DIM), np.float32)
        pv = pk.copy()
        for c in calls:
            with self.calling("Attention (past/present)", c.index, c.op):
                out, pk, pv = o.attention_past(sess, p.q[None, c.start:c.end], p.k[None, c.start:c.end],
                                               p.v[None, c.start:c.end], np.ones((1, 1, c.n, c.end), bool), pk, pv)
            S.compare(self.name, c, out[0], refs[0].rows(c), ATOL, RTOL, "past")
        held = S.positions_of(np.transpose(pk[0], (1, 0, 2)), p.k)
        if held != list(range(calls[-1].end)):
            c = calls[-1]
            raise Mismatch(self.name, c.index, c.op, f"[past] present_key holds positions {S._short(held)}")
        if short > 0:
            self._left_padded(w, calls, rows, refs, short, threads)
            self._right_padded(w, calls, rows, refs, short, threads)

    def _left_padded(self, w, calls, rows, refs, short, threads):
        o = self.ort
        sess = o.attention_session(w, threads, "past")
        pk = np.zeros((2, o.KV_HEADS, 0, o.DIM), np.float32)
        pv = pk.copy()
        valid = np.zeros((2, 0), bool)
        lens = [0, 0]
        for ci, c in enumerate(calls):
            pad = short if ci == 0 else 0
            q = np.zeros((2, c.n, o.HEADS, o.DIM), np.float32)
            k = np.zeros((2, c.n, o.KV_HEADS, o.DIM), np.float32)
            v = np.zeros_like(k)
            q[0], k[0], v[0] = rows[0].q[c.start:c.end], rows[0].k[c.start:c.end], rows[0].v[c.start:c.end]
            a, n1 = lens[1], c.n - pad
            q[1, pad:], k[1, pad:], v[1, pad:] = rows[1].q[a:a + n1], rows[1].k[a:a + n1], rows[1].v[a:a + n1]
            col = np.ones((2, c.n), bool)
            col[1, :pad] = False
            valid = np.concatenate([valid, col], axis=1)
            with self.calling("Attention (left-padded batch)", c.index, c.op):
                out, pk, pv = o.attention_past(sess, q, k, v, o.optional_mask(valid, 2, c.n, valid.shape[1]), pk, pv)
            S.compare(self.name, c, out[0], refs[0].rows(c), ATOL, RTOL, f"left-padded d={short}", row=0)
            r1 = S.Call(c.index, c.op, a, n1)  # row 1's own positions (the message names them)
            S.compare(self.name, r1, out[1, pad:], refs[1].rows(r1), ATOL, RTOL, f"left-padded d={short}", row=1)
            lens = [c.end, a + n1]

    def _right_padded(self, w, calls, rows, refs, short, threads):
        o = self.ort
        sess = o.attention_session(w, threads, "external")
        total = calls[-1].end
        kk = np.zeros((2, total, o.KV_HEADS, o.DIM), np.float32)
        vv = np.zeros_like(kk)
        lens = [0, 0]
        for ci, c in enumerate(calls):
            n1 = c.n - short if ci == 0 else c.n
            q = np.zeros((2, c.n, o.HEADS, o.DIM), np.float32)
            a = lens[1]
            q[0] = rows[0].q[c.start:c.end]
            q[1, c.n - n1:] = rows[1].q[a:a + n1]  # query i sits at offset + i, offset = len - S
            kk[0, c.start:c.end], vv[0, c.start:c.end] = rows[0].k[c.start:c.end], rows[0].v[c.start:c.end]
            kk[1, a:a + n1], vv[1, a:a + n1] = rows[1].k[a:a + n1], rows[1].v[a:a + n1]
            new = [c.end, a + n1]
            with self.calling("Attention (right-padded batch, nonpad_kv_seqlen)", c.index, c.op):
                out = o.attention_external(sess, q, kk, vv, new)
            S.compare(self.name, c, out[0], refs[0].rows(c), ATOL, RTOL, f"right-padded d={short}", row=0)
            r1 = S.Call(c.index, c.op, a, n1)
            S.compare(self.name, r1, out[1, c.n - n1:], refs[1].rows(r1), ATOL, RTOL, f"right-padded d={short}", row=1)
            lens = new


def make(rest: str, *, strict: bool = False) -> OrtTarget:
    """``ort:gqa`` / ``ort:attention``; unavailable (with the reason) without onnxruntime or the operator."""
    if rest not in KINDS:
        raise TargetError(f"unknown ONNX Runtime target 'ort:{rest}'; known: {', '.join('ort:' + k for k in KINDS)}")
    from impl.engines import ort

    probe_once(_PROBES, "gqa", ort.probe)
    if rest == "attention":
        probe_once(_PROBES, "attention", ort.attention_probe)
        return AttentionTarget(rest, strict=strict)
    return GqaTarget(rest, strict=strict)


def instances() -> list[str]:
    return [f"ort:{k}" for k in KINDS]
