"""The adapter's pinned HF cache conventions (plain arithmetic, impl/hf/conventions.py) agree with
their restatement through the oracle's lastWindow (fuzz/targets/hf/conventions.py). Needs no transformers."""

import pytest

from fuzz.targets.hf import conventions as hf_conventions
from impl.hf import conventions


@pytest.mark.parametrize("key", sorted(hf_conventions.CONVENTIONS))
def test_pinned_convention_equals_spec_restatement(key):
    api, kind = key
    for window in range(1, 9):
        for n in range(0, 3 * window + 2):
            for k in range(0, 2 * window + 3):
                hf_conventions.check(api, kind, n, k, window)


def test_last_is_last_window():
    import pyspec

    for w in range(0, 6):
        for end in range(0, 9):
            assert conventions.last(w, end) == pyspec.last_window(w, range(end))


def test_drift_is_reported(monkeypatch):
    def keeps_w(n, k, window):  # a 5.x dynamic-layer statement with W instead of W-1
        return conventions.last(window, n) + list(range(n, n + k)), conventions.last(window, n + k)

    keeps_w.__name__ = "dynamic_layer"
    monkeypatch.setitem(hf_conventions.CONVENTIONS, ("layers", "dynamic"),
                        (keeps_w, hf_conventions.dynamic_layer))
    with pytest.raises(hf_conventions.ConventionDrift, match="pyspec.last_window"):
        hf_conventions.check("layers", "dynamic", 5, 1, 3)
