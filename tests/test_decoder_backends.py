"""impl.decoder's cache storage backends: the tuple-protocol and C-ring stores match torch bit for bit,
and a missing one is a clear error; CUDA parity where a GPU exists."""

from __future__ import annotations

import pytest
import torch

from fuzz.targets.decoder_props import check_chunks
from fuzz.targets.pyring import PyRing
from impl.decoder import Decoder
from tests.support.decoder import MIXED, one_thread, toks  # noqa: F401 - one_thread applies to every test here


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_protocol_backend_matches_torch_bit_for_bit(dtype):
    m = Decoder(MIXED, dtype=dtype)
    t = toks(19)
    a, b = m.new_cache(), m.new_cache(backend="protocol", ring_factory=PyRing)
    for lo, hi in ((0, 1), (1, 8), (8, 9), (9, 19)):
        la, lb = m.forward_cached(a, t[lo:hi]), m.forward_cached(b, t[lo:hi])
        assert torch.equal(la, lb)
    for sa, sb in zip(a.snapshot(), b.snapshot()):
        assert sa.positions == sb.positions
        assert torch.equal(sa.k, sb.k) and torch.equal(sa.v, sb.v)
    assert check_chunks(m, t, [5, 1, 1, 12], cache=m.new_cache(backend="protocol", ring_factory=PyRing)) is None


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_c_ring_backend_matches_torch(dtype):
    pytest.importorskip("impl.ring")
    m = Decoder(MIXED, dtype=dtype)
    t = toks(19)
    a, b = m.new_cache(), m.new_cache(backend="c")
    for lo, hi in ((0, 1), (1, 8), (8, 9), (9, 19)):
        assert torch.equal(m.forward_cached(a, t[lo:hi]), m.forward_cached(b, t[lo:hi]))
    for sa, sb in zip(a.snapshot(), b.snapshot()):
        assert sa.positions == sb.positions
        assert torch.equal(sa.k, sb.k) and torch.equal(sa.v, sb.v)


def test_c_backend_unavailable_is_a_clear_error():
    try:
        import impl.ring  # noqa: F401
    except Exception:  # noqa: BLE001
        from impl.decoder import BackendUnavailable

        with pytest.raises(BackendUnavailable, match="impl.ring"):
            Decoder(MIXED).new_cache(backend="c")
    else:
        pytest.skip("impl.ring is available here")


@pytest.mark.gpu
def test_cuda_parity_and_same_as_cpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    m = Decoder(MIXED, device="cuda")
    assert check_chunks(m, toks(23), [7, 2, 1, 1, 9, 3]) is None
    cpu = Decoder(MIXED)
    assert torch.allclose(m.full_forward(toks(23)).logits.cpu(), cpu.full_forward(toks(23)).logits, atol=1e-10)
