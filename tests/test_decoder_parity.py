"""impl.decoder's ring-buffer cached path against its full forward on fixed cases: logits, cache positions
and bytes, window overrides, greedy decoding, and a wrong position that must diverge."""

from __future__ import annotations

import pytest
import torch

import pyspec
from fuzz.targets.decoder_props import check_chunks, check_greedy
from impl.decoder import Decoder, DecoderConfig
from tests.support.decoder import MIXED, one_thread, toks  # noqa: F401 - one_thread applies to every test here


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("schedule", [[1] * 23, [23], [7, 2, 1, 1, 9, 3], [3, 3, 3, 3, 3, 3, 5], [11, 12]])
def test_fixed_parity(dtype, schedule):
    m = Decoder(MIXED, dtype=dtype)
    assert check_chunks(m, toks(23), schedule) is None


def test_cache_semantics_positions_and_bytes():
    m = Decoder(DecoderConfig(vocab=20, d_model=16, layers=2, n_heads=2, n_kv_heads=2, head_dim=4, window=4))
    c = m.new_cache()
    for n in range(1, 14):
        m.decode(c, n % 20)
        assert c.next_position() == n  # tokens seen, never the cache length
        assert c.length(0) == min(4, n)
        for snap in c.snapshot():
            assert snap.positions == pyspec.positions_last_window(4, n)
    assert c.kv_bytes() == 2 * 2 * 2 * 4 * 4 * 8  # 2·layers·kv_heads·head_dim·W·bytes


def test_window_override_and_huge_window_is_global():
    m = Decoder(MIXED)
    c = m.new_cache(window=2)
    assert c.windows == (2, None, 2)
    assert check_chunks(m, toks(15), [4, 1, 10], cache=c) is None
    # a window >= the stream length behaves exactly like a global layer, and costs only what it holds
    big = Decoder(MIXED, window=(10**9, None, 10**9))
    glob = Decoder(MIXED, window=(None, None, None))
    t = toks(12)
    assert torch.allclose(big.full_forward(t).logits, glob.full_forward(t).logits, atol=0, rtol=0)
    cb = big.new_cache()
    big.prefill(cb, t, chunk=5)
    assert cb.kv_bytes() < 10**6


def test_greedy_matches_full_recompute():
    m = Decoder(MIXED)
    assert check_greedy(m, toks(4), 20, chunk=3) is None


def test_wrong_position_negative_control_diverges():
    """Seed 000's negative case: decoding at position n+1 instead of n changes the logits."""
    m = Decoder(MIXED)
    t = toks(10)
    good, bad = m.new_cache(), m.new_cache()
    m.prefill(good, t[:9])
    m.prefill(bad, t[:9])
    bad.n += 1  # the wrong position
    delta = float((m.decode(good, t[9]) - m.decode(bad, t[9])).abs().max())
    assert delta > 1e-3
