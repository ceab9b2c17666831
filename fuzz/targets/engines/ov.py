"""``ov:paged`` and ``ov:<model_type>``: OpenVINO's PagedAttention operator as a one-op model on the CPU plugin
(:mod:`impl.engines.ov`), and tiny seeded Hugging Face models converted to OpenVINO IR
(:mod:`impl.engines.ov_models`, ``fuzz.targets.engines.ov_models``), held to the float64 spec reference.

``ov:paged`` — per case and window, **every call of every stream is one sequence of one op call**
(:mod:`.triton_paged`): the call feeding positions ``a .. e-1`` is a sequence with ``past_lens = a`` and ``e - a``
new tokens, so one call drives prefill, decode, chunked prefill and a ragged batch of several sequences at once.
The cache is paged with the block size the CPU plugin forces (32: read from the compiled model), physical blocks
shuffled from the case seed, and NaN **where the op allows it**: the unused slots after each sequence's last key
and the pool's free blocks. The plugin reads every block of a sequence's table, those wholly behind the window
included (a NaN there reaches the output although its weight is zero; the op spec's ``-1`` sentinel for such a
block gives NaN as well), so evicted positions keep their keys and the comparison catches a window that admits
them. Head layouts are drawn per case (GQA 2:1 and 4:1, MHA, head size 24); fp32 (cache and compute) and fp16
(fp16 payload and fp16 cache, compute in f32: the plugin's f16 compute path needs a bf16 cache on this CPU).
"""

from __future__ import annotations

import numpy as np

from fuzz.ops import Case
from fuzz.targets.base import RunStats, TargetError
from fuzz.targets.engines import streams as S
from fuzz.targets.engines import triton_paged as P
from fuzz.targets.engines.base import probe_once
from fuzz.targets.known import Finding, case_stats

_PROBES: dict = {}
#: Written-up divergences (docs/findings/<id>.md): none found on 2026.4.1 (the report names what was driven).
FINDINGS: tuple[Finding, ...] = ()


class PagedTarget(P.KernelTarget):
    """``ov:paged``: a call costs ~1-3 ms, so windows run past two blocks (``W`` up to 80: above 32 and not a
    multiple of it) and streams up to 200 tokens."""

    distribution = package = "openvino"
    findings = FINDINGS
    window_max = 80
    max_tokens = 200
    name = finding_kind = "ov:paged"

    def __init__(self, *, strict: bool = False):
        from impl.engines import ov

        self.ov = ov
        self.release = ov.release()
        self.strict = strict

    def versions(self) -> dict[str, str]:
        m = self.ov.paged_model(2, 1, 16, "float32")
        return {**super().versions(), "window glue": "sliding_window = W (PagedAttention op spec, Phase 3: "
                "start = qpos + 1 - sw)", "block size": f"{m.block} (forced by the CPU plugin)",
                "inputs": str(13 + self.ov.arity())}

    def run_case(self, case: Case) -> RunStats:
        dtype = self.driven_dtype(case)
        heads, kv_heads, dim = P.heads_of(case)
        seed = S.case_seed(case)
        threads = 1 + seed % 2
        m = self.ov.paged_model(heads, kv_heads, dim, dtype, threads)
        for w, seqs in P.sequences(case, heads, kv_heads, dim, dtype).items():
            self.launches += 1
            self._call(m, w, seqs, seed + w, dtype)
        return case_stats(case)

    def _call(self, m, w, seqs, seed, dtype) -> None:
        lay = P.layout(seqs, m.block, seed, poison_evicted=False)
        need = [-(-s.keys // m.block) for s in seqs]
        indices = np.concatenate([lay.block_table[i, :n] for i, n in enumerate(need)])
        begins = np.concatenate([[0], np.cumsum(need)])
        hd = lay.k_cache.shape[2] * lay.k_cache.shape[3]
        knew = np.concatenate([s.data.k[s.call.start:s.call.end] for s in seqs]).reshape(-1, hd)
        vnew = np.concatenate([s.data.v[s.call.start:s.call.end] for s in seqs]).reshape(-1, hd)
        kc, vc = (np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in (lay.k_cache, lay.v_cache))
        first = min(seqs, key=lambda s: s.call.index)
        with self.calling(f"PagedAttentionExtension ({len(seqs)} sequences)", first.call.index, first.call.op):
            out = m.run(lay.q.reshape(lay.q.shape[0], -1), knew, vnew, kc, vc, [s.call.start for s in seqs],
                        lay.cu_seqlens_q, indices, begins, w, lay.max_k)
        P.check(self.name, f"B={m.block} {dtype}", seqs, out.reshape(lay.q.shape), lay.cu_seqlens_q, dtype)


def _plain_probe() -> None:
    """The probe's call with no window (``sliding_window = 0``): the second question of a probe that died."""
    from impl.engines import ov

    m = ov.paged_model(2, 1, 16, "float32")
    z = np.zeros((1, 32), np.float32)
    m.run(z, z[:, :16], z[:, :16], np.zeros((1, 1, m.block, 16)), np.zeros((1, 1, m.block, 16)), [0], [0, 1], [0],
          [0, 1], 0, 1)


def make(rest: str, *, strict: bool = False):
    """``ov:paged`` / ``ov:<model_type>``; unavailable (with the install line) without openvino."""
    from impl.engines import ov

    if rest == "paged":
        probe_once(_PROBES, "paged", ov.probe, plain=_plain_probe)
        return PagedTarget(strict=strict)
    from fuzz.targets.engines import ov_models

    if rest not in ov_models.ARCHS:
        raise TargetError(f"unknown OpenVINO target 'ov:{rest}'; known: ov:paged, "
                          + ", ".join("ov:" + a for a in ov_models.ARCHS))
    return ov_models.make(rest, strict=strict)


def instances() -> list[str]:
    from fuzz.targets.engines import ov_models

    return ["ov:paged"] + [f"ov:{a}" for a in ov_models.ARCHS]
