"""Unit tests of impl.decoder: building blocks, fixed parity cases, backends, bad input, target."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import pyspec
from fuzz.targets.decoder_props import check_cache, check_greedy, check_chunks, expected_positions
from impl.decoder import torch_threads
from fuzz.targets.decoder import TARGET_CONFIG, DecoderTarget, make_decoder, token_of
from fuzz.ops import Case, Chunk, Push, Reset
from fuzz.targets.pyring import PyRing
from impl.decoder import (
    CacheMismatchError, Decoder, DecoderConfig, DecoderError, EmptyPromptError, RingKVCache, TokenError,
    WindowError, apply_rope, attend, join_f32_to_f64, repeat_kv, resolve_windows, rope_cos_sin, rotate_half,
    split_f64_to_f32, window_mask,
)

MIXED = DecoderConfig(vocab=50, d_model=32, layers=3, n_heads=4, n_kv_heads=1, head_dim=8,
                      window=(3, None, 5), dtype="float64", seed=1)


@pytest.fixture(autouse=True)
def _one_thread():
    with torch_threads(1):  # tiny models: extra intra-op threads only spin on a shared CI machine
        yield


def toks(n: int, vocab: int = 50, seed: int = 0) -> list[int]:
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


# ---------------------------------------------------------------------------
# building blocks


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


# ---------------------------------------------------------------------------
# parity on fixed cases


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


# ---------------------------------------------------------------------------
# storage backends


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


# ---------------------------------------------------------------------------
# bad input: a clear typed error naming the value, and the cache unchanged


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


# ---------------------------------------------------------------------------
# campaign target


def test_target_runs_every_op_kind():
    t = make_decoder()
    assert (t.name, t.kind, t.window_max, t.max_tokens) == ("decoder", "model", 16, 64)
    ops = [Push(), Chunk(0), Chunk(9), Push(), Reset(2), Chunk(7), Push(), Reset(5), Push(), Chunk(11)]
    stats = t.run(Case(3, ops))
    assert stats.tokens == 1 + 9 + 1 + 7 + 1 + 1 + 11
    assert {"not-yet-full", "first-eviction", "chunk>W", "after-reset", "steady-state"} <= stats.phases
    assert t.accepts(Case(17, [])) is not None and t.accepts(Case(16, [Reset(4)])) is None


def test_target_resolves_from_registry_and_tokens_are_deterministic():
    from fuzz.targets.registry import resolve

    assert resolve("decoder").name == "decoder"
    assert [token_of(0, p, 32) for p in range(5)] == [token_of(0, p, 32) for p in range(5)]
    assert [token_of(0, p, 32) for p in range(8)] != [token_of(1, p, 32) for p in range(8)]
    assert all(0 <= token_of(e, p, 7) < 7 for e in range(3) for p in range(50))


def test_target_checks_positions_against_spec():
    t = DecoderTarget()
    c = t.model.new_cache(3)
    t.model.prefill(c, [1, 2, 3, 4, 5])
    assert [s.positions for s in c.snapshot()] == [expected_positions(3, 5), expected_positions(None, 5)]
    assert TARGET_CONFIG.windows == (8, None)
    full = t.model.full_forward([1, 2, 3, 4, 5], c.windows)
    assert check_cache(c, full, 5) is None
