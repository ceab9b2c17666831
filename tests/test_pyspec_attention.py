"""``pyspec.attention`` (the vectorised spec-mask reference every engine is held to) against the list
mirror: for every query, softmax attention folded key by key over the keys ``pyspec.spec.in_window``
keeps (Lean ``attention_eq``), and against ``lastWindow`` of the history for the newest query.
A reference with its window off by one must fail the same check."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pyspec import attention as A
from pyspec import spec


def _online_softmax(q, scale):
    """The fold of one query over ``(pos, k, v)`` entries: (max, denominator, numerator), online softmax."""
    def f(acc, entry):
        m, d, num = acc
        _, k, v = entry
        s = float(np.dot(q, k)) * scale
        m2 = max(m, s)
        c = math.exp(m - m2) if math.isfinite(m) else 0.0
        return m2, d * c + math.exp(s - m2), num * c + math.exp(s - m2) * v
    return f


def _fold_reference(q, k, v, window):
    """Per query ``t``, the fold over the keys ``in_window(window, t, p)`` keeps, with GQA head mapping."""
    T, H, D = q.shape
    rep = H // k.shape[1]
    out = np.zeros((T, H, v.shape[2]))
    for t in range(T):
        for h in range(H):
            keys = [(p, k[p, h // rep], v[p, h // rep]) for p in range(T)]  # entries (pos, key, value)
            _, d, num = spec.masked_fold(_online_softmax(q[t, h], D ** -0.5),
                                         lambda e: spec.in_window(window, t, e[0]),  # noqa: B023
                                         (-math.inf, 0.0, np.zeros(v.shape[2])), keys)
            out[t, h] = num / d
    return out


@pytest.mark.parametrize("window", [1, 2, 3, 5, 9])
@pytest.mark.parametrize("heads,kv_heads", [(1, 1), (4, 2), (2, 1)])
def test_attention_equals_the_masked_fold(window, heads, kv_heads):
    rng = np.random.default_rng([window, heads, kv_heads])
    T, D = 7, 3
    q, k, v = rng.normal(size=(T, heads, D)), rng.normal(size=(T, kv_heads, D)), rng.normal(size=(T, kv_heads, D))
    pos = np.arange(T)
    got = A.attention(q, k, v, pos, pos, window)
    np.testing.assert_allclose(got, _fold_reference(q, k, v, window), rtol=1e-12, atol=1e-12)


def test_the_newest_query_sees_exactly_lastWindow():
    for window in range(1, 7):
        for n in range(1, 10):
            mask = A.window_mask([n - 1], np.arange(n), window)[0]
            assert np.flatnonzero(mask).tolist() == spec.last_window(window, list(range(n)))


def test_a_window_off_by_one_is_visible():
    rng = np.random.default_rng(1)
    T = 6
    q, k, v = rng.normal(size=(T, 1, 2)), rng.normal(size=(T, 1, 2)), rng.normal(size=(T, 1, 2))
    pos = np.arange(T)
    assert not np.allclose(A.attention(q, k, v, pos, pos, 3), _fold_reference(q, k, v, 4), atol=1e-6)


def test_padding_and_sinks():
    pos = np.arange(6)
    valid = np.array([False, True, True, True, True, True])
    assert A.visible_counts(pos, pos, 2, key_valid=valid).tolist() == [0, 1, 2, 2, 2, 2]
    assert A.window_mask([5], pos, 2, sinks=1)[0].tolist() == [True, False, False, False, True, True]
    out = A.attention(np.ones((6, 1, 2)), np.ones((6, 1, 2)), np.ones((6, 1, 2)), pos, pos, 2, key_valid=valid)
    assert np.all(out[0] == 0) and np.allclose(out[1:], 1.0)


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="multiple of kv heads"):
        A.attention(np.ones((1, 3, 2)), np.ones((1, 2, 2)), np.ones((1, 2, 2)), [0], [0], 1)
    with pytest.raises(ValueError, match="window must be >= 1"):
        A.window_mask([0], [0], 0)
