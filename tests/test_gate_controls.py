"""Step 5's negative controls: each is detected by step 4's checks on every decoder subject, a control the
checks cannot see fails the gate, and a control the subject cannot host is not applicable with the reason.
(The HF subjects' controls: ``tests/test_gate_examples.py``.)"""

from __future__ import annotations

from fuzz.gate.controls import step5
from fuzz.gate.parity import step4
from tests.support.gate import D, context

CONTROLS = {"position off by one", "stale adapter", "truncated block", "window + 1", "window - 1",
            "cross-request handle"}


def _step5(baseline, candidate, kind="layout", claim="exact"):
    ctx = context(baseline, candidate, kind, claim)
    step4(ctx)
    return step5(ctx)


def test_every_control_is_detected_on_the_torch_and_c_ring_decoders():
    s5 = _step5("decoder", "decoder@c")
    assert s5.verdict == "pass"
    by = {(c.subject, c.name): c for c in s5.checks}
    for subject in ("baseline decoder", "candidate decoder@c"):
        for name in CONTROLS:
            c = by[(subject, name)]
            assert c.verdict == "pass" and "detected —" in c.detail, (subject, name, c.detail)
    # the C ring refuses the gap a position off by one makes; the torch ring computes with it and diverges
    assert "PositionError" in by[("candidate decoder@c", "position off by one")].detail
    assert "cached vs uncached" in by[("baseline decoder", "position off by one")].detail
    # window +/- 1 shows first exactly where the two windows differ: position W (W + 1 keys) and W - 1
    assert "position 8 differ" in by[("baseline decoder", "window + 1")].detail
    assert "position 7 differ" in by[("baseline decoder", "window - 1")].detail
    # the stale-adapter control answers the prompt from a fresh instance: only the stale cache can show it
    assert "position 0" not in by[("baseline decoder", "stale adapter")].detail


def test_a_control_the_checks_cannot_see_fails_the_gate():
    s5 = _step5("decoder", D + "IgnoresWindowDecoder")
    assert s5.verdict == "fail"
    bad = {c.name: c for c in s5.checks if c.verdict == "fail"}
    assert set(bad) == {"window + 1", "window - 1"}
    assert all(c.subject.startswith("candidate ") and "undetected: the parity check cannot see this class"
               in c.detail for c in bad.values())


def test_controls_a_minimal_decoder_cannot_host_are_not_applicable():
    s5 = _step5("decoder", D + "MinimalDecoder")
    mine = {c.name: c for c in s5.checks if c.subject.startswith("candidate ")}
    assert set(mine) == CONTROLS
    assert mine["cross-request handle"].verdict == "pass"
    assert {n for n, c in mine.items() if c.verdict == "n/a"} == CONTROLS - {"cross-request handle"}
    assert "no inject()" in mine["position off by one"].detail
    assert s5.verdict == "pass"


def test_controls_on_an_approximate_candidate_are_judged_at_the_claim():
    s5 = _step5("decoder", D + "QuantisedDecoder", "quantisation", "logits:1e-2")
    mine = [c for c in s5.checks if c.subject.startswith("candidate ")]
    assert len(mine) == len(CONTROLS) and all(c.verdict == "pass" for c in mine)
    assert all("> 0.01" in c.detail or "raised" in c.detail for c in mine)


def test_a_task_claim_leaves_no_control_detectable_on_the_candidate():
    s5 = _step5("decoder", D + "QuantisedDecoder", "quantisation", "task")
    mine = [c for c in s5.checks if c.subject.startswith("candidate ")]
    assert mine and all(c.verdict == "n/a" for c in mine)
