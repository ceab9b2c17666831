"""impl.decoder on bad input: a typed error naming the value, and the cache unchanged."""

from __future__ import annotations

import pytest
import torch

from impl.decoder import (
    CacheMismatchError, Decoder, DecoderConfig, DecoderError, EmptyPromptError, RingKVCache, TokenError, WindowError,
)
from tests.support.decoder import MIXED, one_thread, toks  # noqa: F401 - one_thread applies to every test here


def _state(c: RingKVCache):
    return c.n, [(s.positions, s.k.clone(), s.v.clone()) for s in c.snapshot()]


def _same(a, b) -> bool:
    return a[0] == b[0] and all(p == q and torch.equal(k1, k2) and torch.equal(v1, v2)
                                for (p, k1, v1), (q, k2, v2) in zip(a[1], b[1]))


@pytest.fixture
def primed():
    m = Decoder(MIXED)
    c = m.new_cache()
    m.prefill(c, toks(7))
    return m, c


@pytest.mark.parametrize("bad, match", [
    ([1, 50], r"token #1 = 50 is outside the vocabulary \[0, 50\)"),
    ([-1], r"token #0 = -1"),
    ([3.0], r"token #0 = 3.0"),
    ([True], r"token #0 = True"),
    (torch.tensor([1.0, 2.0]), r"integer ids, got dtype torch.float32"),
])
def test_token_outside_vocab(primed, bad, match):
    m, c = primed
    before = _state(c)
    with pytest.raises(TokenError, match=match):
        m.forward_cached(c, bad)
    assert _same(before, _state(c))


@pytest.mark.parametrize("empty", [[], (), torch.tensor([], dtype=torch.int64)])
def test_empty_prompt(primed, empty):
    m, c = primed
    before = _state(c)
    with pytest.raises(EmptyPromptError, match="empty prompt"):
        m.forward_cached(c, empty)
    with pytest.raises(EmptyPromptError):
        m.prefill(c, empty)
    assert _same(before, _state(c))
    with pytest.raises(EmptyPromptError):
        m.full_forward([])


@pytest.mark.parametrize("w", [0, -3])
def test_window_below_one(primed, w):
    m, c = primed
    with pytest.raises(WindowError, match=str(w)):
        m.new_cache(window=w)
    with pytest.raises(WindowError, match="-3"):
        DecoderConfig(window=(4, -3), layers=2)


def test_cache_for_another_config(primed):
    m, c = primed
    other = Decoder(MIXED, seed=9)
    before = _state(c)
    with pytest.raises(CacheMismatchError, match="seed: cache 1 != model 9"):
        other.forward_cached(c, [1])
    wider = Decoder(MIXED, n_heads=8)
    with pytest.raises(CacheMismatchError, match="n_heads: cache 4 != model 8"):
        wider.forward_cached(c, [1])
    with pytest.raises(CacheMismatchError, match="RingKVCache"):
        m.forward_cached(object(), [1])
    assert _same(before, _state(c))


def test_cache_dtype_and_device_mismatch(primed):
    m, c = primed
    f32 = RingKVCache(MIXED, dtype=torch.float32)
    with pytest.raises(CacheMismatchError, match="dtype torch.float32 != model dtype torch.float64"):
        m.forward_cached(f32, [1])
    assert f32.n == 0 and all(s.positions == [] for s in f32.snapshot())
    meta = RingKVCache(MIXED, device="meta")
    with pytest.raises(CacheMismatchError, match="device meta != model device cpu"):
        m.forward_cached(meta, [1])
    assert meta.n == 0


def test_bad_config_values_are_named():
    with pytest.raises(DecoderError, match="n_heads=6 is not a multiple of n_kv_heads=4"):
        DecoderConfig(n_heads=6, n_kv_heads=4)
    with pytest.raises(DecoderError, match="head_dim must be even"):
        DecoderConfig(head_dim=3)
    with pytest.raises(DecoderError, match="'float16'"):
        DecoderConfig(dtype="float16")
