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


def test_an_open_span_reaches_every_later_release_and_a_closed_one_ends_where_it_was_seen_fixed():
    """DESIGN §4: a finding applies from its first release on, releases newer than the matrix included, until
    the matrix sees it fixed (a closed span); the report labels a release the matrix never ran."""
    from fuzz.targets import known

    assert known.in_span("5.25.0", "4.57+") and known.in_span("99.0.0", "4.57+") and not known.in_span("4.56.2", "4.57+")
    assert not known.in_span("5.18.0", "4.57-5.17")
    assert known.span_text("4.57+") == "4.57 and later (not seen fixed)" and known.span_text("4.45-4.51") == "4.45 – 4.51"
    newest = known.MATRIX_NEWEST["transformers"]
    assert known.release_label("transformers", newest) == f"transformers {newest}"
    assert known.release_label("transformers", "99.0.0") == "transformers 99.0.0 (newer than docs/compat.md)"
    assert known.release_warnings({"transformers": newest, "torch": "99.0"}) == []
    (w,) = known.release_warnings({"transformers": "99.0.0"})
    assert w.startswith(f"transformers 99.0.0 is newer than the newest release docs/compat.md ran ({newest})")
    assert [f.id for f in findings.applicable("dynamic", "99.0.0")] == ["hf-sliding-window-1"]


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
    # 9.9.1 is newer than any release docs/compat.md ran: the finding still applies, the report says so, and
    # the campaign prints one warning line about the release
    assert f"known finding fake-window-2 reproduced on transformers {RELEASE} (newer than docs/compat.md) by " \
           "fake-known (" in out
    assert out.count(f"warning: transformers {RELEASE} is newer than the newest release docs/compat.md ran") == 1
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
    assert f"finding fake-window-2 not reproduced on transformers {RELEASE} (newer than docs/compat.md) by fake-fixed (" in out


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


# -- a probe that dies on a sliding-window model (DESIGN §4: a crash finding, never "unavailable") -----------


def _probe(death):
    """A fake probe: records its calls, returns ``death`` (``None``: it ran)."""
    calls = []

    def run():
        calls.append(1)
        return death
    return run, calls


def test_a_probe_that_dies_only_with_the_window_leaves_the_target_available_with_its_crash():
    from impl.errors import window_probe

    windowed, _ = _probe("InductorError: CppCompileError")
    plain, calls = _probe(None)
    assert window_probe(windowed, plain) == "InductorError: CppCompileError"
    assert calls == [1]


def test_a_probe_that_dies_without_the_window_too_is_unavailable_naming_both():
    from impl.errors import Unavailable, window_probe

    with pytest.raises(Unavailable, match=r"^died: A; without the sliding window too: died: B$"):
        window_probe(_probe("died: A")[0], _probe("died: B")[0])


def test_a_probe_that_runs_with_the_window_never_pays_for_the_plain_one():
    from impl.errors import window_probe

    plain, calls = _probe(None)
    assert window_probe(_probe(None)[0], plain) is None and calls == []


class _FakeEngineError(Exception):
    pass


def test_engine_probes_follow_the_rule_and_keep_their_verdict():
    """fuzz.targets.engines.base.probe_once: died with the window, ran without -> available, crash recorded; died
    both ways -> unavailable (re-raised on every later call, without re-running); not installed -> not re-run."""
    from fuzz.targets.engines import base
    from impl.engines import EngineIncompatible, EngineUnavailable
    from impl.errors import Unavailable

    def windowed():
        raise EngineIncompatible("fake", "9.9", "Op(window=2)", "kernel died")

    cache: dict = {}
    base.probe_once(cache, "fake-window-only", windowed, plain=lambda: None)
    assert "kernel died" in base.PROBE_CRASHES.pop("fake-window-only")
    runs = []

    def always():
        runs.append(1)
        raise _FakeEngineError("segfault-ish")
    for _ in range(2):
        with pytest.raises(Unavailable, match="segfault-ish; without the sliding window too: _FakeEngineError"):
            base.probe_once(cache, "fake-always", always, plain=always)
    assert runs == [1, 1]  # once with, once without the window; the second call re-raised the kept verdict
    plain_runs = []

    def missing():
        raise EngineUnavailable("fakeengine is not installed")
    with pytest.raises(EngineUnavailable, match="not installed"):
        base.probe_once(cache, "fake-missing", missing, plain=lambda: plain_runs.append(1))
    assert plain_runs == [] and "fake-always" not in base.PROBE_CRASHES


# -- a probe's death becomes an outcome of the target's campaign (DESIGN §4, issue 27 point 4) ----------------


@pytest.fixture
def fake_probe(monkeypatch):
    monkeypatch.setitem(registry.BUILTIN, "fakeprobe", ("tests.support.probe_crash:make", False))
    monkeypatch.setitem(registry.BUILTIN, "fakeprobe-strict", ("tests.support.probe_crash:make_strict", False))


def test_a_probe_crash_is_a_crash_finding_with_its_seed_signature_and_a_replay_that_dies_again(tmp_path, capsys,
                                                                                               fake_probe):
    """The probe died with the window; the campaign's own cases never die (the kernel compiled from a W = 1 tour
    first): the probe's death is the campaign's finding all the same — signature, seed (the probe's call), replay
    command in the summary and the JSON report — and the campaign goes on; the replay, on a fresh target as in a
    fresh process, dies again."""
    from fuzz.results import signature
    from tests.support import probe_crash as P

    rc, out, doc = _fuzz(capsys, tmp_path, "fakeprobe")
    assert rc == 1 and doc["exit_code"] == 1, out
    (f,) = doc["failures"]
    assert f["kind"] == "crash" and "FakeCompileError" in f["error"] and "availability probe" in f["error"]
    assert f["signature"] == signature("fakeprobe", P.ProbeDies("x").probe_crashes()[0].error, P.PROBE)
    assert f["signature"].startswith("fakeprobe | crash | ")
    assert f["case"] == P.PROBE.to_json() and "availability probe" in f["note"]
    (seed,) = (tmp_path / "s").glob("*.json")
    assert f["seed_path"] == str(seed) and json.loads(seed.read_text())["window"] == 3
    assert f["replay"] in out and "FakeCompileError" in out
    assert doc["targets"][0]["examples"] > 20  # explored on: none of its own cases died
    rc2 = main(f["replay"].split()[1:])
    out2 = capsys.readouterr().out
    assert rc2 == 1 and "FakeCompileError" in out2, out2


def test_a_known_probe_crash_is_reproduced_strict_fails_on_it_and_accept_known_passes(tmp_path, capsys, fake_probe,
                                                                                       monkeypatch):
    from tests.support import probe_crash as P

    monkeypatch.setattr(findings, "FINDINGS", findings.FINDINGS + (P.FINDING,))
    rc, out, doc = _fuzz(capsys, tmp_path, "fakeprobe")
    assert rc == 1 and not doc["failures"], out
    assert doc["targets"][0]["known_findings"]["fake-probe-compile"]["reproduced"] == 1
    assert "known finding fake-probe-compile reproduced on transformers 9.9.1" in out
    replay = doc["targets"][0]["known_links"]["fake-probe-compile"]["probe_replay"]
    assert f"died at the availability probe; to replay its case: {replay}" in " ".join(out.split())  # unwrapped
    assert replay == f"kvwindow seeds add --window 3 --ops '{P.PROBE.text}' --seeds-dir DIR && kvwindow replay " \
                     f"DIR/{P.PROBE.id}.json --target fakeprobe"
    assert not (tmp_path / "s").exists()  # a known finding reproduced: no seed, as for every known finding
    rc, out, doc = _fuzz(capsys, tmp_path, "fakeprobe", "--accept-known")
    assert rc == 0 and not doc["failures"] and "known finding fake-probe-compile reproduced" in out
    rc, out, doc = _fuzz(capsys, tmp_path, "fakeprobe", "--skip-known")
    counts = doc["targets"][0]["known_findings"]["fake-probe-compile"]
    assert rc == 0 and counts["skipped"] >= 1 and counts["reproduced"] == 0, counts  # the probe's death among them
    # a strict target (how the findings' own tests reproduce them) reports it as a finding with its seed
    rc, out, doc = _fuzz(capsys, tmp_path, "fakeprobe-strict")
    assert rc == 1 and [f["kind"] for f in doc["failures"]] == ["crash"] and doc["failures"][0]["seed_path"]


def test_stop_on_first_ends_the_campaign_at_the_probe_crash(tmp_path, fake_probe):
    from tests.support import probe_crash as P

    res = fuzz_target(P.make(), CampaignConfig(seconds=20, max_examples=50, campaign_seed=0, stop_on_first=True,
                                               seeds_dir=str(tmp_path)))
    assert [f.kind for f in res.failures] == ["crash"] and res.examples == 0 and res.examples_to_fail == 0


def test_a_probe_crash_crosses_into_an_isolated_target():
    """An isolated target's probes run in its child: their crashes come back with the child's hello."""
    import pickle

    from fuzz.targets.isolated_child import meta
    from tests.support import probe_crash as P

    (pc,) = pickle.loads(pickle.dumps(meta(P.make())))["probe_crashes"]
    assert pc.case == P.PROBE and "FakeCompileError" in str(pc.error) and pc.known is None


def test_an_engine_target_reports_the_probe_crashes_of_the_probes_whose_call_it_makes(monkeypatch):
    from fuzz.targets.engines import base

    class Engine(base.EngineTarget):
        name = finding_kind = "fake-engine"

        def probe_calls(self):
            return {"fake-mine": ("the fake op probe", Case(2, (Push(),)))}

        def run_case(self, case):
            raise AssertionError("not run")

    monkeypatch.setitem(base.PROBE_CRASHES, "fake-mine", "FakeError: kernel died")
    monkeypatch.setitem(base.PROBE_CRASHES, "fake-other", "FakeError: another op's probe")
    (pc,) = Engine().probe_crashes()
    assert pc.case == Case(2, (Push(),)) and pc.known is None
    assert "the fake op probe died with the sliding window: FakeError: kernel died" in str(pc.error)
    monkeypatch.delitem(base.PROBE_CRASHES, "fake-mine")
    assert Engine().probe_crashes() == []


def test_the_flex_compile_finding_applies_to_flex_attention_on_torch_2_13_only():
    """hf-flex-attention-sliding-compile: a row of hf:mistral@flex_attention (not of hf:mistral's eager or sdpa),
    on transformers 5.24 and later with torch 2.13 and later; it hits the probe's stream and explains its death."""
    from fuzz.targets.hf.family import probe_case
    from fuzz.targets.base import Crash

    rows = [f for f in findings.FINDINGS if f.id == "hf-flex-attention-sliding-compile"]
    assert rows and all(f.kinds == {"hf:mistral@flex_attention"} for f in rows)
    torch213 = {"transformers": "5.25.0", "torch": "2.13.0+cpu"}
    assert [f.id for f in findings.applicable("hf:mistral@flex_attention", "5.25.0", torch213)] == \
        ["hf-flex-attention-sliding-compile"]
    assert findings.applicable("hf:mistral@flex_attention", "5.25.0", dict(torch213, torch="2.12.1")) == []
    assert findings.applicable("hf:mistral@flex_attention", "5.23.0", torch213) == []
    assert "hf-flex-attention-sliding-compile" not in [f.id for f in findings.applicable("hf:mistral", "5.25.0",
                                                                                         torch213)]
    (f,) = rows
    died = Crash("hf:mistral@flex_attention", None, None, "the flex_attention availability probe (...) died with the "
                 "sliding window: a flex attention run died (exit status 1): torch._inductor.exc.InductorError: "
                 "CppCompileError: C++ compile error")
    assert f.explains(probe_case(), died)
    assert not f.explains(probe_case(), Crash("hf:mistral@flex_attention", None, None, "flex_attention raised "
                                                                                       "RuntimeError: other"))
    assert not f.hits(Case(3, (Chunk(2),))) and not f.hits(Case(3, (Push(), Push(), Push(), Push())))
