"""The CUDA ring on bad input: an error code, no kernel launched, nothing written. Skipped with the
reason when no GPU (or no library)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from impl import cuda_ring  # noqa: E402
from tests.support.cuda import pytestmark, rand  # noqa: E402,F401 - pytestmark skips without a GPU


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
