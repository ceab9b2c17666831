"""Distinct findings (DESIGN §4): a campaign saves each bug once, with its own seed, and explores on.

The caches are :mod:`tests.support.two_bugs` (independent bugs that each fail cases the other does not reach
first). Budgets are seconds of fuzzing; what is asserted does not depend on how fast the machine is beyond
the first examples (each bug dies in the boundary tours or the first generated batch).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fuzz.campaign import fuzz_target
from fuzz.cli import main
from fuzz.config import CampaignConfig
from fuzz.ops import Case
from fuzz.oracle import describe_difference
from fuzz.phases.context import Campaign, Found
from fuzz.phases.reduce import reduce_failure
from fuzz.results import Failure, TargetResult, merge, message_shape, signature
from fuzz.targets.base import Mismatch, RunStats, Target
from fuzz.targets.cache import CacheTarget, compare_arrays

TWO = "py:tests.support.two_bugs:"


def run(capsys, *argv):
    try:
        rc = main(list(argv))
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def fuzz(capsys, tmp_path, target, *argv, time_s="8"):
    rep = tmp_path / "r.json"
    rc, out, err = run(capsys, "fuzz", "--target", target, "--time", time_s, "--seed", "3", "--plain",
                       "--report", str(rep), "--seeds-dir", str(tmp_path / "s"), "--db", str(tmp_path / "db"), *argv)
    return rc, out, err, json.loads(rep.read_text())


def seeds(tmp_path):
    return sorted(p for p in (tmp_path / "s").glob("*.json"))


def test_two_independent_bugs_are_two_findings_with_two_seeds_and_replays_that_resolve(tmp_path, capsys):
    rc, out, err, doc = fuzz(capsys, tmp_path, TWO + "EvictionAndReset")
    assert rc == 1, out + err
    fails = doc["failures"]
    kinds = sorted(f["signature"].split(" | ")[2] for f in fails)
    assert kinds == ["reset", "write"], [f["signature"] for f in fails]
    assert len({f["signature"] for f in fails}) == 2 and len(seeds(tmp_path)) == 2
    assert {f["seed_path"] for f in fails} == {str(p) for p in seeds(tmp_path)}
    assert "2 distinct findings" in out and out.count("  signature: ") == 2
    for f in fails:  # each replay command resolves and fails again with the same signature
        argv = f["replay"].split()
        assert argv[:2] == ["kvwindow", "replay"] and f["replay"] in out
        rc2, out2, err2 = run(capsys, *argv[1:])
        assert rc2 == 1 and "FAILED" in out2, out2 + err2
        assert f["repeats"] + f["left_out"] >= 0
    # the campaign went on after its first finding: far more cases than it took to find both
    assert doc["targets"][0]["examples"] > doc["targets"][0]["examples_to_fail"] + 20


def test_a_crash_and_a_mismatch_are_two_findings(tmp_path, capsys):
    rc, out, err, doc = fuzz(capsys, tmp_path, TWO + "CrashAndEviction")
    assert rc == 1, out + err
    assert sorted(f["kind"] for f in doc["failures"]) == ["crash", "mismatch"] and len(seeds(tmp_path)) == 2


def test_one_bug_hit_again_and_again_is_one_finding(tmp_path, capsys):
    rc, out, err, doc = fuzz(capsys, tmp_path, TWO + "EvictionOnly")
    assert rc == 1, out + err
    (f,) = doc["failures"]
    assert f["repeats"] + f["left_out"] > 10, f  # hit by many later cases, reported once
    assert len(seeds(tmp_path)) == 1


def test_stop_on_first_keeps_the_old_behaviour(tmp_path, capsys):
    rc, out, err, doc = fuzz(capsys, tmp_path, TWO + "EvictionAndReset", "--stop-on-first")
    assert rc == 1, out + err
    (f,) = doc["failures"]
    assert len(seeds(tmp_path)) == 1 and doc["config"]["stop_on_first"] is True
    t = doc["targets"][0]
    assert t["examples"] <= t["examples_to_fail"] + 1  # nothing ran after the finding


def test_workers_merge_findings_by_signature(tmp_path, capsys):
    rc, out, err, doc = fuzz(capsys, tmp_path, TWO + "EvictionAndReset", "--workers", "2", time_s="10")
    assert rc == 1, out + err
    sigs = [f["signature"] for f in doc["failures"]]
    assert len(sigs) == len(set(sigs)) == 2, sigs  # both workers found both bugs: reported once each
    assert len(seeds(tmp_path)) == 2  # and the second worker's copies of the seeds were removed


def test_merge_keeps_one_failure_per_signature_and_adds_up_repeats():
    a = Failure("t", "e", Case.parse(1, "push push"), signature="S", repeats=2)
    b = Failure("t", "e", Case.parse(2, "push push push"), signature="S", repeats=5, left_out=1,
                seed_path="/x/b.json")
    c = Failure("t", "e2", Case.parse(1, "push reset:1"), signature="T")
    m = merge("t", [TargetResult("t", failures=[a, c]), TargetResult("t", failures=[b])])
    assert [f.signature for f in m.failures] == ["S", "T"]
    assert m.failures[0].repeats == 2 + 5 + 1 and m.failures[0].left_out == 1 and m.duplicate_seeds == ["/x/b.json"]
    assert a.repeats == 2  # merging twice (every progress update) counts nothing twice
    merge("t", [TargetResult("t", failures=[a, c]), TargetResult("t", failures=[b])])
    assert a.repeats == 2


# ---------------------------------------------------------------------------
# Signatures


def _mismatch(case: Case, target: Target) -> Mismatch:
    with pytest.raises(Mismatch) as e:
        target.run(case)
    return e.value


def test_two_cases_of_one_bug_share_a_signature_and_two_bugs_do_not():
    from tests.support.two_bugs import EvictionAndReset

    t = CacheTarget(TWO + "EvictionAndReset", EvictionAndReset)
    small, big = Case.parse(1, "push push"), Case.parse(300, "chunk:299 push push push")
    other_w = Case.parse(7, "chunk:3 chunk:5")
    sig = {c: signature(t.name, _mismatch(c, t), c) for c in (small, big, other_w)}
    assert sig[small] == sig[big] == sig[other_w], sig
    reset = Case.parse(5, "chunk:3 reset:9")
    assert signature(t.name, _mismatch(reset, t), reset) != sig[small]


def test_message_shape_abstracts_values_not_words():
    assert message_shape("key of position 5 (index 1): got [1.0, 2.0]..., want [3.0, 4.5]... (1 of 3 rows differ)") \
        == message_shape("key of position 70000 (index 4095): got [9.0]..., want [-1e+30]... (12 of 4096 rows differ)")
    assert message_shape("raised IndexError: index 5 is out of bounds") != message_shape("raised KeyError: 'x'")
    assert message_shape("instance @2: positions [1] != spec [2]") == message_shape("positions [7, 8] != spec [9]")


# ---------------------------------------------------------------------------
# Shrinking never crosses signatures


class TwoMismatches(Target):
    """Bug A: any case with a chunk fails at its first chunk. Bug B: a reset after a push fails at the reset.
    A case with both, B first, shrinks into A if a shrink may change the signature (drop the push: the chunk
    fails first)."""

    name = "two-mismatches"

    def run(self, case):
        pushed = False
        for i, op in enumerate(case.ops):
            if op.text.startswith("reset") and pushed:
                raise Mismatch(self.name, i, op, "a stale entry after reset: positions [0] != spec []")
            if op.text.startswith("chunk"):
                raise Mismatch(self.name, i, op, "key of position 3 (index 0): got [1.0]..., want [2.0]...")
            pushed = pushed or op.text == "push"
        return RunStats(case.tokens)


def test_a_reduction_that_would_cross_signatures_is_rejected(tmp_path):
    t = TwoMismatches()
    case = Case.parse(4, "push push reset:2 chunk:3 push chunk:2")
    err = _raised(t, case)
    sig = signature(t.name, err, case)
    # The plain reducer (same exception type) crosses into bug A: dropping the pushes makes the chunk fail first.
    crossed, _ = reduce_failure(t, case, err)
    assert signature(t.name, crossed.error, crossed.case) != sig
    # The campaign's reduction keeps bug B, and keeps bug A aside as a finding of its own.
    camp = Campaign(t, CampaignConfig(seconds=5, campaign_seed=0, seeds_dir=str(tmp_path)), seconds=5)
    camp.explicit.add(case.id)
    camp.settle(Found(case, err))
    sigs = [f.signature for f in camp.res.failures]
    assert sigs[0] == sig and str(camp.res.failures[0].case) == "window=1 ops: push reset:1", sigs
    assert len(sigs) == 2 and "chunk" in str(camp.res.failures[1].case)  # bug A, met while reducing B


def _raised(t: Target, case: Case) -> Mismatch:
    with pytest.raises(Mismatch) as e:
        t.run(case)
    return e.value


def test_a_hypothesis_shrink_that_would_cross_signatures_is_rejected(tmp_path):
    """In the generated phase: whichever bug is found first, each saved case fails with its own signature."""
    res = fuzz_target(TwoMismatches(), CampaignConfig(seconds=6, campaign_seed=1, seeds_dir=str(tmp_path)))
    assert len(res.failures) == 2, [f.signature for f in res.failures]
    t = TwoMismatches()
    for f in res.failures:
        assert signature(t.name, _raised(t, f.case), f.case) == f.signature


# ---------------------------------------------------------------------------
# Readable mismatches at any window


@pytest.mark.parametrize("w", [300, 4096])
def test_a_mismatch_at_a_large_window_names_the_first_difference(w):
    from tests.support.two_bugs import EvictionOnly

    t = CacheTarget("keeps-w+1", EvictionOnly)
    msg = str(_mismatch(Case.parse(w, f"chunk:{w} push"), t))
    assert len(msg) < 400, msg
    assert f"index 0: {w + 1} differ, length got {w + 1}, spec {w}" in msg, msg
    assert f"got [<0>, 1, 2, 3 ...], spec [<1>, 2, 3, 4 ...]; last got [{w}], spec [{w}]" in msg, msg


@pytest.mark.parametrize("w", [300, 4096])
def test_a_difference_in_the_middle_shows_its_neighbours(w):
    want = list(range(w))
    got = want[:]
    got[w // 2] = -7
    msg = describe_difference(got, want)
    mid = w // 2
    assert msg == (f"positions differ from spec lastWindow at index {mid}: 1 differ, length {w} each; "
                   f"got [... {mid - 3}, {mid - 2}, {mid - 1}, <-7>, {mid + 1}, {mid + 2}, {mid + 3} ...], "
                   f"spec [... {mid - 3}, {mid - 2}, {mid - 1}, <{mid}>, {mid + 1}, {mid + 2}, {mid + 3} ...]")
    keys = np.arange(w * 4, dtype=np.float32).reshape(w, 4)
    bad = keys.copy()
    bad[mid:, 3] = 0
    pos = np.arange(w)
    diff = compare_arrays((pos, bad, -keys), (pos, keys, -keys))
    assert diff.startswith(f"key of position {mid} (index {mid}): got [") and diff.endswith(
        f"({w - mid} of {w} rows differ)") and len(diff) < 300, diff


def test_a_paged_mismatch_is_readable_too():
    from fuzz.paged.checks import compare

    w = 4096
    pos = np.arange(w, dtype=np.int64)
    keys = np.zeros((w, 2), np.float32)
    msg = compare((pos + 1, keys, keys), (pos, keys, keys))
    assert msg.startswith("positions differ from lastWindow (W-1) of its history at index 0:") and len(msg) < 300
