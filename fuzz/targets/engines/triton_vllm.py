"""``triton:vllm-unified``: vLLM's ``unified_attention`` Triton kernel (:mod:`impl.engines.triton_vllm`) under
Triton's interpreter, over a paged cache with NaN wherever the window forbids a read
(:mod:`.triton_paged`), held to the float64 spec reference.

Per case and window (every call of every stream one sequence of the batch, :mod:`.triton_paged`):

* **2d** — every sequence in one launch without the split-KV buffers (vLLM's 2D kernel: prefill, chunked
  prefill, prefix continuation and decode together);
* **3d** — the sequences of at most ``MAX_3D_QUERY_LEN`` queries with the backend's split-KV buffers, in
  batches small enough that vLLM picks the 3D kernel (``num_seqs * cdiv(max_q, BLOCK_Q) <= seq_threshold_3D``);
  that the segment buffers were written is checked (else the view did not test what it says: a harness fault).

Each view draws its own block size (:func:`.triton_paged.block_size`); the case's dtype is fp32 or fp16
(bf16 is not driven: the interpreter does not support it).
"""

from __future__ import annotations

import numpy as np

from fuzz.ops import Case
from fuzz.targets.base import HarnessFault, RunStats, TargetError
from fuzz.targets.engines import streams as S
from fuzz.targets.engines import triton_paged as P
from fuzz.targets.engines.base import probe_once
from fuzz.targets.known import Finding, case_stats

KINDS = ("vllm-unified", "vllm-prefix")
_PROBES: dict = {}

def _chunk_after_eviction(case: Case) -> bool:
    """A multi-token call whose first query cannot see position 0 (``start - W + 1 > 0``): the batch's cache holds
    evicted storage before that call's window."""
    return any(any(c.n > 1 and c.start - w + 1 > 0 for c in S.calls(ops)) for w, ops in case.streams())


#: Written-up divergences (docs/findings/<id>.md).
FINDINGS: tuple[Finding, ...] = (
    Finding("vllm-prefix-prefill-reads-evicted-blocks", frozenset({"triton:vllm-prefix"}), ("0.34",), ("0.34.0",),
            _chunk_after_eviction, "a chunked-prefill call of >= 2 tokens after positions left the window",
            failure=lambda e: "got nan" in str(e)),
)


class VllmUnifiedTarget(P.KernelTarget):
    distribution = package = "vllm"
    findings = FINDINGS

    def __init__(self, kind: str = "vllm-unified", *, strict: bool = False):
        from impl.engines import triton_vllm as V

        self.V = V
        self.release = V.release()
        V.ops() if kind == "vllm-unified" else V.prefix_ops()
        self.name = self.finding_kind = f"triton:{kind}"
        self.strict = strict

    def versions(self) -> dict[str, str]:
        return self.kernel_versions(self.V.glue() if self.name == "triton:vllm-unified" else self.V.prefix_glue())

    def run_case(self, case: Case) -> RunStats:
        dtype = self.driven_dtype(case)
        heads, kv_heads, dim = P.heads_of(case)
        seed = S.case_seed(case)
        for w, seqs in P.sequences(case, heads, kv_heads, dim, dtype).items():
            if self.name == "triton:vllm-prefix":
                if any(s.call.n > 1 for s in seqs):
                    self._prefix("mixed", seqs, P.block_size(case, w, "mixed"), seed, dtype)
                continue
            self._launch("2d", seqs, P.block_size(case, w, "2d"), seed, dtype, split=False)
            thr, _, max3 = self.V.split_kv_params(kv_heads)
            short = [s for s in seqs if s.call.n <= max3]
            block_q = (16 if heads // kv_heads <= 16 else heads // kv_heads) // (heads // kv_heads)
            per = max(1, thr // -(-max3 // block_q))  # sequences per 3D launch (vLLM's threshold)
            for i in range(0, len(short), per):
                self._launch("3d", short[i:i + per], P.block_size(case, w, "3d"), seed + i, dtype, split=True)
        return case_stats(case)

    def _launch(self, view, seqs, block, seed, dtype, split) -> None:
        self.launches += 1
        lay = P.layout(seqs, block, seed)
        scale = float(lay.q.shape[2]) ** -0.5
        args = [P.tensor(lay.q, dtype), P.tensor(lay.k_cache, dtype), P.tensor(lay.v_cache, dtype)]
        import torch

        cu, lens, table = (torch.from_numpy(x) for x in (lay.cu_seqlens_q, lay.seq_lens, lay.block_table))
        first = min(seqs, key=lambda s: s.call.index)
        with self.calling(f"unified_attention ({view})", first.call.index, first.call.op):
            out, wrote = self.V.unified(*args, cu, lens, table, seqs[0].ref.window, scale, split, lay.max_q, lay.max_k)
        if split and not wrote:
            raise HarnessFault(self.name, f"the 3d view did not take vLLM's split-KV path ({len(seqs)} sequences, "
                                          f"max {lay.max_q} queries)")
        P.check(self.name, f"{view} B={block} {dtype}", seqs, out.float().numpy(), lay.cu_seqlens_q, dtype)


    def _prefix(self, view, seqs, block, seed, dtype) -> None:
        """``triton:vllm-prefix``: the whole batch through ``context_attention_fwd`` as ``chunked_prefill_paged_decode``
        calls it; the multi-query sequences are checked (the one-query ones are the op's decode kernel's, which
        needs a ROCm device: :mod:`impl.engines.triton_vllm`)."""
        import torch

        self.launches += 1
        lay = P.layout(seqs, block, seed)
        scale = float(lay.q.shape[2]) ** -0.5
        knew = P.tensor(np.concatenate([s.data.k[s.call.start:s.call.end] for s in seqs]), dtype)
        vnew = P.tensor(np.concatenate([s.data.v[s.call.start:s.call.end] for s in seqs]), dtype)
        cu, lens, table = (torch.from_numpy(x) for x in (lay.cu_seqlens_q, lay.seq_lens, lay.block_table))
        first = min(seqs, key=lambda s: s.call.index)
        with self.calling(f"context_attention_fwd ({view})", first.call.index, first.call.op):
            out = self.V.context_attention(P.tensor(lay.q, dtype), knew, vnew, P.tensor(lay.k_cache, dtype),
                                         P.tensor(lay.v_cache, dtype), table, cu, lens, lay.max_q, lay.max_k,
                                         seqs[0].ref.window, scale)
        multi = [i for i, s in enumerate(seqs) if s.call.n > 1]
        got = out.float().numpy()
        rows = np.concatenate([got[lay.cu_seqlens_q[i]:lay.cu_seqlens_q[i + 1]] for i in multi])
        cu = np.concatenate([[0], np.cumsum([seqs[i].call.n for i in multi])])
        P.check(self.name, f"{view} B={block} {dtype}, {len(seqs) - len(multi)} one-query sequences beside",
                [seqs[i] for i in multi], rows, cu, dtype)


def make(rest: str, *, strict: bool = False) -> VllmUnifiedTarget:
    if rest not in KINDS:
        raise TargetError(f"unknown Triton target 'triton:{rest}'; known: {', '.join('triton:' + k for k in KINDS)}")
    return VllmUnifiedTarget(rest, strict=strict)
