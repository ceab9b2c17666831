"""The CUDA ring KV cache on a GPU: append/gather versus pyspec, decode attention versus the
full-mask float64 reference, bad input (error code, no kernel, nothing written), and short
cuda-ring / cuda-decoder campaigns. Skipped with the reason when no GPU (or no library).
"""

from __future__ import annotations

import random

import pytest

import pyspec

torch = pytest.importorskip("torch")
from impl import cuda_ring  # noqa: E402

REASON = cuda_ring.unavailable_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU run: {REASON}")]

DTYPES = ("fp32", "fp16", "bf16")


def tdt(name):
    return cuda_ring.torch_dtype(name)


def rand(shape, dtype, gen):
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(tdt(dtype))


# ---------------------------------------------------------------------------
# append / append_step / gather versus pyspec


class Streams:
    """Host model: per (seq, layer) the history of (k, v) rows [H, D]; expected = lastWindow."""

    def __init__(self, B, L):
        self.hist = {(b, l): [] for b in range(B) for l in range(L)}

    def expected(self, w, b, l):
        return pyspec.last_window(w, self.hist[(b, l)])


def check_all(ring, streams, where):
    for layer in range(ring.layers):
        k, v = ring.gather(layer)
        k, v = k.cpu(), v.cpu()
        for b in range(ring.batch):
            want = streams.expected(ring.window, b, layer)
            n = len(streams.hist[(b, layer)])
            assert ring.length(layer, b) == n, where
            for i, (kk, vv) in enumerate(want):
                assert torch.equal(k[b, :, i], kk) and torch.equal(v[b, :, i], vv), \
                    f"{where}: (seq {b}, layer {layer}) logical row {i} of {len(want)}"
            assert bool((k[b, :, len(want):] == 0).all()) and bool((v[b, :, len(want):] == 0).all()), \
                f"{where}: rows past the window are not zero-filled"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("window", [1, 5, 64])
def test_append_gather_match_pyspec(dtype, window):
    B, L, H, D = 3, 2, 2, 16
    gen = torch.Generator().manual_seed(window * 7 + len(dtype))
    rng = random.Random(window)
    ring = cuda_ring.CudaRing(B, L, H, window, D, dtype, fill=float("nan"))
    streams = Streams(B, L)
    sizes = [0, 1, window - 1, window, window + 1, 2 * window + 3, 3 * window + 2]
    for step in range(40):
        b, layer = rng.randrange(B), rng.randrange(L)
        if rng.random() < 0.08:
            ring.reset(b)
            for l2 in range(L):
                streams.hist[(b, l2)] = []
            where = f"step {step}: reset seq {b}"
        else:
            k = max(0, rng.choice(sizes))
            kk, vv = rand((k, H, D), dtype, gen), rand((k, H, D), dtype, gen)
            n = ring.length(layer, b)
            ring.append(layer, b, n, kk.cuda(), vv.cuda())
            streams.hist[(b, layer)].extend(zip(kk, vv))
            where = f"step {step}: chunk {k} to (seq {b}, layer {layer})"
        torch.cuda.synchronize()
        check_all(ring, streams, where)
    ring.close()


@pytest.mark.parametrize("dtype", DTYPES)
def test_append_step_matches_pyspec(dtype):
    B, L, H, D, W = 4, 1, 3, 8 if dtype != "fp32" else 4, 6
    gen = torch.Generator().manual_seed(3)
    ring = cuda_ring.CudaRing(B, L, H, W, D, dtype, fill=float("nan"))
    streams = Streams(B, L)
    for b, k in enumerate([0, 2, 6, 9]):  # different fill states before the steps
        kk, vv = rand((k, H, D), dtype, gen), rand((k, H, D), dtype, gen)
        ring.append(0, b, 0, kk.cuda(), vv.cuda())
        streams.hist[(b, 0)].extend(zip(kk, vv))
    for step in range(2 * W + 1):
        kk, vv = rand((B, H, D), dtype, gen), rand((B, H, D), dtype, gen)
        positions = [ring.length(0, b) for b in range(B)]
        ring.append_step(0, positions, kk.cuda(), vv.cuda())
        for b in range(B):
            streams.hist[(b, 0)].append((kk[b], vv[b]))
        torch.cuda.synchronize()
        check_all(ring, streams, f"step {step}")
    ring.close()


# ---------------------------------------------------------------------------
# decode attention versus the full-mask reference


def run_decode_case(dtype, D, G, W, lengths, splits, H=2, seed=0):
    from fuzz.targets.cuda import compare_decode, reference_decode

    B = len(lengths)
    gen = torch.Generator().manual_seed(seed)
    ring = cuda_ring.CudaRing(B, 1, H, W, D, dtype, fill=float("nan"))  # unfilled slots are NaN
    hist = []
    for b, n in enumerate(lengths):
        kk, vv = rand((n, H, D), dtype, gen), rand((n, H, D), dtype, gen)
        # Two chunks, so chunk boundaries and wrap-around both happen.
        cut = n // 3
        ring.append(0, b, 0, kk[:cut].cuda(), vv[:cut].cuda())
        ring.append(0, b, cut, kk[cut:].cuda(), vv[cut:].cuda())
        hist.append((kk.double(), vv.double()))
    q = rand((B, H * G, D), dtype, gen)
    scale = D ** -0.5
    for s in splits:
        out = ring.decode(0, q.cuda(), scale=scale, num_splits=s).cpu()
        for b, n in enumerate(lengths):
            if n == 0:
                assert bool((out[b] == 0).all()), f"empty sequence {b} not zero (splits {s})"
                continue
            ref = reference_decode(q[b].double(), hist[b][0], hist[b][1], W, scale)
            diff = compare_decode(out[b], ref, dtype)
            assert diff is None, f"seq {b} (n={n}, W={W}, G={G}, D={D}, splits={s or 'auto'}): {diff}"
    ring.close()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("G", [1, 3, 4, 8, 16])
def test_decode_matches_full_mask_reference(dtype, D, G):
    W = 37
    run_decode_case(dtype, D, G, W, [0, 1, W - 1, W, W + 1, 3 * W + 5], splits=(0, 1, 3, 8),
                    seed=D + G)


def test_decode_long_window_bf16():
    W = 4096
    run_decode_case("bf16", 128, 4, W, [W + 100, 5, W, 0, 2 * W + 1], splits=(0, 1, 16), H=8, seed=1)


def test_auto_splits_is_sane():
    ring = cuda_ring.CudaRing(64, 1, 8, 4096, 128, "bf16")
    s = ring.auto_splits(32)
    assert 1 <= s <= 64
    ring.close()


# ---------------------------------------------------------------------------
# bad input: an error code, no kernel launched, nothing written


def test_bad_input_returns_codes_and_writes_nothing():
    ffi, lib = cuda_ring.load()
    B, L, H, W, D = 2, 2, 2, 4, 64
    ring = cuda_ring.CudaRing(B, L, H, W, D, "bf16", fill=1.5)
    gen = torch.Generator().manual_seed(0)
    ring.append(0, 0, 0, rand((3, H, D), "bf16", gen).cuda(), rand((3, H, D), "bf16", gen).cuda())
    torch.cuda.synchronize()
    k0, v0 = ring.k_cache.clone(), ring.v_cache.clone()
    lengths0 = [[ring.length(l, b) for b in range(B)] for l in range(L)]
    h, st = ring._h, ffi.NULL
    good = torch.zeros((1, H, D), dtype=torch.bfloat16, device="cuda")
    gp = ffi.cast("void *", good.data_ptr())
    mis = ffi.cast("void *", good.data_ptr() + 2)  # one bf16 element off: not 16-byte aligned
    q = torch.zeros((B, 2 * H, D), dtype=torch.bfloat16, device="cuda")
    qp = ffi.cast("void *", q.data_ptr())
    out = torch.full((B, 2 * H, D), 7.0, dtype=torch.bfloat16, device="cuda")
    op = ffi.cast("void *", out.data_ptr())
    gk = torch.full((B, H, W, D), 7.0, dtype=torch.bfloat16, device="cuda")
    gkp = ffi.cast("void *", gk.data_ptr())

    E = lib
    cases = [
        (lib.rkvc_append(h, 0, 2, 0, 1, gp, gp, st), E.RKVC_E_SEQ),       # sequence index >= B
        (lib.rkvc_append(h, 0, -1, 0, 1, gp, gp, st), E.RKVC_E_SEQ),
        (lib.rkvc_append(h, 2, 0, 3, 1, gp, gp, st), E.RKVC_E_LAYER),
        (lib.rkvc_append(h, 0, 0, 2, 1, gp, gp, st), E.RKVC_E_POSITION),  # position out of order
        (lib.rkvc_append(h, 0, 0, 4, 1, gp, gp, st), E.RKVC_E_POSITION),  # a gap
        (lib.rkvc_append(h, 0, 1, 1, 1, gp, gp, st), E.RKVC_E_POSITION),  # fresh stream starts at 0
        (lib.rkvc_append(h, 0, 0, 3, 1, ffi.NULL, gp, st), E.RKVC_E_NULL),
        (lib.rkvc_append(h, 0, 0, 3, 1, mis, gp, st), E.RKVC_E_ALIGN),
        (lib.rkvc_append(h, 0, 0, 3, -1, gp, gp, st), E.RKVC_E_ARG),
        (lib.rkvc_append_step(h, 0, ffi.new("int64_t[]", [3, 1]), gp, gp, st), E.RKVC_E_POSITION),
        (lib.rkvc_append_step(h, 5, ffi.new("int64_t[]", [3, 0]), gp, gp, st), E.RKVC_E_LAYER),
        (lib.rkvc_append_step(h, 0, ffi.NULL, gp, gp, st), E.RKVC_E_NULL),
        (lib.rkvc_reset(h, 2, st), E.RKVC_E_SEQ),
        (lib.rkvc_gather(h, 0, 1, 2, gkp, gkp, st), E.RKVC_E_SEQ),
        (lib.rkvc_gather(h, 0, 0, 1, ffi.cast("void *", gk.data_ptr() + 8), gkp, st), E.RKVC_E_ALIGN),
        (lib.rkvc_gather(h, 3, 0, 1, gkp, gkp, st), E.RKVC_E_LAYER),
        (lib.rkvc_decode_attention(h, 0, 3, qp, op, 0.125, 0, st), E.RKVC_E_DIM),  # 3 % 2 != 0
        (lib.rkvc_decode_attention(h, 0, 4, qp, op, 0.0, 0, st), E.RKVC_E_ARG),
        (lib.rkvc_decode_attention(h, 0, 4, qp, op, float("nan"), 0, st), E.RKVC_E_ARG),
        (lib.rkvc_decode_attention(h, 0, 4, qp, op, 0.125, 300, st), E.RKVC_E_ARG),
        (lib.rkvc_decode_attention(h, 0, 4, qp, ffi.cast("void *", out.data_ptr() + 4), 0.125, 0, st),
         E.RKVC_E_ALIGN),
        (lib.rkvc_decode_attention(h, 0, 4, ffi.NULL, op, 0.125, 0, st), E.RKVC_E_NULL),
        (lib.rkvc_decode_attention(h, 9, 4, qp, op, 0.125, 0, st), E.RKVC_E_LAYER),
    ]
    for i, (got, want) in enumerate(cases):
        assert got == want, f"case {i}: got {cuda_ring.STATUS_NAMES.get(got, got)}, want {cuda_ring.STATUS_NAMES[want]}"
    torch.cuda.synchronize()
    assert torch.equal(ring.k_cache.view(torch.int16), k0.view(torch.int16))
    assert torch.equal(ring.v_cache.view(torch.int16), v0.view(torch.int16))
    assert [[ring.length(l, b) for b in range(B)] for l in range(L)] == lengths0
    assert bool((out == 7.0).all()) and bool((gk == 7.0).all())
    # The device copy of n is untouched too: the gather still shows the 3 entries.
    kk, _ = ring.gather(0, 0, 1)
    assert bool((kk[0, :, 3:] == 0).all()) and not bool((kk[0, :, :3] == 0).all())

    with pytest.raises(cuda_ring.RingKVCudaError) as e:
        ring.append(0, 0, 0, good, good)
    assert e.value.code == lib.RKVC_E_POSITION
    ring.close()


def test_open_rejects_bad_configs():
    ffi, lib = cuda_ring.load()
    h = ffi.new("rkvc_cache **")
    buf = torch.zeros(4096, dtype=torch.bfloat16, device="cuda")
    p = ffi.cast("void *", buf.data_ptr())
    assert lib.rkvc_open(h, 1, 1, 1, 0, 64, 2, p, p) == lib.RKVC_E_WINDOW
    assert lib.rkvc_open(h, 1, 1, 1, 4, 64, 5, p, p) == lib.RKVC_E_DTYPE
    assert lib.rkvc_open(h, 1, 1, 1, 4, 4, 2, p, p) == lib.RKVC_E_ALIGN
    host = torch.zeros(4096, dtype=torch.bfloat16)
    hp = ffi.cast("void *", host.data_ptr())
    assert lib.rkvc_open(h, 1, 1, 1, 4, 64, 2, hp, hp) == lib.RKVC_E_NOTDEVICE
    # Decode needs a supported head dim; append/gather do not.
    assert lib.rkvc_open(h, 1, 1, 1, 4, 96, 2, p, p) == lib.RKVC_OK
    q = torch.zeros((1, 1, 96), dtype=torch.bfloat16, device="cuda")
    qp = ffi.cast("void *", q.data_ptr())
    assert lib.rkvc_decode_attention(h[0], 0, 1, qp, qp, 0.1, 0, ffi.NULL) == lib.RKVC_E_DIM
    lib.rkvc_close(h[0])


# ---------------------------------------------------------------------------
# short campaigns


@pytest.mark.parametrize("name", ["cuda-ring", "cuda-decoder"])
def test_short_gpu_campaign(name):
    from fuzz.campaign import fuzz_target
    from fuzz.config import CampaignConfig
    from fuzz.targets.registry import resolve

    res = fuzz_target(resolve(name), CampaignConfig(seconds=15, max_examples=60, campaign_seed=11))
    assert not res.failures, res.failures
    assert res.examples > 0
