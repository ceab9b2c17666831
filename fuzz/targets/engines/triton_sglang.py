"""``triton:sglang-decode`` and ``triton:sglang-extend``: SGLang's Triton decode and extend kernels
(:mod:`impl.engines.triton_sglang`) under Triton's interpreter, with the window KV lists SGLang's Triton backend
builds, over a token pool with NaN wherever the window forbids a read (:mod:`.triton_paged`: the pool is the
paged layout's storage seen token by token, so shuffled blocks give scattered token slots), held to the
float64 spec reference.

* **sglang-decode** — every one-token call after a stream's first (a decode step) is one request of a batch:
  ``seq_lens`` counts the new token (already written), the window list is ``update_sliding_window_buffer``'s
  (``min(seq_len, W - 1)`` newest slots, restated: the backend module does not import here);
* **sglang-extend** — every call is an extend: its new tokens' ``k, v`` beside the prefix window's slots
  (``min(prefix, W - 1)``, ``window_kv_offsets = prefix - that``), one launch per window for the whole case
  (prefill, chunked-prefill continuation, one-token extend, ragged).
"""

from __future__ import annotations

import numpy as np

from fuzz.ops import Case
from fuzz.targets.base import RunStats, TargetError
from fuzz.targets.engines import streams as S
from fuzz.targets.engines import triton_paged as P
from fuzz.targets.known import Finding, case_stats

KINDS = ("sglang-decode", "sglang-extend")


def _decode_past_window(case: Case) -> bool:
    """A decode step (a one-token call after the stream's first) whose query sees ``W`` or more earlier-or-own
    positions: its cache holds ``>= W`` tokens, so ``min(seq_len, W - 1)`` drops one the spec keeps."""
    return any(any(c.n == 1 and c.start > 0 and c.end >= w for c in S.calls(ops)) for w, ops in case.streams())


def _extend_window_one(case: Case) -> bool:
    """A stream with ``W = 1`` and a call of two or more tokens: ``sliding_window_size = 0`` turns the kernel's
    window mask off (``if SLIDING_WINDOW_SIZE > 0``), so the call's queries see each other causally."""
    return any(w == 1 and any(c.n >= 2 for c in S.calls(ops)) for w, ops in case.streams())


#: Written-up divergences (docs/findings/<id>.md), releases: the installed one (scripts/engine_matrix.sh).
FINDINGS: tuple[Finding, ...] = (
    Finding("sglang-triton-decode-window-minus-one", frozenset({"triton:sglang-decode"}), ("0.5",), ("0.5.23",),
            _decode_past_window, "a decode step whose cache holds W or more tokens (it attends W - 1 keys)",
            failure=lambda e: "attention output" in str(e),
            upstream="https://github.com/sgl-project/sglang/pull/32087"),
    Finding("sglang-triton-extend-window-one-unmasked", frozenset({"triton:sglang-extend"}), ("0.5",), ("0.5.23",),
            _extend_window_one, "W = 1 and a call of two or more tokens (sliding_window_size = 0 means no window)",
            failure=lambda e: "attention output" in str(e)),
)


class SglangTarget(P.KernelTarget):
    distribution = package = "sglang"
    findings = FINDINGS

    def __init__(self, kind: str, *, strict: bool = False):
        from impl.engines import triton_sglang as G

        self.G = G
        self.release = G.release()
        G.kernels()
        self.name = self.finding_kind = f"triton:{kind}"
        self.strict = strict

    def versions(self) -> dict[str, str]:
        return self.kernel_versions(self.G.GLUE)

    def run_case(self, case: Case) -> RunStats:
        dtype = self.driven_dtype(case)
        heads, kv_heads, dim = P.heads_of(case)
        seed = S.case_seed(case)
        for w, seqs in P.sequences(case, heads, kv_heads, dim, dtype).items():
            if self.name == "triton:sglang-decode":
                seqs = [s for s in seqs if s.call.n == 1 and s.call.start > 0]
            if seqs:
                self.launch(seqs, w, P.block_size(case, w, self.name), seed, dtype)
        return case_stats(case)

    def launch(self, seqs, w, block, seed, dtype) -> None:
        import torch

        self.launches += 1
        lay = P.layout(seqs, block, seed)
        kv_heads, dim = lay.k_cache.shape[2:]
        kb = P.tensor(lay.k_cache.reshape(-1, kv_heads, dim), dtype)
        vb = P.tensor(lay.v_cache.reshape(-1, kv_heads, dim), dtype)
        scale = float(dim) ** -0.5
        decode = self.name == "triton:sglang-decode"
        lists, offsets = [], []
        for i, s in enumerate(seqs):
            start, n = self.G.window_kv(s.call.end if decode else s.call.start, w)
            lists.append(lay.slots[i][start:start + n])
            offsets.append(start)
        indptr = torch.from_numpy(np.concatenate([[0], np.cumsum([len(x) for x in lists])]).astype(np.int32))
        # One unread entry past the end: the interpreter cannot copy an empty index tensor to its host view.
        indices = torch.from_numpy(np.concatenate(lists + [np.zeros(1, np.int64)]).astype(np.int64))
        first = min(seqs, key=lambda s: s.call.index)
        q = P.tensor(lay.q, dtype)
        with self.calling("decode_attention_fwd" if decode else "extend_attention_fwd", first.call.index, first.call.op):
            if decode:
                out = self.G.decode(q, kb, vb, indptr, indices, scale)
            else:
                knew = P.tensor(np.concatenate([s.data.k[s.call.start:s.call.end] for s in seqs]), dtype)
                vnew = P.tensor(np.concatenate([s.data.v[s.call.start:s.call.end] for s in seqs]), dtype)
                out = self.G.extend(q, knew, vnew, kb, vb, torch.from_numpy(lay.cu_seqlens_q), indptr, indices,
                                    torch.tensor(offsets, dtype=torch.int32), w, lay.max_q, scale)
        P.check(self.name, f"{'decode' if decode else 'extend'} B={block} {dtype}", seqs, out.float().numpy(),
                lay.cu_seqlens_q, dtype)


def make(rest: str, *, strict: bool = False) -> SglangTarget:
    if rest not in KINDS:
        raise TargetError(f"unknown Triton target 'triton:{rest}'; known: {', '.join('triton:' + k for k in KINDS)}")
    return SglangTarget(rest, strict=strict)
