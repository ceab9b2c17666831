"""ONNX Runtime targets (``ort:gqa``, ``ort:attention``): the window convention of onnxruntime-genai's builder and
of the ONNX spec, every view of a case passes (or reproduces a written-up finding) on the installed release, and a
convention off by one fails — the check can fail. Skips with the reason where onnxruntime is not installed."""

from __future__ import annotations

import pytest

from fuzz.ops import Case
from fuzz.targets import registry
from fuzz.targets.base import Mismatch

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'kvwindow[ort]')")
pytest.importorskip("onnx", reason="onnx is not installed (pip install 'kvwindow[ort]')")

from fuzz.targets.engines import ort as T  # noqa: E402
from impl.engines import ort as O  # noqa: E402

CASES = [(3, "chunk:5 push push chunk:4 push chunk:2"), (1, "push push push chunk:3 push"),
         (4, "chunk:12 push chunk:9 push"), (5, "chunk:1 chunk:0 push reset:2 chunk:3 push push push"),
         (2, "chunk:2 push chunk:7 push push chunk:1 push")]


def test_conventions_are_the_converters():
    assert [O.gqa_local_window_size(w) for w in (1, 4, 4096)] == [1, 4, 4096]  # onnxruntime-genai: sliding_window
    assert [O.attention_left_window_size(w) for w in (1, 4)] == [0, 3]  # ONNX Attention-25: W - 1 to the left


@pytest.mark.parametrize("kind", T.KINDS)
def test_cases_pass_or_reproduce_a_written_up_finding(kind):
    target, why = registry.probe(f"ort:{kind}")
    if target is None:
        pytest.skip(f"ort:{kind} unavailable on this release: {why}")
    for w, text in CASES:
        stats = target.run(Case.parse(w, text))
        assert stats.tokens == Case.parse(w, text).tokens
        assert all(v in (True, False) for v in stats.known.values())


def test_windowed_resident_count_keeps_the_window():
    for cap, w in ((3, 3), (5, 3), (6, 1)):
        for t in range(1, 40):
            n = O.windowed_resident(t, cap, w)
            assert min(t, w) <= n <= min(t, cap)


def _off_by_one(monkeypatch, name):
    monkeypatch.setattr(O, name, lambda window, _f=getattr(O, name): _f(window) + 1)
    O.gqa_session.cache_clear()
    O.attention_session.cache_clear()


@pytest.mark.parametrize("kind,name", [("gqa", "gqa_local_window_size"), ("attention", "attention_left_window_size")])
def test_a_convention_off_by_one_is_caught(monkeypatch, kind, name):
    target, why = registry.probe(f"ort:{kind}")
    if target is None:
        pytest.skip(why)
    target.strict = True
    _off_by_one(monkeypatch, name)
    try:
        with pytest.raises(Mismatch, match="attention output"):
            target.run(Case.parse(3, "chunk:6 push push"))
    finally:
        monkeypatch.undo()
        O.gqa_session.cache_clear()
        O.attention_session.cache_clear()


def test_listed_and_in_the_default_campaign(monkeypatch):
    names = [n for n, _ in registry.listed_names()]
    assert "ort:gqa" in names and "ort:attention" in names
    # Only this family's listing (probing every other target costs ~10 s): the mechanism is the same.
    monkeypatch.setattr(registry, "BUILTIN", {})
    monkeypatch.setattr(registry, "LISTED", {"ort:": registry.LISTED["ort:"]})
    info = {t.name: t for t in registry.list_targets()}
    assert info["ort:gqa"].available, info["ort:gqa"].reason
    assert "ort:gqa" in registry.default_targets()


def test_unknown_member_is_a_usage_error():
    from fuzz.targets.base import TargetError

    with pytest.raises(TargetError, match="ort:gqa"):
        registry.resolve("ort:nope")


def test_a_row_1_mismatch_names_row_1_and_its_own_positions(monkeypatch):
    """Row 1 of the padded batches is ``short`` tokens shorter: a wrong row-1 output is reported with row 1's
    positions (not row 0's), so the message leads to the right query."""
    from fuzz.targets.engines import streams as S

    target, why = registry.probe("ort:attention")
    if target is None:
        pytest.skip(why)
    target.strict = True
    real = O.attention_past

    def row1_off(sess, q, k, v, mask, pk, pv):
        y, pk2, pv2 = real(sess, q, k, v, mask, pk, pv)
        if q.shape[0] == 2:
            y = y.copy()
            y[1] += 1.0
        return y, pk2, pv2

    monkeypatch.setattr(O, "attention_past", row1_off)
    case = Case.parse(3, "chunk:5 push")
    short = min(1 + S.case_seed(case) % 3, 4)
    with pytest.raises(Mismatch, match=rf"op #0 .*left-padded d={short}, batch row 1\] attention output for "
                                       rf"positions 0\.\.{4 - short}:"):
        target.run(case)


def test_the_gqa_probe_is_a_case_of_ort_gqa_and_its_death_would_be_ort_gqas_crash(monkeypatch):
    """The GQA availability probe's call (W = 2, one token on an empty past) is ort:gqa's case ``window 2, push``:
    it runs here (the probe survived: no probe crash), and a death of that probe recorded on the window is reported
    by ort:gqa — not by ort:attention, whose calls it does not make (fuzz.targets.probes)."""
    from fuzz.targets.engines import base

    gqa, why = registry.probe("ort:gqa")
    assert gqa is not None, why
    ((what, case),) = gqa.probe_calls().values()
    assert case == Case.parse(2, "push") and gqa.run(case).tokens == 1 and gqa.probe_crashes() == []
    monkeypatch.setitem(base.PROBE_CRASHES, "gqa", "Fail: local_window_size rejected")
    (pc,) = gqa.probe_crashes()
    assert pc.case == case and "local_window_size rejected" in str(pc.error) and pc.known is None
    attention, why = registry.probe("ort:attention")
    if attention is not None:
        assert attention.probe_crashes() == []
