"""Every decoder mutant (``impl.mutants.decoder_mutants``) fails ``kvwindow gate`` at the step that should
catch it: step 4 (positive parity), in a cell that names the bug — cached against uncached on the mutant
itself, at the first position the bug can show (W = 8: the first eviction, or the window's edge), or the
layer check for a cache that holds more than the window. A ``layout`` claim of ``exact`` against
``decoder``; steps 2 and 4 run on a prepared context at the smoke budget (the whole gate is
``tests/test_gate_examples.py``'s job)."""

from __future__ import annotations

import pytest

from fuzz.gate.declare import step1, step2
from fuzz.gate.parity import step4
from impl.mutants.decoder_mutants import DECODER_MUTANTS
from tests.support.gate import context, failing

#: mutant -> (what the first failing candidate check of step 4 says, does the exact claim of step 2 fail)
EXPECTED = {
    "cache-length-position": ("logits of position 9 differ", True),  # position W+1 is the first placed wrong
    "keeps-w-plus-1": ("holds positions", True),  # the mask hides the extra entry; the layer check does not
    "rope-at-slot": ("logits of position 8 differ", True),  # the first key rotated at its slot, p mod W != p
    # the full forward lets each query see the next token; a cached decode has none to see, so only the
    # prompt's rows (and the uncached path against the baseline) show it; greedy continuations do not
    "full-mask-diagonal": ("logits of position 0 differ", False),
    "window-edge-mask": ("logits of position 8 differ", True),  # the first query with W+1 keys in reach
}


def test_every_mutant_has_an_expectation():
    assert set(EXPECTED) == set(DECODER_MUTANTS)


@pytest.mark.parametrize("name", sorted(DECODER_MUTANTS))
def test_mutant_fails_at_step_4(name):
    ctx = context("decoder", f"mutant:decoder-{name}")
    assert step1(ctx).verdict == "pass"  # same identity: the declaration is consistent
    s4 = step4(ctx)
    assert s4.verdict == "fail"
    cand = [c for c in failing(s4) if c.subject.startswith("candidate ")]
    base = [c for c in failing(s4) if c.subject.startswith("baseline ")]
    assert cand and not base
    first = cand[0]
    text, claim_fails = EXPECTED[name]
    assert first.name.startswith("cached vs uncached · "), first.name
    assert text in first.detail, first.detail
    assert s4.summary.startswith("cached vs uncached") and name in s4.summary
    s2 = step2(ctx)
    assert (s2.verdict == "fail") == claim_fails, s2.summary


def test_full_mask_diagonal_also_differs_from_the_baseline_uncached():
    s4 = step4(context("decoder", "mutant:decoder-full-mask-diagonal"))
    pair = [c for c in failing(s4) if c.name.startswith("candidate vs baseline (uncached)")]
    assert pair and "not bit-identical" in pair[0].detail
