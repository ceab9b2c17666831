"""Nothing found is lost: Ctrl-C or SIGTERM sent to a real ``kvwindow fuzz`` at a known moment — while a
failing boundary tour is reduced, while Hypothesis shrinks — saves the smallest failing case so far and
reports it; with nothing found the exit is 130. The ``--time`` budget holds, shrinking included."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from fuzz.campaign import slack
from tests.support.fuzz_process import ROOT, signal_when, start

CRASHERS = "py:tests.support.crashers:"
#: In process, as these tests were written: the moments they signal at (reducing, shrinking) are timed by the
#: slow cache itself; a supervised child (the default for py: classes) adds its own pace to them.
IN_PROCESS = "--no-isolate"


def test_ctrl_c_while_reducing_a_tour_saves_the_smallest_case_so_far(tmp_path):
    proc = start(tmp_path, "--target", CRASHERS + "SlowTourBug", "--time", "120", IN_PROCESS)
    out, err = signal_when(proc, "reducing a failure", signal.SIGINT)
    assert proc.returncode == 1, out + err
    assert "note: interrupted while reducing" in out
    (seed,) = (tmp_path / "s").glob("*.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["exit_code"] == 1 and doc["interrupted"] and doc["failures"][0]["seed_path"] == str(seed)
    assert doc["failures"][0]["kind"] == "mismatch"


def test_sigterm_while_shrinking_saves_the_smallest_case_so_far(tmp_path):
    proc = start(tmp_path, "--target", CRASHERS + "SlowWideBug", "--time", "120", IN_PROCESS)
    # Hypothesis shrinks what it finds; a tour's failure is reduced by the campaign (fuzz.phases.reduce): either way
    # the signal lands while the failure is being made smaller.
    out, err = signal_when(proc, lambda line: "shrinking a failure" in line or "reducing a failure" in line,
                           signal.SIGTERM)
    assert proc.returncode == 1, out + err
    assert "interrupted (SIGTERM)" in out, out
    assert "note: interrupted while shrinking" in out or "note: interrupted while reducing" in out, out
    (seed,) = (tmp_path / "s").glob("*.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["failures"][0]["seed_id"] == seed.stem and doc["interrupted"]
    # The saved case fails when replayed.
    rep = subprocess.run([sys.executable, "-m", "fuzz.cli", "replay", str(seed), "--target", CRASHERS + "SlowWideBug"],
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)
    assert rep.returncode == 1 and "FAILED (mismatch)" in rep.stdout


def test_sigterm_with_nothing_found_exits_130_with_the_report(tmp_path):
    proc = start(tmp_path, "--target", "pyring", "--target", "ring-c", "--time", "120")
    out, err = signal_when(proc, "examples=", signal.SIGTERM)
    assert proc.returncode == 130, out + err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["interrupted"] and doc["exit_code"] == 130 and doc["targets"][0]["examples"] > 0


def test_sigterm_stops_every_worker_and_keeps_their_results(tmp_path):
    proc = start(tmp_path, "--target", "pyring", "--target", "ring-c", "--workers", "2", "--time", "120")
    out, err = signal_when(proc, "examples=", signal.SIGTERM)
    assert proc.returncode == 130, out + err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["interrupted"] and doc["worker_errors"] == [] and len(doc["worker_pids"]) == 2
    # two targets, two workers: each target ran in a worker of its own (fuzz.schedule.assign)
    assert doc["targets"][0]["examples"] > 0 and {t["workers"] for t in doc["targets"]} == {1}


def test_the_time_budget_holds_while_a_slow_failure_is_shrunk(tmp_path):
    budget = 6.0
    t0 = time.monotonic()
    proc = start(tmp_path, "--target", CRASHERS + "SlowWideBug", "--time", str(budget))
    out, err = proc.communicate(timeout=300)
    wall = time.monotonic() - t0
    assert proc.returncode == 1, out + err
    doc = json.loads((tmp_path / "r.json").read_text())
    # The campaign (report "seconds": from the start of fuzzing) ends within the budget, its slack and one
    # example (about 0.5 s here); the process adds its start-up.
    assert doc["seconds"] <= budget + slack(budget) + 1.5, doc["seconds"]
    assert wall <= budget + slack(budget) + 15, wall
    (seed,) = (tmp_path / "s").glob("*.json")
    assert doc["failures"][0]["seed_path"] == str(seed)
