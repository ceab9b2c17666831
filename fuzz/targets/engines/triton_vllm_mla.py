"""``triton:vllm-mla``: vLLM's Triton MLA decode kernel (``decode_attention_fwd`` with ``is_mla=True``) through the
release's own ``TritonMLAImpl.forward_mqa`` (:mod:`impl.engines.triton_vllm_mla`), under Triton's interpreter, over
a paged latent cache with NaN wherever the window forbids a read (:mod:`.triton_paged`), held to the float64 spec
reference.

MLA caches one latent vector per token — ``kv_lora_rank`` compressed KV columns and ``rope_dim`` rotary key
columns — shared by every query head (one "kv head": multi-query), and its values are the key's first
``kv_lora_rank`` columns. The reference is the spec's attention with those keys and values (:func:`_payload`).

vLLM applies a window to MLA **on the decode path only** (prefill raises: ``triton_mla.py:271-275``), so every call
of every stream is driven as what ``forward_mqa`` takes: a causal decode block of ``n`` query rows over the
stream's ``0 .. e-1`` keys (a one-token call is a plain decode step; a stream's first call a block over an empty
prefix). Per case and window:

* **mqa** — ``forward_mqa`` itself, one launch per call length ``n`` (its batches are uniform: ``B %
  num_decodes == 0``), the calls of that length of every stream as its requests (ragged ``seq_lens``);
* **split** — ``decode_attention_fwd`` over every query row at once with 4 KV splits (what ``forward_mqa``
  picks when min(longest sequence, W) is 1,536–2,559 keys), so the window's division into splits (``kv_len_per_split`` over
  ``seq_len - window_start``) is checked on short rows too.

Drawn per case: the block size (:func:`.triton_paged.block_size`; the backend itself takes multiples of 16,
``triton_mla.py:125-133``, the kernel any), the head layout (:data:`LAYOUTS`) and the dtype (fp32 or fp16; bf16 is
not driven: the interpreter does not support it).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from fuzz.ops import Case
from fuzz.targets.base import RunStats, TargetError
from fuzz.targets.engines import streams as S
from fuzz.targets.engines import triton_paged as P
from fuzz.targets.known import Finding, case_stats

#: (query heads, kv_lora_rank, rope_dim): grouped MLA heads (``kv_group_num = heads``, one head block of 16 or
#: two), one head (``kv_group_num == 1``: decode_attention_fwd's MHA kernel, which loads V separately), and
#: NoPE MLA (no rotary columns: ``BLOCK_DPE = 0``).
LAYOUTS = ((4, 16, 8), (20, 16, 8), (1, 16, 8), (2, 32, 0))
#: KV splits of the **split** view.
SPLITS = 4

#: Written-up divergences (docs/findings/<id>.md): none found on vLLM 0.34.0.
FINDINGS: tuple[Finding, ...] = ()


def _payload(case: Case, stream: int, length: int, heads: int, lora: int, rope: int, dtype: str):
    """``(layout payload, reference payload)`` of one stream: queries ``[T, H, lora + rope]``, the latent cache rows
    ``[T, 1, lora + rope]``; the layout's ``v`` is the whole row (the cache holds nothing else), the reference's
    its first ``lora`` columns (``kv_c_cache = cache[..., :kv_lora_rank]``, ``triton_mla.py:325``)."""
    p = S.payload(S.case_seed(case, str(stream)), length, heads, 1, lora + rope)
    q, k = p.q, p.k
    if dtype != "float32":
        q, k = (x.astype(np.dtype(dtype)).astype(np.float32) for x in (q, k))
    return S.Payload(q, k, k), S.Payload(q, k, np.ascontiguousarray(k[..., :lora]))


class VllmMlaTarget(P.KernelTarget):
    distribution = package = "vllm"
    findings = FINDINGS

    def __init__(self, *, strict: bool = False):
        from impl.engines import triton_vllm_mla as M

        self.M = M
        self.release = M.V.release()
        M.ops()
        self.name = self.finding_kind = "triton:vllm-mla"
        self.strict = strict

    def versions(self) -> dict[str, str]:
        return self.kernel_versions(self.M.glue())

    def sequences(self, case: Case, heads: int, lora: int, rope: int, dtype: str) -> dict[int, list[P.Seq]]:
        scale = float(lora + rope) ** -0.5
        out: dict[int, list[P.Seq]] = {}
        for si, (w, ops) in enumerate(case.streams()):
            calls = S.calls(ops)
            if not calls:
                continue
            data, refdata = _payload(case, si, calls[-1].end, heads, lora, rope, dtype)
            ref = S.Reference(refdata, w, scale=scale)
            out.setdefault(w, []).extend(P.Seq(si, c, data, ref) for c in calls)
        return out

    def run_case(self, case: Case) -> RunStats:
        dtype = self.driven_dtype(case)
        heads, lora, rope = LAYOUTS[S.case_seed(case, "mla-heads") % len(LAYOUTS)]
        seed = S.case_seed(case)
        for w, seqs in self.sequences(case, heads, lora, rope, dtype).items():
            by_len: dict[int, list[P.Seq]] = defaultdict(list)
            for s in seqs:
                by_len[s.call.n].append(s)
            block = P.block_size(case, w, "mqa")
            for n, group in sorted(by_len.items()):
                self._mqa(group, n, w, block, seed + n, dtype, lora, rope)
            self._split(seqs, w, P.block_size(case, w, "split"), seed, dtype, lora, rope)
        return case_stats(case)

    def _mqa(self, seqs, n, w, block, seed, dtype, lora, rope) -> None:
        import torch

        self.launches += 1
        lay = P.layout(seqs, block, seed)
        scale = float(lora + rope) ** -0.5
        first = min(seqs, key=lambda s: s.call.index)
        cache = P.tensor(lay.k_cache[:, :, 0, :], dtype)
        table, lens = torch.from_numpy(lay.block_table), torch.from_numpy(lay.seq_lens)
        with self.calling("TritonMLAImpl.forward_mqa", first.call.index, first.call.op):
            out = self.M.forward_mqa(P.tensor(lay.q, dtype), cache, table, lens, n, w, lora, scale)
        P.check(self.name, f"mqa B={block} {dtype}, {len(seqs)} requests of {n} rows, {lay.q.shape[1]} heads, "
                           f"lora {lora} rope {rope}", seqs, out.float().numpy(), lay.cu_seqlens_q, dtype)

    def _split(self, seqs, w, block, seed, dtype, lora, rope) -> None:
        """Every query row of ``seqs`` one row of a ``decode_attention_fwd`` launch with :data:`SPLITS` splits: row
        ``t`` of a call reads its stream's block table with ``seq_len = t + 1``."""
        import torch

        self.launches += 1
        lay = P.layout(seqs, block, seed)
        scale = float(lora + rope) ** -0.5
        reps = np.asarray([s.call.n for s in seqs])
        table = torch.from_numpy(np.repeat(lay.block_table, reps, axis=0))
        lens = torch.from_numpy(np.concatenate([np.arange(s.call.start + 1, s.call.end + 1) for s in seqs])
                                .astype(np.int32))
        first = min(seqs, key=lambda s: s.call.index)
        with self.calling("decode_attention_fwd (split)", first.call.index, first.call.op):
            out = self.M.decode_rows(P.tensor(lay.q, dtype), P.tensor(lay.k_cache[:, :, 0, :], dtype), table, lens,
                                     w, lora, scale, SPLITS)
        P.check(self.name, f"split x{SPLITS} B={block} {dtype}, {lay.q.shape[1]} heads, lora {lora} rope {rope}",
                seqs, out.float().numpy(), lay.cu_seqlens_q, dtype)


def make(rest: str, *, strict: bool = False) -> VllmMlaTarget:
    if rest != "vllm-mla":
        raise TargetError(f"unknown Triton target 'triton:{rest}'")
    return VllmMlaTarget(strict=strict)
