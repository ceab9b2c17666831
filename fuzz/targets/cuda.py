"""GPU targets for the CUDA ring KV cache (``csrc/ringkv_cuda.cu``).

* ``cuda-ring``: the real kernels, contents read back through the gather kernel,
  rotating fp32 / fp16 / bf16 (16-bit dtypes carry the float32 payload bit-exactly as
  pairs of 16-bit words, since append/gather copy raw bytes). Neighbouring sequences
  and layers must stay untouched.
* ``cuda-decoder``: the fused decode-attention kernel after every op versus a
  float64 reference of windowed attention over the *full* history masked with the
  spec's ``inWindow`` (``impl.decoder.window_mask``/``attend``), within
  :data:`DECODE_TOLERANCES`; unfilled slots hold NaN, so reading one fails loudly.

The CPU sibling ``cuda-index`` (the kernels' index math) is :mod:`fuzz.targets.cuda_index`.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from fuzz.ops import Case, Reset
from fuzz.oracle import SpecStream
from fuzz.targets.base import Mismatch, RunStats, Target
from fuzz.targets.progress import OP
from impl.errors import Unavailable
from fuzz.targets.cache import AuditedCacheTarget
from fuzz.targets.ring_errors import MethodContract


#: Named tolerances of the decode-attention output versus the float64 reference built from
#: the same dtype-rounded inputs: |out - ref| <= atol + rtol * |ref|. The error is the
#: output rounding (half an ulp: 2^-9 relative for bf16, 2^-12 for fp16) plus fp32
#: accumulation; a window off by one key moves the output by ~1/W of a value's scale.
DECODE_TOLERANCES: dict[str, dict[str, float]] = {
    "bf16": {"atol": 1e-2, "rtol": 1e-2},
    "fp16": {"atol": 2e-3, "rtol": 2e-3},
    "fp32": {"atol": 1e-5, "rtol": 1e-4},
}


def _gpu_modules():
    """``(torch, impl.cuda_ring)``, or :class:`~impl.errors.Unavailable` with the reason."""
    try:
        import torch
    except ImportError as e:
        raise Unavailable(f"no CUDA device: torch is not installed ({e})") from e
    if not torch.cuda.is_available():
        raise Unavailable(f"no CUDA device: torch {torch.__version__} sees none")
    from impl import cuda_ring

    cuda_ring.load()  # raises CudaUnavailable (an Unavailable) naming the missing library
    return torch, cuda_ring


class CudaRingCache:
    """The CUDA ring of one (sequence, layer) in a ``[B][L][H][W][D]`` device cache, as a
    Python protocol cache. Storage is reused across resets and window changes, so stale
    bytes from earlier streams are present (and must never be read)."""

    B, L, H = 3, 2, 2
    SEQ, LAYER = 1, 1
    SENTINEL = 0xFF  # every byte of never-written storage (a NaN pattern in every dtype)

    def __init__(self, dtype: str = "fp32", width: int = 16) -> None:
        self.torch, self.cr = _gpu_modules()
        self.dtype, self.width = dtype, width
        self.esize = self.cr.DTYPES[dtype][2]
        self.d = width * 4 // self.esize // self.H  # head dim in elements of the cache dtype
        self.ring = None
        self.window: int | None = None
        self.storage = None  # uint8: K half then V half

    def _regions(self):
        """Byte ranges ``(start, end, is_stream_region)`` of every (sequence, layer), K and V."""
        size = self.H * self.window * self.d * self.esize
        for half in range(2):
            for b in range(self.B):
                for layer in range(self.L):
                    r = half * self.per + (b * self.L + layer) * size
                    yield r, r + size, (b, layer) == (self.SEQ, self.LAYER)

    def _open(self, window: int) -> None:
        torch = self.torch
        per = self.B * self.L * self.H * window * self.d * self.esize
        if self.storage is None or 2 * per > self.storage.numel():
            old = self.storage
            self.storage = torch.full((2 * per,), self.SENTINEL, dtype=torch.uint8, device="cuda")
            if old is not None:
                self.storage[: old.numel()] = old  # keep stale bytes
        tdt = self.cr.torch_dtype(self.dtype)
        shape = (self.B, self.L, self.H, window, self.d)
        kc = self.storage[:per].view(tdt).view(shape)
        vc = self.storage[per: 2 * per].view(tdt).view(shape)
        if self.ring is not None:
            self.ring.close()
        self.ring = self.cr.CudaRing(self.B, self.L, self.H, window, self.d, self.dtype, k_cache=kc, v_cache=vc)
        self.window, self.per = window, per
        # Under the new layout, the stream's own region keeps whatever stale bytes it has;
        # every other region is re-marked so the audit can tell if a kernel writes there.
        for lo, hi, mine in self._regions():
            if not mine:
                self.storage[lo:hi] = self.SENTINEL

    def reset(self, window: int) -> None:
        if self.ring is not None and window == self.window:
            self.ring.reset(self.SEQ)  # same handle: stale slots stay in place
        else:
            self._open(window)

    def _to_device(self, arrays: Sequence[np.ndarray]):
        raw = np.ascontiguousarray(np.stack([np.asarray(a, np.float32).reshape(-1) for a in arrays]))
        t = self.torch.from_numpy(raw.view(np.uint8)).cuda()
        return t.view(self.cr.torch_dtype(self.dtype)).view(len(arrays), self.H, self.d)

    def push(self, pos: int, key: Any, value: Any) -> None:
        self.push_chunk([(pos, key, value)])

    def push_chunk(self, entries: Any) -> None:
        entries = list(entries)
        n = self.ring.length(self.LAYER, self.SEQ)
        if not entries:
            self.ring.append(self.LAYER, self.SEQ, n, self._empty(), self._empty())
            return
        self.ring.append(self.LAYER, self.SEQ, int(entries[0][0]), self._to_device([e[1] for e in entries]),
                         self._to_device([e[2] for e in entries]))

    def _empty(self):
        return self.torch.empty((0, self.H, self.d), dtype=self.cr.torch_dtype(self.dtype), device="cuda")

    def _to_host(self, t) -> np.ndarray:
        raw = t.contiguous().view(self.torch.uint8).cpu().numpy()
        return raw.view(np.float32).reshape(t.shape[0], -1)

    def contents(self) -> list:
        k, v = self.ring.window_contents(self.LAYER, self.SEQ)
        n = self.ring.length(self.LAYER, self.SEQ)
        kh, vh = self._to_host(k), self._to_host(v)
        start = n - len(kh)
        return [(start + i, kh[i], vh[i]) for i in range(len(kh))]

    #: The bad calls the host API of ``csrc/ringkv_cuda.h`` takes (kinds of :mod:`fuzz.targets.ring_errors`).
    BAD_KINDS = ("gap", "dup", "past", "chunk-gap", "chunk-dup", "count", "overflow", "null-data", "null-handle")

    def bad_call(self, kind: str, spec: SpecStream) -> str | None:
        """Send ``kind``'s calls to the host API; each must return its documented status and leave every
        stream's ``rkvc_length`` as it was (the op loop then checks the contents and the audit)."""
        from fuzz.targets.ring_errors import bad_positions

        ring, ffi, lib = self.ring, self.ring.ffi, self.ring.lib
        h, stream, NULL = ring._h, ring._stream(), ffi.NULL
        L, S, n = self.LAYER, self.SEQ, spec.n
        _, keys, values = spec.bad_entries([n, n + 1])
        k2, v2 = self._to_device(list(keys)), self._to_device(list(values))
        kp, vp = ring._ptr(k2), ring._ptr(v2)
        out = ffi.new("int64_t *")
        E_NULL, E_POSITION, E_ARG = -1, -5, -9
        calls: list = []
        if kind in ("gap", "dup", "past", "chunk-gap", "chunk-dup"):
            pos = bad_positions(kind, spec)
            calls.append((f"rkvc_append(h, {L}, {S}, {pos[0]}, {len(pos)}, k, v)",
                          lambda: lib.rkvc_append(h, L, S, pos[0], len(pos), kp, vp, stream), E_POSITION))
        elif kind == "count":
            calls.append((f"rkvc_append(h, {L}, {S}, {n}, -1, k, v)",
                          lambda: lib.rkvc_append(h, L, S, n, -1, kp, vp, stream), E_ARG))
        elif kind == "overflow":
            big = 2**62 - 1 - n + 1  # pos0 + k past INT64_MAX / 2, the header's bound
            calls.append((f"rkvc_append(h, {L}, {S}, {n}, {big}, k, v)",
                          lambda: lib.rkvc_append(h, L, S, n, big, kp, vp, stream), E_ARG))
        elif kind == "null-data":
            calls += [(f"rkvc_append(h, {L}, {S}, {n}, 1, NULL, v)",
                       lambda: lib.rkvc_append(h, L, S, n, 1, NULL, vp, stream), E_NULL),
                      (f"rkvc_append(h, {L}, {S}, {n}, 1, k, NULL)",
                       lambda: lib.rkvc_append(h, L, S, n, 1, kp, NULL, stream), E_NULL),
                      (f"rkvc_length(h, {L}, {S}, NULL)", lambda: lib.rkvc_length(h, L, S, NULL), E_NULL)]
        elif kind == "null-handle":
            calls += [(f"rkvc_append(NULL, {L}, {S}, {n}, 1, k, v)",
                       lambda: lib.rkvc_append(NULL, L, S, n, 1, kp, vp, stream), E_NULL),
                      (f"rkvc_length(NULL, {L}, {S}, &n)", lambda: lib.rkvc_length(NULL, L, S, out), E_NULL),
                      (f"rkvc_reset(NULL, {S})", lambda: lib.rkvc_reset(NULL, S, stream), E_NULL),
                      ("rkvc_gather(NULL, ...)", lambda: lib.rkvc_gather(NULL, L, 0, 1, kp, vp, stream), E_NULL)]
        else:
            raise ValueError(f"cuda-ring takes no bad:{kind}")
        before = [ring.length(layer, b) for b in range(self.B) for layer in range(self.L)]
        for text, call, want in calls:
            rc = call()
            if rc != want:
                return (f"{text} returned {rc} ({self.cr.status_message(rc)}), ringkv_cuda.h says {want} "
                        f"({self.cr.status_message(want)})")
            self.torch.cuda.synchronize()
            after = [ring.length(layer, b) for b in range(self.B) for layer in range(self.L)]
            if after != before:
                return f"{text} returned {rc} but changed rkvc_length of the streams: {before} -> {after}"
        return None

    def audit(self, spec: SpecStream) -> str | None:
        for b in range(self.B):
            for layer in range(self.L):
                n = self.ring.length(layer, b)
                want = spec.n if (b, layer) == (self.SEQ, self.LAYER) else 0
                if n != want:
                    return f"rkvc_length(layer {layer}, seq {b}) = {n}, want {want}"
        # Other (sequence, layer) regions are never written.
        for lo, hi, mine in self._regions():
            if not mine and not bool((self.storage[lo:hi] == self.SENTINEL).all()):
                return f"cache bytes [{lo}, {hi}) outside (seq {self.SEQ}, layer {self.LAYER}) were written"
        # Empty sequences gather as zeros (the zero-fill path, all sequences at once).
        k, _ = self.ring.gather(self.LAYER, 0, self.B)
        for b in range(self.B):
            if b != self.SEQ and bool((k[b] != 0).any()):
                return f"gather of empty sequence {b} is not all zeros"
        return None


#: Payload floats per entry for cuda-ring: 2 KV heads x head dim 8 (fp32) or 16 (fp16/bf16).
RING_WIDTH = 16


def make_cuda_ring() -> Target:
    """``cuda-ring``: the CUDA ring's append + gather kernels versus pyspec (GPU only)."""
    _gpu_modules()
    order = itertools.cycle(("fp32", "fp16", "bf16"))
    return AuditedCacheTarget("cuda-ring", lambda: CudaRingCache(next(order), RING_WIDTH), width=RING_WIDTH,
                              errors=MethodContract(CudaRingCache.BAD_KINDS), fixed_payload=True)


def _reference_tools():
    """``(window_mask, attend)``: the decoder's full-mask helpers, or local equivalents."""
    try:
        from impl.decoder import attend, window_mask

        return window_mask, attend
    except ImportError:
        import torch

        import pyspec

        def window_mask(q_pos, k_pos, window):
            return torch.tensor([[pyspec.in_window(window, int(t), int(p)) for p in k_pos] for t in q_pos])

        def attend(q, k, v, mask, scale):
            rep = q.shape[-3] // k.shape[-3]
            k, v = k.repeat_interleave(rep, dim=-3), v.repeat_interleave(rep, dim=-3)
            s = (q @ k.transpose(-1, -2)) * scale
            return torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v

        return window_mask, attend


def reference_decode(q, k_hist, v_hist, window: int, scale: float):
    """float64 windowed attention of the query at position ``t = T - 1`` over the full
    history ``k_hist``/``v_hist`` ``[T, Hkv, D]`` (positions ``0..T-1``) masked with the
    spec's ``inWindow``; ``q`` ``[Hq, D]``. Returns ``[Hq, D]``."""
    import torch

    window_mask, attend = _reference_tools()
    t = k_hist.shape[0]
    mask = window_mask([t - 1], list(range(t)), window)
    out = attend(q.double()[:, None, :], k_hist.double().transpose(0, 1), v_hist.double().transpose(0, 1),
                 mask, scale)
    return out[:, 0, :].to(torch.float64)


def compare_decode(out, ref, dtype: str) -> str | None:
    """``None`` when ``out`` is within :data:`DECODE_TOLERANCES` of ``ref``, else where not."""
    tol = DECODE_TOLERANCES[dtype]
    o, r = out.double().cpu(), ref.double().cpu()
    err = (o - r).abs()
    bound = tol["atol"] + tol["rtol"] * r.abs()
    bad = ~(err <= bound)  # NaN counts as bad
    if bool(bad.any()):
        idx = tuple(int(i) for i in bad.nonzero()[0])
        return (f"decode attention ({dtype}) differs from the full-mask reference at {idx}: got "
                f"{float(o[idx]):.6g}, want {float(r[idx]):.6g} (tolerance {dtype}: atol {tol['atol']}, "
                f"rtol {tol['rtol']}; max error {float(err.nan_to_num(float('inf')).max()):.3g})")
    return None


class CudaDecoderTarget(Target):
    """``cuda-decoder``: decode attention from the ring slots after every op, versus the
    float64 full-history reference. The stream drives sequence 1 of a batch of 2 (sequence 0
    stays empty and must come out as zeros); dtype, grouped-query ratio and split-K count
    rotate between cases and calls."""

    name = "cuda-decoder"
    kind = "model"
    max_tokens = 256
    publishes_ops = True
    B, SEQ, H, D = 2, 1, 2, 64
    DTYPES = ("bf16", "fp16", "fp32")
    GROUPS = (4, 1, 3, 8)
    SPLITS = (0, 1, 2, 3, 5)

    def __init__(self) -> None:
        self.torch, self.cr = _gpu_modules()
        self._case = 0
        self._calls = 0

    def versions(self) -> dict[str, str]:
        return {"torch": self.torch.__version__}

    def tolerances(self) -> dict[str, dict[str, float]]:
        """Decode output against the float64 reference, per dtype: :data:`DECODE_TOLERANCES`."""
        return {f"decode/{dtype}": dict(tol) for dtype, tol in DECODE_TOLERANCES.items()}

    def _ring(self, window: int, dtype: str):
        # NaN-filled storage: reading an unfilled slot poisons the output.
        return self.cr.CudaRing(self.B, 1, self.H, window, self.D, dtype, fill=float("nan"))

    def _rand(self, seed: int, shape, dtype: str):
        g = self.torch.Generator().manual_seed(seed & 0x7FFFFFFF)
        x = self.torch.randn(shape, generator=g, dtype=self.torch.float32)
        return x.to(self.cr.torch_dtype(dtype))

    def run(self, case: Case) -> RunStats:
        window, ops = case.window, case.ops
        torch = self.torch
        dtype = self.DTYPES[self._case % len(self.DTYPES)]
        groups = self.GROUPS[(self._case // len(self.DTYPES)) % len(self.GROUPS)]
        self._case += 1
        hq = self.H * groups
        scale = self.D ** -0.5
        spec = SpecStream(window)
        stats = RunStats()
        ring = self._ring(window, dtype)
        k_hist: list = []
        v_hist: list = []
        slot = self.op_slot
        try:
            for i, op in enumerate(ops):
                if slot is not None:
                    slot[OP] = i
                if isinstance(op, Reset):
                    if op.window == ring.window:
                        ring.reset(self.SEQ)
                    else:
                        ring.close()
                        ring = self._ring(op.window, dtype)
                    k_hist, v_hist = [], []
                    spec.apply(op)
                    continue
                k = op.tokens
                start = spec.n
                seed = spec.epoch * 1_000_003 + start * 7919 + k
                kk = self._rand(seed, (k, self.H, self.D), dtype)
                vv = self._rand(seed + 1, (k, self.H, self.D), dtype)
                ring.append(0, self.SEQ, start, kk.cuda(), vv.cuda())
                k_hist.append(kk.double())
                v_hist.append(vv.double())
                stats.phases |= spec.apply(op)
                stats.tokens += k
                n = ring.length(0, self.SEQ)
                if n != spec.n:
                    raise Mismatch(self.name, i, op, f"rkvc_length = {n}, spec tokens seen {spec.n}")
                if k == 0 or spec.n == 0:
                    continue
                q = self._rand(seed + 2, (self.B, hq, self.D), dtype)
                splits = self.SPLITS[self._calls % len(self.SPLITS)]
                self._calls += 1
                out = ring.decode(0, q.cuda(), scale=scale, num_splits=splits).cpu()
                if bool((out[0] != 0).any()):
                    raise Mismatch(self.name, i, op, "empty sequence 0 did not come out as zeros")
                ref = reference_decode(q[self.SEQ].double(), torch.cat(k_hist), torch.cat(v_hist),
                                       spec.window, scale)
                diff = compare_decode(out[self.SEQ], ref, dtype)
                if diff is not None:
                    raise Mismatch(self.name, i, op, f"{diff} [G={groups}, splits={splits or 'auto'}, "
                                                     f"W={spec.window}, n={spec.n}]")
        finally:
            ring.close()
        return stats


def make_cuda_decoder() -> Target:
    """``cuda-decoder``: the fused decode-attention kernel versus the full-mask reference (GPU only)."""
    return CudaDecoderTarget()
