"""``py-decoder:module:Class``: a user's decoder as a gate subject and as a fuzz target (registry family),
cached rows against the class's own ``full()`` over the op language."""

from __future__ import annotations

import pytest

from fuzz.gate.quality import step7
from fuzz.ops import Case
from fuzz.targets import registry
from fuzz.targets.base import Mismatch, TargetError
from tests.support.gate import D, context

EDGES = [(8, "chunk:7 push push push"), (8, "chunk:8 push chunk:9 push"), (3, "push push push push reset:5 chunk:12 push"),
         (1, "chunk:3 push push"), (4, "chunk:0 push chunk:0 chunk:11 reset:2 push push push")]


def test_a_correct_decoder_passes_the_boundary_cases():
    target = registry.resolve(D + "MyDecoder")
    assert target.kind == "model" and "set_identity" in target.versions()["windows"]
    phases = set()
    for w, ops in EDGES:
        phases |= target.run(Case.parse(w, ops)).phases
    assert {"first-eviction", "chunk>W", "after-reset"} <= phases


def test_a_decoder_with_a_position_bug_is_a_mismatch_naming_the_op():
    target = registry.resolve(D + "PositionBugDecoder")
    with pytest.raises(Mismatch) as e:
        target.run(Case.parse(3, "chunk:3 push push"))
    assert e.value.index == 2 and "position 4" in e.value.detail and "against full()" in e.value.detail


def test_a_minimal_decoder_runs_at_its_own_window():
    target = registry.resolve(D + "MinimalDecoder")
    assert "the class's own" in target.versions()["windows"]
    target.run(Case.parse(3, "chunk:20 push push reset:2 push"))


@pytest.mark.parametrize("cls, text", [("NeedsArgs", "built with no arguments"), ("NoFull", "missing full"),
                                       ("Nope", "has no attribute 'Nope'")])
def test_bad_classes_are_target_errors(cls, text):
    with pytest.raises(TargetError, match=text):
        registry.resolve(D + cls)


def test_quality_slices_of_a_quantised_cache_hold_the_claim_they_can():
    # float16 K/V move logits by ~1e-3: within logits:1e-2, not within logits:1e-5
    assert step7(context("decoder", D + "QuantisedDecoder", "quantisation", "logits:1e-2")).verdict == "pass"
    s7 = step7(context("decoder", D + "QuantisedDecoder", "quantisation", "logits:1e-5"))
    assert s7.verdict == "fail" and len(s7.failures()) == 3
    names = {c.name for c in s7.checks}
    assert names == {"retrieval before the window", "exact copy", "long number"}
    task = step7(context("decoder", D + "QuantisedDecoder", "quantisation", "task"))
    assert task.verdict == "n/a" and all("largest logit difference" in c.detail for c in task.checks)
