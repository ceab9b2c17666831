"""Known findings are reported, never hidden: a case that hits a written-up finding runs; a failure the
finding explains is counted as reproduced (exit 1 unless --accept-known), a pass as not reproduced, a
failure it does not explain is an ordinary finding; --skip-known leaves the cases out and says how
many. On a stand-in target (tests/support/known.py) so every branch runs on any release."""

from __future__ import annotations

import json

import pytest

from fuzz.campaign import fuzz_target
from fuzz.cli import main
from fuzz.config import CampaignConfig
from fuzz.ops import Case, Chunk, Push, Reset
from fuzz.results import TargetResult, merge
from fuzz.targets import registry
from fuzz.targets.base import Mismatch
from fuzz.targets.hf import findings
from tests.support.known import FINDING, RELEASE, WindowTwoBug


@pytest.fixture(autouse=True)
def fake_finding(monkeypatch):
    monkeypatch.setattr(findings, "FINDINGS", findings.FINDINGS + (FINDING,))
    monkeypatch.setitem(registry.BUILTIN, "fake-known", ("tests.support.known:make_known", False))
    monkeypatch.setitem(registry.BUILTIN, "fake-fixed", ("tests.support.known:make_fixed", False))


def test_a_failure_the_finding_explains_is_recorded_as_reproduced():
    stats = WindowTwoBug().run(Case(2, (Push(), Push(), Push(), Push())))
    assert stats.known == {"fake-window-2": True}
    assert stats.tokens == 4 and "first-eviction" in stats.phases  # the case's coverage still counts


def test_a_case_that_hits_the_finding_and_passes_is_not_reproduced():
    assert WindowTwoBug().run(Case(2, (Push(), Push()))).known == {"fake-window-2": False}
    assert WindowTwoBug(fixed=True).run(Case(2, (Chunk(5),))).known == {"fake-window-2": False}


def test_a_case_that_misses_the_finding_records_nothing():
    assert WindowTwoBug().run(Case(3, (Push(), Push(), Push()))).known == {}


def test_a_failure_the_finding_does_not_explain_is_an_ordinary_mismatch():
    """The case hits the finding (its second stream has W=2), but fails before it: bug B."""
    case = Case(3, (Chunk(5), Reset(2), Push(), Push(), Push()))
    with pytest.raises(Mismatch, match="bug B"):
        WindowTwoBug(chunk5=True).run(case)
    # The same case with bug B gone reproduces the finding at op #4.
    assert WindowTwoBug().run(case).known == {"fake-window-2": True}


def test_skip_known_runs_nothing_and_strict_raises():
    t = WindowTwoBug()
    t.skip_known = True
    stats = t.run(Case(2, (Push(), Push(), Push())))
    assert stats.known == {"fake-window-2": None} and stats.tokens == 0 and not t.ran
    with pytest.raises(Mismatch, match="bug A"):
        WindowTwoBug(strict=True).run(Case(2, (Push(), Push(), Push())))


def test_the_finding_applies_only_to_its_kind_and_releases():
    assert FINDING.applies("fake", RELEASE) and FINDING.applies("fake", "9.9.0")
    assert not FINDING.applies("fake", "9.8.3") and not FINDING.applies("dynamic", RELEASE)
    assert findings.in_span("4.50.3", "4.45-4.51") and not findings.in_span("4.52.0", "4.45-4.51")
    assert findings.in_span("5.10.4", "4.57-5.17") and findings.in_span("4.48.1", "4.48")


def test_the_campaign_counts_known_findings_per_target(tmp_path):
    res = fuzz_target(WindowTwoBug(), CampaignConfig(seconds=20, max_examples=150, campaign_seed=0, known_repeats=None,
                                                     seeds_dir=str(tmp_path)))
    assert not res.failures and not list(tmp_path.iterdir())  # a known finding is never a seed
    counts = res.known["fake-window-2"]
    assert counts["reproduced"] > 3 and counts["not_reproduced"] > 0 and counts["skipped"] == 0
    assert res.known_reproduced == ["fake-window-2"]
    again = TargetResult.from_json(json.loads(json.dumps(res.to_json())))
    assert again.known == res.known
    both = merge(res.name, [res, again])
    assert both.known["fake-window-2"]["reproduced"] == 2 * counts["reproduced"]


@pytest.mark.parametrize("repeats", [3, 1, 0])
def test_after_k_reproductions_the_cases_of_a_finding_are_left_out_before_they_run(tmp_path, repeats):
    """Issue 20: a known finding reproduced K times stops eating the budget; its later cases are counted as
    skipped, never run (the target sees none of them), and the campaign still draws its 150 examples."""
    target = WindowTwoBug()
    res = fuzz_target(target, CampaignConfig(seconds=20, max_examples=150, campaign_seed=0, known_repeats=repeats,
                                             save_seeds=False))
    counts = res.known["fake-window-2"]
    assert counts["reproduced"] == repeats and counts["skipped"] > 0, counts
    ran_hitting = [c for c in target.ran if any(w == 2 for w, _ in c.streams())]
    assert len(ran_hitting) == counts["reproduced"] + counts["not_reproduced"]
    assert res.examples >= 150 and res.phases_run["generated"]["examples"] > 0


def test_skip_known_campaign_counts_skips(tmp_path):
    res = fuzz_target(WindowTwoBug(), CampaignConfig(seconds=20, max_examples=150, campaign_seed=0,
                                                     seeds_dir=str(tmp_path), skip_known=True))
    counts = res.known["fake-window-2"]
    assert counts["skipped"] > 0 and counts["reproduced"] == counts["not_reproduced"] == 0


def _fuzz(capsys, tmp_path, target, *flags):
    rep = tmp_path / "r.json"
    rc = main(["fuzz", "--target", target, "--time", "5", "--max-examples", "150", "--seed", "0", "--plain",
               "--seeds-dir", str(tmp_path / "s"), "--db", str(tmp_path / "db"), "--report", str(rep), *flags])
    return rc, capsys.readouterr().out, json.loads(rep.read_text())


def test_a_reproduced_known_finding_exits_1_and_is_named(tmp_path, capsys):
    rc, out, doc = _fuzz(capsys, tmp_path, "fake-known")
    assert rc == 1 and doc["exit_code"] == 1
    assert f"known finding fake-window-2 reproduced on transformers {RELEASE} by fake-known (" in out
    assert "docs/findings/fake-window-2.md" in out and "KNOWN" in out
    assert doc["targets"][0]["known_findings"]["fake-window-2"]["reproduced"] > 0
    assert not (tmp_path / "s").exists()  # no seed


def test_accept_known_exits_0(tmp_path, capsys):
    rc, out, doc = _fuzz(capsys, tmp_path, "fake-known", "--accept-known")
    assert rc == 0 and "known finding fake-window-2 reproduced" in out
    assert doc["config"]["accept_known"] is True


def test_a_finding_that_no_longer_reproduces_is_reported(tmp_path, capsys):
    rc, out, _ = _fuzz(capsys, tmp_path, "fake-fixed")
    assert rc == 0
    assert f"finding fake-window-2 not reproduced on transformers {RELEASE} by fake-fixed (" in out


def test_skip_known_says_how_many_it_skipped(tmp_path, capsys):
    rc, out, doc = _fuzz(capsys, tmp_path, "fake-known", "--skip-known")
    assert rc == 0
    skipped = doc["targets"][0]["known_findings"]["fake-window-2"]["skipped"]
    assert skipped > 0 and f"--skip-known: fake-known skipped {skipped} cases that hit known findings" in out


@pytest.mark.parametrize("predicate, window, ops, hit", [
    ("_reset_same_window_after_tokens", 3, "chunk:3 reset:3 push", True),
    ("_reset_same_window_after_tokens", 3, "chunk:3 reset:3 chunk:0", True),
    ("_reset_same_window_after_tokens", 3, "reset:3 push", False),           # nothing held yet
    ("_reset_same_window_after_tokens", 3, "chunk:3 reset:2 push", False),    # another window: a new layer
    ("_reset_same_window_after_tokens", 3, "chunk:3 reset:2 reset:2 push", False),
    ("_reset_same_window_after_tokens", 3, "chunk:3 reset:3", False),         # no update after it
    ("_decode_through_w_minus_1", 3, "push push push", True),
    ("_decode_through_w_minus_1", 3, "chunk:2 push", True),
    ("_decode_through_w_minus_1", 3, "chunk:3 push", False),
    ("_decode_through_w_minus_1", 1, "push push", False),
    ("_chunk_after_cached", 3, "push chunk:2", True),
    ("_chunk_after_cached", 3, "chunk:5 push push", False),
    ("_model_chunk_after_cached", 3, "chunk:3 push chunk:1", True),
    ("_model_chunk_after_cached", 3, "chunk:1 chunk:1", False),              # never reaches W
    ("_beyond_window", 3, "chunk:4", True),
    ("_beyond_window", 3, "chunk:3 reset:5 chunk:5", False),
    ("_window_one_cached", 1, "chunk:3 push", True),
    ("_window_one_cached", 1, "chunk:3", False),
    ("_empty_update_when_full", 2, "chunk:2 chunk:0", True),
    ("_empty_update_when_full", 2, "chunk:1 chunk:0", False),
])
def test_the_predicates_read_the_ops_as_their_notes_say(predicate, window, ops, hit):
    assert getattr(findings, predicate)(Case.parse(window, ops)) is hit


def test_explains_needs_the_trigger_before_the_failure():
    f = findings.Finding("x", frozenset({"fake"}), ("9.9",), ("9.9.1",), findings._decode_through_w_minus_1)
    case = Case.parse(3, "chunk:5 reset:3 push push push")
    assert f.explains(case, Mismatch("t", 4, Push(), "at the third push"))
    assert not f.explains(case, Mismatch("t", 0, Chunk(5), "at the first chunk"))
