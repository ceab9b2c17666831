"""``gpu:flash-attn`` and ``gpu:flashinfer``: FlashAttention's and FlashInfer's sliding-window kernels on a CUDA
device (:mod:`impl.engines.gpu_attn`), driven like the ``triton:*`` targets (:mod:`.triton_paged`: every call of
every stream one sequence of a ragged batch, a paged cache with NaN wherever the window forbids a read, the float64
spec reference) — natively, so only where a device is lent (``scripts/gpu_check.sh``); elsewhere each is
unavailable with one line naming what is missing, and no default campaign lists it as runnable.

Per case and window:

* **flash-attn** — ``varlen``: ``flash_attn_varlen_func`` over the whole batch (dense keys per sequence, the
  evicted ones NaN); ``kvcache B=256``: ``flash_attn_with_kvcache`` over the paged cache (its pages are multiples
  of 256), one launch per call length (its queries are ``[batch, n, ...]``);
* **flashinfer** — ``prefill``: ``BatchPrefillWithPagedKVCacheWrapper`` over the whole ragged batch (prefill,
  chunked prefill, prefix continuation), ``decode``: ``BatchDecodeWithPagedKVCacheWrapper`` over the one-token
  calls, both with the case's drawn page size (1, 16, 64, odd, around ``W``).

Dtypes: fp16 and bf16 (neither library takes fp32 payloads: an fp32 case is driven in fp16); head sizes 64 and 128
(FlashInfer's kernels are built for those), grouped-query and multi-head layouts (:data:`HEADS`).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from fuzz.ops import Case
from fuzz.targets.base import RunStats, TargetError
from fuzz.targets.engines import streams as S
from fuzz.targets.engines import triton_paged as P
from fuzz.targets.known import Finding, case_stats

KINDS = ("flash-attn", "flashinfer")
#: (query heads, kv heads, head size).
HEADS = ((4, 2, 64), (2, 1, 64), (8, 1, 128), (2, 2, 128))
#: Per payload dtype, against the float64 reference of the dtype-rounded payload: the output and P are rounded to
#: the dtype (2**-11 relative for fp16, 2**-8 for bf16).
TOLERANCE = {"float16": (4e-3, 4e-3), "bfloat16": (2e-2, 2e-2)}
#: FlashAttention's paged cache takes pages that are multiples of 256 (flash_attn_with_kvcache's docstring).
FA_PAGE = 256
FINDINGS: tuple[Finding, ...] = ()


def _rounded(x: np.ndarray, dtype: str) -> np.ndarray:
    import torch

    return torch.from_numpy(np.ascontiguousarray(x)).to(getattr(torch, dtype)).float().numpy()


def sequences(case: Case, heads: int, kv_heads: int, dim: int, dtype: str) -> dict[int, list[P.Seq]]:
    """:func:`.triton_paged.sequences` with the payload rounded through torch (numpy has no bfloat16)."""
    out: dict[int, list[P.Seq]] = {}
    for si, (w, ops) in enumerate(case.streams()):
        calls = S.calls(ops)
        if not calls:
            continue
        p = S.payload(S.case_seed(case, str(si)), calls[-1].end, heads, kv_heads, dim)
        p = S.Payload(*(_rounded(x, dtype) for x in (p.q, p.k, p.v)))
        ref = S.Reference(p, w)
        out.setdefault(w, []).extend(P.Seq(si, c, p, ref) for c in calls)
    return out


def pages(lay: P.Layout, seqs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FlashInfer's paged-KV description of ``lay``: ``indptr``, ``indices`` (each sequence's pages in logical
    order, the null page 0 for wholly evicted ones) and ``last_page_len``."""
    need = [-(-s.keys // lay.block) for s in seqs]
    indices = np.concatenate([lay.block_table[i, :n] for i, n in enumerate(need)]).astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum(need)]).astype(np.int32)
    last = np.asarray([s.keys - (n - 1) * lay.block for s, n in zip(seqs, need)], np.int32)
    return indptr, indices, last


class GpuKernelTarget(P.KernelTarget):
    """One CUDA library's sliding-window kernels as a campaign target (module docstring)."""

    dtypes = tuple(TOLERANCE)
    findings = FINDINGS

    def __init__(self, kind: str, *, strict: bool = False):
        from impl.engines import gpu_attn as G

        self.G = G
        self.kind_name = kind
        self.distribution, self.package, _ = G.PACKAGES[kind]
        self.release = G.require(kind)
        self.name = self.finding_kind = f"gpu:{kind}"
        self.strict = strict

    def versions(self) -> dict[str, str]:
        import torch

        glue = ("restated: window_size = (W - 1, 0), vllm/v1/attention/backends/flash_attn.py:1096"
                if self.kind_name == "flash-attn" else
                "restated: window_left = W - 1, vllm/v1/attention/backends/flashinfer.py:2069-2072")
        return {self.distribution: self.release, "numpy": np.__version__, "torch": torch.__version__,
                "cuda": str(torch.version.cuda), "window glue": glue}

    def tolerances(self) -> dict[str, dict[str, float]]:
        return {f"attention {d}": {"atol": a, "rtol": r} for d, (a, r) in TOLERANCE.items()}

    def driven_dtype(self, case: Case) -> str:
        dtype = P.dtype_of(case)
        return "float16" if dtype == "float32" else dtype  # neither library takes fp32 payloads

    def run_case(self, case: Case) -> RunStats:
        dtype = self.driven_dtype(case)
        heads, kv_heads, dim = HEADS[S.case_seed(case, "gpu-heads") % len(HEADS)]
        seed = S.case_seed(case)
        for w, seqs in sequences(case, heads, kv_heads, dim, dtype).items():
            if self.kind_name == "flash-attn":
                self._fa_varlen(seqs, w, dtype)
                by_len: dict[int, list[P.Seq]] = defaultdict(list)
                for s in seqs:
                    by_len[s.call.n].append(s)
                for n, group in sorted(by_len.items()):
                    self._fa_kvcache(group, n, w, seed + n, dtype)
            else:
                block = P.block_size(case, w, "flashinfer")
                self._fi(seqs, w, block, seed, dtype, decode=False)
                one = [s for s in seqs if s.call.n == 1]
                if one:
                    self._fi(one, w, block, seed + 1, dtype, decode=True)
        return case_stats(case)

    def _cuda(self, x: np.ndarray, dtype: str):
        return P.tensor(x, dtype).cuda()

    def _check(self, view, seqs, out, cu, dtype) -> None:
        P.check(self.name, f"{view} {dtype}", seqs, out.float().cpu().numpy(), cu, dtype, TOLERANCE)

    def _fa_varlen(self, seqs, w, dtype) -> None:
        import torch

        self.launches += 1
        keys, vals = [], []
        for s in seqs:
            k, v = s.data.k[:s.keys].copy(), s.data.v[:s.keys].copy()
            k[:s.first_needed] = np.nan  # evicted: no query of the call may read them
            v[:s.first_needed] = np.nan
            keys.append(k)
            vals.append(v)
        q = np.concatenate([s.data.q[s.call.start:s.call.end] for s in seqs])
        cu_q = np.concatenate([[0], np.cumsum([s.call.n for s in seqs])]).astype(np.int32)
        cu_k = np.concatenate([[0], np.cumsum([s.keys for s in seqs])]).astype(np.int32)
        scale = float(q.shape[2]) ** -0.5
        first = min(seqs, key=lambda s: s.call.index)
        with self.calling("flash_attn_varlen_func", first.call.index, first.call.op):
            out = self.G.fa_varlen(self._cuda(q, dtype), self._cuda(np.concatenate(keys), dtype),
                                   self._cuda(np.concatenate(vals), dtype), torch.from_numpy(cu_q).cuda(),
                                   torch.from_numpy(cu_k).cuda(), int(np.diff(cu_q).max()), int(np.diff(cu_k).max()),
                                   w, scale)
        self._check("varlen", seqs, out, cu_q, dtype)

    def _fa_kvcache(self, seqs, n, w, seed, dtype) -> None:
        import torch

        self.launches += 1
        lay = P.layout(seqs, FA_PAGE, seed)
        heads, dim = lay.q.shape[1:]
        q = self._cuda(lay.q.reshape(len(seqs), n, heads, dim), dtype)
        first = min(seqs, key=lambda s: s.call.index)
        with self.calling("flash_attn_with_kvcache", first.call.index, first.call.op):
            out = self.G.fa_kvcache(q, self._cuda(lay.k_cache, dtype), self._cuda(lay.v_cache, dtype),
                                    torch.from_numpy(lay.block_table).cuda(), torch.from_numpy(lay.seq_lens).cuda(),
                                    w, float(dim) ** -0.5)
        self._check(f"kvcache B={FA_PAGE}, {len(seqs)} requests of {n} queries", seqs,
                    out.reshape(-1, heads, dim), lay.cu_seqlens_q, dtype)

    def _fi(self, seqs, w, block, seed, dtype, decode: bool) -> None:
        import torch

        self.launches += 1
        lay = P.layout(seqs, block, seed)
        # plan() reads the indptrs and last page lengths on the host (it copies them to the device itself)
        indptr, indices, last = (torch.from_numpy(x) for x in pages(lay, seqs))
        indices = indices.cuda()
        q = self._cuda(lay.q, dtype)
        kc, vc = self._cuda(lay.k_cache, dtype), self._cuda(lay.v_cache, dtype)
        scale = float(lay.q.shape[2]) ** -0.5
        first = min(seqs, key=lambda s: s.call.index)
        what = "BatchDecodeWithPagedKVCacheWrapper" if decode else "BatchPrefillWithPagedKVCacheWrapper"
        with self.calling(what, first.call.index, first.call.op):
            if decode:
                out = self.G.fi_decode(q, kc, vc, indptr, indices, last, w, scale)
            else:
                out = self.G.fi_prefill(q, kc, vc, torch.from_numpy(lay.cu_seqlens_q), indptr, indices, last,
                                        w, scale)
        self._check(f"{'decode' if decode else 'prefill'} B={block}", seqs, out, lay.cu_seqlens_q, dtype)


def make_flash_attn() -> GpuKernelTarget:
    return GpuKernelTarget("flash-attn")


def make_flashinfer() -> GpuKernelTarget:
    return GpuKernelTarget("flashinfer")


def make(rest: str, *, strict: bool = False) -> GpuKernelTarget:
    if rest not in KINDS:
        raise TargetError(f"unknown GPU kernel target 'gpu:{rest}'; known: {', '.join('gpu:' + k for k in KINDS)}")
    return GpuKernelTarget(rest, strict=strict)
