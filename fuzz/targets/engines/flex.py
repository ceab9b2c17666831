"""``flex:eager``, ``flex:compiled``, ``flex:dynamic``: torch FlexAttention with the sliding-window ``mask_mod``
users write (:mod:`impl.engines.flex`), held to the float64 spec reference.

Every call of every stream is one FlexAttention call: its queries (positions ``a .. e-1``) against a cache of
its keys ``0 .. e-1`` (``q_len != kv_len`` for decode and chunked prefill). Drawn from the case seed: the block size (16, 32, 64, 128), the
head layout (grouped-query or not: ``enable_gqa``), and a ``score_mod`` (a tanh softcap, which the float64
reference applies too) on half the cases. fp32 only (the reference's tolerance is fp32's).

A compile failure (``flex:compiled``, ``flex:dynamic``) is retried with the same shapes and the window left
out of the mask: if that compiles, the failure is the sliding window's — a crash finding naming both; if it
fails too, it is reported as a crash of the compile itself.
"""

from __future__ import annotations

import numpy as np

from fuzz.ops import Case
from fuzz.targets.base import Crash, HarnessFault, RunStats, TargetError
from fuzz.targets.engines import streams as S
from fuzz.targets.engines import triton_paged as P
from fuzz.targets.engines.base import CountsLaunches, EngineTarget
from fuzz.targets.known import Finding, case_stats
from pyspec import attention as A

ATOL, RTOL = 2e-5, 2e-4
SOFTCAP = 20.0


def _softcap_drawn(case: Case) -> bool:
    """The case draws the softcap ``score_mod`` (a closure over a Python float, as model code writes it)."""
    return bool(S.case_seed(case) % 2) and any(S.calls(ops) for _, ops in case.streams())


#: Written-up divergences (docs/findings/<id>.md).
FINDINGS: tuple[Finding, ...] = (
    Finding("torch-flex-dynamic-float-score-mod", frozenset({"flex:dynamic"}), ("2.13",), ("2.13.0+cpu",),
            _softcap_drawn, "a score_mod reading a Python float (the softcap), compiled with dynamic=True",
            failure=lambda e: "unbacked_bindings" in str(e),
            upstream="https://github.com/pytorch/pytorch/issues/147756"),
)


class FlexTarget(CountsLaunches, EngineTarget):
    kind = "model"
    #: Kernel launches made by this object (calls/s in the report: :class:`CountsLaunches`; scripts/kernel_rate.py).
    launches = 0
    distribution = package = "torch"
    findings = FINDINGS

    def __init__(self, mode: str, *, strict: bool = False):
        from impl.engines import flex

        self.F = flex
        self.mode = mode
        self.release = flex.release()
        self.name = self.finding_kind = f"flex:{mode}"
        self.strict = strict
        # A compile costs 30-120 s per new shape on a 2-core CPU: the compiled modes take short cases.
        self.window_max, self.max_tokens = (40, 128) if mode != "compiled" else (16, 48)

    def tolerances(self) -> dict[str, dict[str, float]]:
        return {"attention": {"atol": ATOL, "rtol": RTOL}}

    def run_case(self, case: Case) -> RunStats:
        heads, kv_heads, dim = P.heads_of(case)
        seed = S.case_seed(case)
        cap = SOFTCAP if seed % 2 else None
        block = self.F.BLOCK_SIZES[S.case_seed(case, "flex-block") % len(self.F.BLOCK_SIZES)]
        for w, seqs in P.sequences(case, heads, kv_heads, dim, "float32").items():
            self._call(w, seqs, block, cap)
        return case_stats(case)

    def _call(self, w, seqs, block, cap) -> None:
        for s in sorted(seqs, key=lambda s: s.call.index):
            self._one(w, s, block, cap)

    def _one(self, w, s, block, cap) -> None:
        import torch

        self.launches += 1
        a, e = s.call.start, s.call.end
        lq, lk = e - a, e
        if self.mode == "compiled":  # pad to few static shapes; padded keys are masked, padded rows ignored
            pq, pk = -(-lq // self.F.PAD) * self.F.PAD, -(-lk // self.F.PAD) * self.F.PAD
        else:
            pq, pk = lq, lk
        H, Hkv, D = s.data.q.shape[1], s.data.k.shape[1], s.data.q.shape[2]
        q = np.zeros((pq, H, D), np.float32)
        k = np.zeros((pk, Hkv, D), np.float32)
        v = np.zeros_like(k)
        q[:lq], k[:lk], v[:lk] = s.data.q[a:e], s.data.k[:e], s.data.v[:e]
        tq, tk, tv = (torch.tensor(x).permute(1, 0, 2)[None].contiguous() for x in (q, k, v))
        off, valid = torch.tensor(a), torch.tensor(lk)
        score = self.F.softcap_mod(cap) if cap else None
        what = f"flex_attention ({self.mode}, BLOCK_SIZE={block}, W={w}, q_len {lq}, kv_len {lk}{', softcap' if cap else ''})"
        try:
            with self.calling(what, s.call.index, s.call.op):
                out = self.F.attend(self.mode, tq, tk, tv, self.F.mask_mod(w, off, valid), block, score)
        except Exception as err:  # noqa: BLE001 - a compile failure: is it the window's?
            if self.mode == "eager":
                raise
            cause = getattr(err, "error", err)
            if self.F.recompile_limit_hit(cause):
                raise HarnessFault(self.name, f"torch {self.release}: dynamo's recompile limit "
                                              f"({self.F.RECOMPILE_LIMIT}) is reached in this process: past it "
                                              "flex_attention would run eagerly, so the compiled target stops "
                                              "(a new process compiles again)") from err
            try:
                self.F.attend(self.mode, tq, tk, tv, self.F.causal_mod(off, valid), block, score)
                without = "the same call without the window compiles and runs"
            except Exception as e2:  # noqa: BLE001
                without = f"without the window it fails too ({type(e2).__name__})"
            raise Crash(self.name, s.call.index, s.call.op,
                        f"torch {self.release}: {what} raised {type(cause).__name__}: "
                        f"{(str(cause).splitlines() or [''])[0][:300]}; {without} (the transformers path: "
                        f"docs/findings/hf-flex-attention-sliding-compile.md)") from err
        got = out[0].permute(1, 0, 2).float().numpy()[:lq]
        pos = np.arange(e)
        want = A.attention(s.data.q[:e], s.data.k[:e], s.data.v[:e], pos, pos, w, softcap=cap)[a:e]
        S.compare(self.name, s.call, got, want, ATOL, RTOL,
                  f"{self.mode} BLOCK_SIZE={block}{' softcap' if cap else ''}, stream {s.stream}, W={w}")


def make(rest: str, *, strict: bool = False) -> FlexTarget:
    from impl.engines import flex

    if rest not in flex.MODES:
        raise TargetError(f"unknown FlexAttention target 'flex:{rest}'; known: {', '.join('flex:' + m for m in flex.MODES)}")
    return FlexTarget(rest, strict=strict)


def instances() -> list[str]:
    """What a default campaign lists: the eager mode only. The compiled modes compile per shape (0.1 examples/s
    measured on 2 cores), so listed they would take most of a 60 s default campaign from every other target and
    still not reach their own generated phase; they run when named (``--target flex:compiled``)."""
    return ["flex:eager"]
