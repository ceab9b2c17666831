"""What the Triton kernel targets (``triton:*``) share: a case packed into few kernel launches over a paged
KV cache whose unneeded storage is NaN, and the float64 spec reference per sequence.

A kernel call costs 0.5–10 s under Triton's interpreter (DESIGN §6), so a case is not replayed call by
call: **every call of every stream is one sequence of one varlen batch** (:func:`sequences`). The call
that feeds positions ``a .. e-1`` of a stream becomes a sequence with ``e`` keys in the cache and ``e - a``
queries — the first call of a stream is a prefill, a later one-token call a decode, a later ``Chunk(n)`` a
chunked-prefill continuation of its prefix — so one launch drives decode, chunked prefill, prefix
continuation and a ragged batch at once, and a case costs one launch per (window, view) instead of one per op.

The paged layout (:func:`layout`), per sequence, as a sliding-window engine may leave it:

* logical block ``j`` holds positions ``jB .. jB+B-1``; physical blocks are shuffled (from the case seed);
* **evicted positions** — those below ``a - W + 1``, which no query of the call may read — are NaN; a
  logical block that holds only such positions points at the **null block** (physical block 0, all NaN:
  vLLM's block tables point a freed sliding-window block there);
* **unused slots** — positions ``>= e`` in the last block, and the free blocks of the pool — are NaN.

Any read of storage the window excludes therefore shows as NaN in the output, which is never close.
Block sizes are drawn per case (:func:`block_size`) from ``1``, ``16``, ``64``, odd sizes and sizes around
the window (``W - 1``, ``W``, ``W + 1``), so block boundaries fall at, before and after the window's edge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from fuzz.ops import Case
from fuzz.targets.base import HarnessFault
from fuzz.targets.engines import streams as S
from fuzz.targets.engines.base import CountsLaunches, EngineTarget
from impl.engines.triton_env import DTYPES, NOT_DRIVEN  # noqa: F401 - the targets' dtypes, and bf16's reason

#: Tolerances per payload dtype against the float64 reference of the dtype-rounded payload: fp32 kernels
#: accumulate in fp32; fp16 kernels round P (the softmax weights) and the output to fp16 (2**-11 relative).
TOLERANCE = {"float32": (2e-5, 2e-4), "float16": (4e-3, 4e-3)}

#: Head layouts drawn per case: (query heads, kv heads, head size) — grouped-query (2 and 4 per kv head),
#: multi-head, and a head size that is not a power of two (the kernels pad it).
HEADS = ((4, 2, 16), (2, 1, 16), (2, 2, 16), (4, 1, 24))


@dataclass
class Seq:
    """One call of one stream as a sequence of a batch."""

    stream: int
    call: S.Call
    data: S.Payload  # the stream's payload (dtype-rounded)
    ref: S.Reference

    @property
    def keys(self) -> int:
        return self.call.end

    @property
    def first_needed(self) -> int:
        """The oldest position any query of this call may read: ``a - W + 1`` (clamped to 0)."""
        return max(0, self.call.start - self.ref.window + 1)


def dtype_of(case: Case) -> str:
    return case.dtype or "float32"


def heads_of(case: Case) -> tuple[int, int, int]:
    return HEADS[S.case_seed(case, "heads") % len(HEADS)]


def block_size(case: Case, window: int, salt: str = "") -> int:
    """The block size of a (case, window): fixed sizes ``1, 16, 64``, odd ``3, 5, 7, 13``, and ``W - 1, W,
    W + 1``, picked by the case seed."""
    sizes = (1, 16, 64, 3, 5, 7, 13, max(1, window - 1), window, window + 1)
    return sizes[S.case_seed(case, f"block/{window}/{salt}") % len(sizes)]


def sequences(case: Case, heads: int, kv_heads: int, dim: int, dtype: str) -> dict[int, list[Seq]]:
    """Window -> the sequences of every stream with that window, in case order."""
    out: dict[int, list[Seq]] = {}
    for si, (w, ops) in enumerate(case.streams()):
        calls = S.calls(ops)
        if not calls:
            continue
        p = S.payload(S.case_seed(case, str(si)), calls[-1].end, heads, kv_heads, dim)
        if dtype != "float32":
            rd = np.dtype(dtype)
            p = S.Payload(*(x.astype(rd).astype(np.float32) for x in (p.q, p.k, p.v)))
        ref = S.Reference(p, w)
        out.setdefault(w, []).extend(Seq(si, c, p, ref) for c in calls)
    return out


@dataclass
class Layout:
    """A packed batch: numpy arrays in the engine's layout (converted to tensors by the target)."""

    q: np.ndarray  # [T, H, D]
    k_cache: np.ndarray  # [blocks, B, Hkv, D]
    v_cache: np.ndarray
    block_table: np.ndarray  # [seqs, max_blocks] int32 (unused entries: the null block 0)
    cu_seqlens_q: np.ndarray  # [seqs + 1] int32
    seq_lens: np.ndarray  # [seqs] int32
    block: int
    #: Token-level view of the same storage (SGLang's pools index tokens, not blocks): the token slot of
    #: each sequence's position ``p`` is ``slot[s][p]`` (``block_table[s][p // B] * B + p % B``).
    slots: list

    @property
    def max_q(self) -> int:
        return int(np.diff(self.cu_seqlens_q).max())

    @property
    def max_k(self) -> int:
        return int(self.seq_lens.max())


def layout(seqs: Sequence[Seq], block: int, seed: int, poison_evicted: bool = True, whole_blocks: bool = False) -> Layout:
    """The paged cache of ``seqs`` (module docstring): shuffled blocks, the null block 0, NaN where no query
    may read. ``whole_blocks``: only wholly evicted blocks are NaN (the null block); the evicted positions of a
    block still in use keep their keys, as a block-granular engine leaves them (what a finding's note checks)."""
    rng = np.random.default_rng(seed)
    heads, dim = seqs[0].data.q.shape[1:]
    kv_heads = seqs[0].data.k.shape[1]
    need = [-(-s.keys // block) for s in seqs]
    free = 2  # free blocks of the pool, never referenced (NaN)
    total = 1 + sum(need) + free
    phys = rng.permutation(np.arange(1, total))
    k = np.full((total, block, kv_heads, dim), np.nan, np.float32)
    v = np.full_like(k, np.nan)
    table = np.zeros((len(seqs), max(need)), np.int32)
    slots, at = [], 0
    for i, s in enumerate(seqs):
        lo = s.first_needed if poison_evicted else 0
        row = []
        for j in range(need[i]):
            first, last = j * block, min(s.keys, (j + 1) * block)
            if poison_evicted and last <= lo:
                table[i, j] = 0  # the null block: everything in it is evicted
            else:
                b = int(phys[at])
                table[i, j] = b
                keep = slice(first if whole_blocks else max(first, lo), last)
                off = slice(keep.start - first, keep.stop - first)
                k[b, off], v[b, off] = s.data.k[keep], s.data.v[keep]
            at += 1
            row += [int(table[i, j]) * block + x for x in range(block)]
        slots.append(np.asarray(row[:s.keys], np.int64))
    q = np.concatenate([s.data.q[s.call.start:s.call.end] for s in seqs])
    cu = np.concatenate([[0], np.cumsum([s.call.n for s in seqs])]).astype(np.int32)
    lens = np.asarray([s.keys for s in seqs], np.int32)
    return Layout(q, k, v, table, cu, lens, block, slots)


def check(target: str, view: str, seqs: Sequence[Seq], out: np.ndarray, cu: np.ndarray, dtype: str,
          tolerance: dict | None = None) -> None:
    """Each sequence's output rows against its stream's reference rows; the first (in case order) that is not
    within the dtype's tolerance (:data:`TOLERANCE`, or ``tolerance``'s) raises the
    :class:`~fuzz.targets.base.Mismatch` (at its op)."""
    atol, rtol = (tolerance or TOLERANCE)[dtype]
    order = sorted(range(len(seqs)), key=lambda i: seqs[i].call.index)
    for i in order:
        s = seqs[i]
        S.compare(target, s.call, out[cu[i]:cu[i + 1]], s.ref.rows(s.call), atol, rtol,
                  f"{view}, stream {s.stream}, W={s.ref.window}, {len(seqs)} sequences in the batch")


def tensor(x: np.ndarray, dtype: str):
    """``x`` as a torch tensor of ``dtype``, a copy: the interpreter resizes host views of its arguments, which a
    tensor over numpy memory refuses."""
    import torch

    return torch.tensor(np.ascontiguousarray(x), dtype=getattr(torch, dtype))


class KernelTarget(CountsLaunches, EngineTarget):
    """What every ``triton:*`` target is besides its kernel: a model-kind engine target of at most ``window_max``
    and ``max_tokens`` (each launch costs seconds), fp32 and fp16 held to :data:`TOLERANCE`, and its versions
    naming the window glue it drove or restated."""

    kind = "model"
    #: Kernel launches made by this object (each launch adds one; calls/s in the report: :class:`CountsLaunches`;
    #: scripts/kernel_rate.py measures the same over the window tours alone).
    launches = 0
    window_max = 40
    max_tokens = 128
    dtypes = DTYPES

    def tolerances(self) -> dict[str, dict[str, float]]:
        return {f"attention {d}": {"atol": a, "rtol": r} for d, (a, r) in TOLERANCE.items()}

    def kernel_versions(self, glue: str) -> dict[str, str]:
        from importlib import metadata

        import torch

        return {**super().versions(), "triton": metadata.version("triton"), "torch": torch.__version__,
                "window glue": glue}

    def driven_dtype(self, case: Case) -> str:
        """The case's payload dtype; one the interpreter cannot run is a harness fault naming why."""
        dtype = dtype_of(case)
        if dtype not in TOLERANCE:
            raise HarnessFault(self.name, f"dtype {dtype} is not driven: {NOT_DRIVEN.get(dtype, '?')}")
        return dtype
