"""Issue 20: a campaign over several targets buys coverage first. A fast target reaches its goal (every phase
that applies, 100 examples) and leaves its time to a slow one; a target short of the goal says why; the
second round gives the time left to every target; ``--workers auto`` is one worker per core."""

from __future__ import annotations

import json

import pytest

from fuzz.cli import main
from fuzz.results import TargetResult
from fuzz.schedule import GOAL_EXAMPLES, goal_note, reached

SLOW = "py:tests.support.crashers:SlowerRing"


def _result(examples, seconds=2.0, **phases) -> TargetResult:
    r = TargetResult("t", examples=examples, seconds=seconds)
    r.phases_run = {name: {"status": status, "examples": 1, "seconds": 0.1, **({"why": "w"} if status != "ran" else {})}
                    for name, status in phases.items()}
    return r


def test_reached_and_the_note_that_says_why_not():
    assert reached(_result(100, tours="ran", bulk="n/a"), 100)
    assert not reached(_result(99, tours="ran"), 100)
    assert not reached(_result(500, tours="ran", long="skipped"), 100)
    assert goal_note(_result(150, tours="ran", bulk="n/a")) is None
    note = goal_note(_result(40, seconds=4.0, tours="ran", long="skipped"))
    assert note.startswith("40 of 100 examples in 4.0 s (10.0/s; 100 would need ~10 s at that rate)")
    assert "did not run long (w)" in note


def test_a_fast_target_reaches_its_goal_and_a_slow_one_says_why_it_did_not(tmp_path, capsys):
    rep = tmp_path / "r.json"
    rc = main(["fuzz", "--target", "pyring", "--target", SLOW, "--time", "8", "--seed", "1", "--plain",
               "--report", str(rep), "--seeds-dir", str(tmp_path / "s"), "--db", str(tmp_path / "db")])
    out = capsys.readouterr().out
    assert rc == 0, out
    doc = json.loads(rep.read_text())
    fast, slow = doc["targets"]
    assert fast["examples"] >= GOAL_EXAMPLES
    assert all(p["status"] in ("ran", "n/a") for p in fast["campaign_phases"].values()), fast["campaign_phases"]
    assert slow["seconds"] > fast["seconds"] / 2  # the slow target got the time the fast one did not need
    assert slow["examples"] < GOAL_EXAMPLES and f"coverage: {SLOW}: {slow['examples']} of 100 examples" in out
    assert "phase bulk does not apply to pyring, " + SLOW in out


def test_workers_auto_is_one_per_core(tmp_path, capsys):
    from fuzz.workers import auto_workers, usable_cores

    assert auto_workers() == max(1, min(usable_cores(), auto_workers()))
    rep = tmp_path / "r.json"
    rc = main(["fuzz", "--target", "pyring", "--time", "3", "--workers", "auto", "--plain", "--report", str(rep),
               "--seeds-dir", str(tmp_path / "s"), "--db", str(tmp_path / "db")])
    assert rc == 0
    assert json.loads(rep.read_text())["config"]["workers"] == auto_workers()
    assert main(["fuzz", "--target", "pyring", "--workers", "many"]) == 2
    assert "expected a number of workers or 'auto'" in capsys.readouterr().err


@pytest.mark.parametrize("flag, message", [("-2", "--known-repeats must be >= 0, or -1")])
def test_known_repeats_is_validated(capsys, flag, message):
    assert main(["fuzz", "--target", "pyring", "--time", "1", "--known-repeats", flag]) == 2
    assert message in capsys.readouterr().err
