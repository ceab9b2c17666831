"""A slow machine is never a finding (DESIGN §4): a correct cache that is merely slow — one push that stalls
for seconds, a first reset that sets up for seconds — yields no finding and no seed, isolated or not; a case
past its op limit is run again alone with a longer one before it is a hang, and a real hang still is one.

The stalls (``tests/support/stalls.py``) are longer than the 5 s limit every op of an isolated target once
had, so these tests fail on that behaviour. Nothing here asserts how fast anything ran: the only timing
read is a lower bound (a campaign that paid an 8 s sleep ran at least 8 s), which a busy machine keeps.
"""

from __future__ import annotations

import json

import pytest

from fuzz.cli import main
from fuzz.config import CONFIRM_FACTOR, OP_TIMEOUT, OP_TIMEOUT_FACTOR
from fuzz.ops import Case, Push
from fuzz.targets.base import Crash
from fuzz.targets.isolated import IsolatedTarget

STALLS = "py:tests.support.stalls:"
#: Position 5 is pushed at op #5 (the stall caches' trigger; HangsInPush's in a window of 3).
SIX_PUSHES = Case(3, (Push(),) * 7)


def campaign(capsys, tmp_path, target, *flags):
    rep, sd = tmp_path / "r.json", tmp_path / "seeds"
    rc = main(["fuzz", "--target", target, "--time", "3", "--seed", "1", "--plain", "--report", str(rep),
               "--seeds-dir", str(sd), "--db", str(tmp_path / "db"), *flags])
    out = capsys.readouterr()
    return rc, out.out + out.err, json.loads(rep.read_text()), sorted(sd.glob("*.json")) if sd.exists() else []


@pytest.mark.slow
@pytest.mark.parametrize("isolate", ["--isolate", "--no-isolate"])
@pytest.mark.parametrize("cls", ["StallsInPush", "SlowFirstReset"])
def test_a_correct_cache_that_stalls_for_seconds_is_no_finding(capsys, tmp_path, cls, isolate):
    rc, out, doc, seeds = campaign(capsys, tmp_path, STALLS + cls, isolate)
    assert rc == 0, out
    assert not doc["failures"] and not doc["harness_faults"] and not seeds, out
    assert doc["seconds"] >= 8.0  # it did pay the stall (a lower bound: a busy machine only adds to it)
    (t,) = doc["targets"]
    assert t["examples"] > 0 and "FAILED" not in out


def test_the_op_limit_follows_the_slowest_op_measured():
    t = IsolatedTarget(STALLS + "StallsBriefly")
    try:
        assert t.op_timeout == OP_TIMEOUT  # nothing measured yet: the floor
        assert t.run(SIX_PUSHES).tokens == 7  # the 3 s stall: within the floor, no timeout
        assert t._child.slowest >= 3.0 and t.op_timeout == max(OP_TIMEOUT, OP_TIMEOUT_FACTOR * t._child.slowest)
        assert t.take_slow() == []
    finally:
        t.close()
    explicit = IsolatedTarget("ring-c", op_timeout=2.5)
    try:
        assert explicit.op_timeout == 2.5  # --op-timeout wins over the measured cost
    finally:
        explicit.close()


def test_a_timeout_that_ends_when_run_again_alone_is_slow_not_a_crash():
    t = IsolatedTarget(STALLS + "StallsBriefly", op_timeout=1)  # 3 s stall: past 1 s, within 1 s x 4
    try:
        assert t.run(SIX_PUSHES).tokens == 7
        (slow,) = t.take_slow()
        assert slow["where"] == "at op #5 (push)" and slow["limit"] == 1.0 and slow["request"] == "run"
        assert t.take_slow() == []
    finally:
        t.close()


def test_setup_a_cache_marks_is_not_timed_as_an_op():
    t = IsolatedTarget(STALLS + "SetsUpInFirstReset", op_timeout=1)  # 3 s of marked setup, 1 s op limit
    try:
        assert t.run(SIX_PUSHES).tokens == 7
        assert t.take_slow() == []  # never timed out: setup has its own limit
    finally:
        t.close()


def test_a_real_hang_is_confirmed_and_is_a_crash():
    t = IsolatedTarget(STALLS + "HangsInPush", op_timeout=1)
    try:
        with pytest.raises(Crash) as e:
            t.run(SIX_PUSHES)
        assert e.value.index == 5 and e.value.op == Push()
        msg = str(e.value)
        assert "at op #5 (push): timed out" in msg and f"longer than {CONFIRM_FACTOR:g} s when run again alone" in msg
        assert t.take_slow() == [] and t.run(Case(2, (Push(),) * 7)).tokens == 7
    finally:
        t.close()


@pytest.mark.slow
def test_a_campaign_reports_a_slow_case_and_saves_no_seed(capsys, tmp_path):
    rc, out, doc, seeds = campaign(capsys, tmp_path, STALLS + "StallsBriefly", "--isolate", "--op-timeout", "1")
    assert rc == 0 and not seeds and not doc["failures"], out
    (t,) = doc["targets"]
    (slow,) = t["slow"]  # the stall happens once per runner: once in the campaign, once when confirmed
    assert doc["slow"] == t["slow"] and slow["where"].startswith("at op #") and slow["limit"] == 1.0
    assert f"slow, not a finding: {STALLS}StallsBriefly: run {slow['where']} ran past 1 s" in out


@pytest.mark.slow
def test_a_campaign_saves_a_confirmed_hang_as_a_crash(capsys, tmp_path):
    rc, out, doc, seeds = campaign(capsys, tmp_path, STALLS + "HangsInPush", "--isolate", "--op-timeout", "1")
    assert rc == 1, out
    (f,) = doc["failures"]
    assert f["kind"] == "crash" and "when run again alone" in f["error"] and len(seeds) == 1


def test_slow_cases_travel_with_a_workers_result_and_merge():
    from fuzz.results import TargetResult, merge

    x = {"target": "t", "request": "run", "where": "at op #5 (push)", "limit": 30.0, "rerun_seconds": 41.0,
         "case": "window=3 ops: push"}
    r = TargetResult("t", slow=[x])
    back = TargetResult.from_json(json.loads(json.dumps(r.to_json())))
    assert back.slow == [x] and merge("t", [back, TargetResult("t", slow=[dict(x, limit=60.0)])]).slow[1]["limit"] == 60
