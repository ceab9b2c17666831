"""Pieces of the gate's steps on their own: claim levels, identity perturbations, step 1's declaration
check, step 4's lengths for a paged subject, and a failure outranking a harness fault."""

from __future__ import annotations

import numpy as np
import pytest

from fuzz.gate.compare import agrees, within
from fuzz.gate.config import Claim
from fuzz.gate.declare import step1
from fuzz.gate.identity import perturbations
from fuzz.gate.parity import lengths
from tests.support.gate import D, context, run_gate, steps


def test_claim_levels():
    base = np.array([[0.0, 1.0, 0.5], [2.0, 0.0, 1.0]])
    assert agrees(base.copy(), base, Claim("exact"), (1e-10, 0)) is None
    nudged = base + np.array([[0, 1e-15, 0], [0, 0, 0]])
    assert "position 7 are not bit-identical" in agrees(nudged, base, Claim("exact"), (1e-10, 0), [7, 8])
    assert agrees(nudged, base, Claim("logits", 1e-12), (1e-10, 0)) is None
    assert agrees(base + 0.3, base, Claim("logits", 0.1), (1e-10, 0), [7, 8]) == \
        "logits of position 7 differ by 0.3 > 0.1"
    swapped = base[:, [0, 2, 1]]
    assert "greedy token at position 0" in agrees(swapped, base, Claim("greedy"), (1e-10, 0))
    tie = np.array([[1.0, 1.0 + 1e-12, 0.0]])
    assert agrees(tie[:, [1, 0, 2]], tie, Claim("greedy"), (1e-10, 0)) is None  # a genuine tie
    assert agrees(base + 5, base, Claim("task"), (1e-10, 0)) is None  # not checked here
    nan = base.copy()
    nan[1, 1] = np.nan
    assert within(nan, base, (1.0, 0.0)) is not None and agrees(nan, base, Claim("exact"), (0, 0)) is not None


@pytest.mark.parametrize("key, value, first", [
    ("window", [8, None], [9, None]), ("window", 4, 5), ("dtype", "float64", "float32"),
    ("adapter", None, "gate-perturbed-adapter"), ("rope_scaling", None, {"rope_type": "linear", "factor": 2.0}),
    ("rope_scaling", {"rope_type": "linear", "factor": 2.0}, {"rope_type": "linear", "factor": 4.0}),
    ("kv_head_map", [0, 0, 1, 1], [0, 1, 0, 1]), ("kv_head_map", [0, 1, 0, 1], [0, 0, 1, 1]),
    ("kv_head_map", [0, 1, 2, 3], [3, 2, 1, 0]), ("padding_side", "left", "right"), ("head_dim", 4, 8),
    ("weights_revision", 5, 6), ("weights_revision", "main", "main-perturbed"), ("rope_theta", 1e4, 2e4),
    ("rope_theta", {"sliding_attention": 10.0, "full_attention": 20.0}, {"sliding_attention": 20.0, "full_attention": 40.0}),
])
def test_perturbations_change_the_value(key, value, first):
    out = perturbations(key, value)
    assert out and out[0] == first and value not in out


def test_nothing_to_perturb():
    assert perturbations("kv_head_map", [0, 0, 0, 0]) == []  # MQA: every map is the same map
    assert perturbations("something", object()) == []


def test_an_exact_kind_must_keep_the_identity():
    s1 = step1(context("decoder", D + "Window9Decoder", "layout", "exact"))
    assert s1.verdict == "fail" and "window: [8, None] -> [9, None]" in s1.summary
    s1 = step1(context("decoder", D + "Window9Decoder", "eviction", "greedy"))
    assert s1.verdict == "pass" and "window: [8, None] -> [9, None]" in s1.checks[0].detail
    s1 = step1(context("decoder", D + "MinimalDecoder"))
    assert s1.verdict == "pass" and "only the baseline reports" in s1.checks[0].detail


def test_a_paged_subject_gets_lengths_around_its_block_size():
    ctx = context(D + "BlockDecoder", D + "BlockDecoder")
    assert lengths(ctx) == [1, 3, 4, 5, 7, 8, 9, 17]


def test_a_failure_outranks_a_harness_fault(tmp_path, monkeypatch):
    import fuzz.gate.run as run

    def broken(ctx):
        raise RuntimeError("a bug in the gate")
    monkeypatch.setattr(run, "STEPS", ((1, run.step1), (3, broken), (4, run.step4)))
    rc, doc = run_gate(tmp_path, "decoder", "mutant:decoder-rope-at-slot")
    s = steps(doc)
    assert rc == 1 and doc["verdict"] == "fail" and s[3]["verdict"] == "fault" and s[4]["verdict"] == "fail"
    md = (tmp_path / "report" / "report.md").read_text().splitlines()[0]
    assert md == "# kvwindow gate — FAIL at step 4 (positive parity); harness fault at step 3"
