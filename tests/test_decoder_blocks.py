"""impl.decoder's building blocks: the window mask is pyspec's inWindow, RoPE, GQA attention, weights."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import pyspec
from impl.decoder import (
    Decoder, WindowError, apply_rope, attend, join_f32_to_f64, repeat_kv, resolve_windows, rope_cos_sin, rotate_half,
    split_f64_to_f32, window_mask,
)
from tests.support.decoder import MIXED, one_thread  # noqa: F401 - one_thread applies to every test here


def test_window_mask_is_pyspec_in_window():
    for w in range(1, 7):
        m = window_mask(torch.arange(10), torch.arange(10), w)
        for t, p in itertools.product(range(10), range(10)):
            assert bool(m[t, p]) == pyspec.in_window(w, t, p), (w, t, p)
    g = window_mask(torch.arange(6), torch.arange(6), None)
    assert torch.equal(g, torch.tril(torch.ones(6, 6, dtype=torch.bool)))


def test_window_mask_counts_w_keys_including_self():
    m = window_mask(torch.arange(20), torch.arange(20), 4)
    assert m.sum(dim=1).tolist() == [min(t + 1, 4) for t in range(20)]


def test_rope_scores_depend_only_on_relative_position():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(8, generator=g, dtype=torch.float64), torch.randn(8, generator=g, dtype=torch.float64)

    def score(tq, tk):
        cq, sq = rope_cos_sin([tq], 8, 10000.0)
        ck, sk = rope_cos_sin([tk], 8, 10000.0)
        return float(apply_rope(q[None], cq, sq) @ apply_rope(k[None], ck, sk).T)

    assert abs(score(5, 3) - score(105, 103)) < 1e-10
    assert abs(score(5, 3) - score(5, 4)) > 1e-3
    c0, s0 = rope_cos_sin([0], 8, 10000.0)
    assert torch.equal(apply_rope(q[None], c0, s0), q[None])  # position 0 is the identity


def test_rotate_half_and_repeat_kv_conventions():
    x = torch.arange(4.0)
    assert rotate_half(x).tolist() == [-2.0, -3.0, 0.0, 1.0]
    kv = torch.arange(2.0).view(2, 1, 1)
    assert repeat_kv(kv, 3).view(-1).tolist() == [0, 0, 0, 1, 1, 1]  # head h uses kv head h // 3


def test_attend_matches_naive_gqa():
    g = torch.Generator().manual_seed(1)
    q = torch.randn(4, 5, 3, generator=g, dtype=torch.float64)
    k = torch.randn(2, 7, 3, generator=g, dtype=torch.float64)
    v = torch.randn(2, 7, 3, generator=g, dtype=torch.float64)
    qp, kp = torch.arange(2, 7), torch.arange(7)
    mask = window_mask(qp, kp, 3)
    out = attend(q, k, v, mask, 0.5)
    for h, i in itertools.product(range(4), range(5)):
        keys = [j for j in range(7) if pyspec.in_window(3, int(qp[i]), j)]
        s = torch.stack([q[h, i] @ k[h // 2, j] * 0.5 for j in keys])
        want = (torch.softmax(s, 0)[:, None] * v[h // 2, keys]).sum(0)
        assert torch.allclose(out[h, i], want, atol=1e-12)


def test_split_f64_roundtrip_is_exact():
    x = np.random.default_rng(0).normal(size=1000) * np.logspace(-8, 8, 1000)
    assert np.array_equal(join_f32_to_f64(split_f64_to_f32(x)), x)


def test_resolve_windows():
    assert resolve_windows(4, 3) == (4, 4, 4)
    assert resolve_windows([4, None, 0], 3) == (4, None, None)
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(WindowError, match=repr(bad) if not isinstance(bad, int) or isinstance(bad, bool) else str(bad)):
            resolve_windows(bad, 2)
    with pytest.raises(WindowError, match="2 entries for 3 layers"):
        resolve_windows([1, 2], 3)


def test_weights_are_seeded_and_hf_named():
    a, b = Decoder(MIXED), Decoder(MIXED)
    assert all(torch.equal(a.w[k], b.w[k]) for k in a.w)
    c = Decoder(MIXED, seed=2)
    assert not torch.equal(a.w["embed_tokens"], c.w["embed_tokens"])
    sd = a.hf_state_dict()
    assert "model.layers.2.self_attn.k_proj.weight" in sd and "lm_head.weight" in sd
    assert sd["model.layers.0.self_attn.k_proj.weight"].shape == (1 * 8, 32)
