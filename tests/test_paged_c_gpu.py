"""The paged CUDA kernels on a GPU: gather and decode attention against the C pool (impl.paged.PagedC)
and against the index mirror. Skipped with the reason when there is no GPU (or no library).

The device pool is rebuilt from what the C pool reports (every sequence's table and reads), every
other slot NaN, so a gather that reads one slot outside the needed ones shows up as NaN.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from impl import cuda_paged  # noqa: E402
from impl.paged import PagedC  # noqa: E402
from pyspec import paged_index as M  # noqa: E402

REASON = cuda_paged.unavailable_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU run: {REASON}")]


def random_pool(seed: int):
    """A C pool after a random stream of adds, chunks, forks (copy on write included) and frees."""
    rng = random.Random(seed)
    W, B, D = rng.choice((1, 2, 5, 17)), rng.choice((1, 2, 4)), rng.choice((1, 8, 33))
    N = 4 * (-(-(W - 1) // B) + 1)
    pool = PagedC()
    pool.configure(W, B, N, D)
    gen = np.random.default_rng(seed)
    for s in range(3):
        pool.add(s)
    for _ in range(30):
        live = pool.sequences()
        s = rng.choice(live)
        op = rng.random()
        try:
            if op < 0.6:
                k = rng.randint(0, 2 * W + B)
                n = pool.length(s)
                pool.append_arrays(s, np.arange(n, n + k), gen.standard_normal((k, D)), gen.standard_normal((k, D)))
            elif op < 0.8 and len(live) < 4:
                pool.fork(s, max(live) + 1)
            elif len(live) > 2:
                pool.free(s)
        except Exception as e:  # noqa: BLE001 - an exhausted pool is part of the stream
            if type(e).__name__ != "PoolExhaustedError":
                raise
    return pool


def device_pool(pool: PagedC):
    W, B, N, D = pool.config
    k = torch.full((N, B, D), float("nan"), dtype=torch.float32)
    v = torch.full((N, B, D), float("nan"), dtype=torch.float32)
    for s in pool.sequences():
        table = pool.table(s)
        for p, kk, vv in pool.read(s):
            k[table[p // B], p % B] = torch.from_numpy(kk)
            v[table[p // B], p % B] = torch.from_numpy(vv)
    seqs = pool.sequences()
    ns = [pool.length(s) for s in seqs]
    live, stride = cuda_paged.live_tables([pool.table(s) for s in seqs], ns, W, B)
    return k.cuda(), v.cuda(), seqs, ns, live, stride


@pytest.mark.parametrize("seed", range(8))
def test_gather_equals_the_c_pool_reads(seed):
    pool = random_pool(seed)
    W, B, N, D = pool.config
    kp, vp, seqs, ns, live, stride = device_pool(pool)
    ko, vo = cuda_paged.gather(kp, vp, ns, live, stride, W)
    ko, vo = ko.cpu(), vo.cpu()
    for q, s in enumerate(seqs):
        want = pool.read(s)
        assert len(want) == M.pkv_needed_len(ns[q], W)
        for i, (_, kk, vv) in enumerate(want):
            assert torch.equal(ko[q, i], torch.from_numpy(kk)) and torch.equal(vo[q, i], torch.from_numpy(vv)), \
                f"seed {seed}: sequence {s} row {i}"
        assert bool((ko[q, len(want):] == 0).all()) and bool((vo[q, len(want):] == 0).all()), "rows past the window"


@pytest.mark.parametrize("seed", range(6))
def test_decode_matches_attention_over_the_window(seed):
    pool = random_pool(100 + seed)
    W, B, N, D = pool.config
    kp, vp, seqs, ns, live, stride = device_pool(pool)
    gen = torch.Generator().manual_seed(seed)
    S = len(seqs)
    q, ks, vs = (torch.randn((S, D), generator=gen) for _ in range(3))
    scale = 1.0 / D ** 0.5
    out = cuda_paged.decode(kp, vp, ns, live, stride, W, q.cuda(), ks.cuda(), vs.cuda(), scale).cpu()
    for i, s in enumerate(seqs):
        got = pool.read(s)
        K = torch.stack([torch.from_numpy(k) for _, k, _ in got] + [ks[i]])
        V = torch.stack([torch.from_numpy(v) for _, _, v in got] + [vs[i]])
        want = torch.softmax((K.double() @ q[i].double()) * scale, dim=0) @ V.double()
        assert torch.allclose(out[i].double(), want, atol=1e-5, rtol=1e-4), f"seed {seed}: sequence {s}"


def test_gather_of_a_large_random_pool_follows_the_index_mirror():
    rng = random.Random(1)
    W, B, D, S = 257, 16, 128, 24
    stride = M.pkv_max_blocks(W, B)
    N = S * stride
    ns = [rng.randint(0, 3 * W) for _ in range(S)]
    perm = rng.sample(range(N), N)
    live = perm[:S * stride]
    kp = torch.randn((N, B, D)).cuda()
    vp = torch.randn((N, B, D)).cuda()
    ko, vo = cuda_paged.gather(kp, vp, ns, live, stride, W)
    flat_k, flat_v = kp.reshape(N * B, D).cpu(), vp.reshape(N * B, D).cpu()
    ko, vo = ko.cpu(), vo.cpu()
    for q in range(S):
        for i in range(W - 1):
            r = M.pkv_gather_row(ns[q], W, B, live[q * stride:(q + 1) * stride], i)
            if r < 0:
                assert bool((ko[q, i] == 0).all())
            else:
                assert torch.equal(ko[q, i], flat_k[r]) and torch.equal(vo[q, i], flat_v[r])


def test_a_bad_table_on_the_device_path_writes_nothing():
    ffi, lib = cuda_paged.load()
    kp = torch.zeros((4, 2, 8), device="cuda")
    out = torch.full((1, 3, 8), 7.0, device="cuda")
    n, live = ffi.new("int64_t[]", [5]), ffi.new("int64_t[]", [1, 4, -1])  # block 4 of 4
    p = ffi.cast("float *", kp.data_ptr())
    o = ffi.cast("float *", out.data_ptr())
    assert lib.pkvc_gather(p, p, 4, 2, 8, 4, 1, n, live, 3, o, o, ffi.NULL) == lib.PKVC_E_TABLE
    torch.cuda.synchronize()
    assert bool((out == 7.0).all())
    with pytest.raises(cuda_paged.PagedCudaError, match="PKVC_E_TABLE"):
        cuda_paged.gather(kp, kp, [5], [1, 4, -1], 3, 4)
