"""DESIGN §4 through the whole campaign: a mismatch or a crash is a finding (a seed, exit 1); a harness fault
stops the target with one line and exit 3, never a seed; a worker that dies is reported, and what it had
found is saved; Redis going away degrades to the local database with a warning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fuzz.campaign import fuzz_target
from fuzz.cli import main
from fuzz.config import CampaignConfig
from fuzz.oracle import SpecStream
from fuzz.targets.pyring import make_pyring
from tests.support.redis_server import redis_server

ROOT = Path(__file__).resolve().parents[1]
CRASHERS = "py:tests.support.crashers:"


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def fuzz(capsys, tmp_path, *argv, time_s="8"):
    rep = tmp_path / "r.json"
    rc, out, err = run(capsys, "fuzz", *argv, "--time", time_s, "--seed", "3", "--plain", "--report", str(rep),
                       "--seeds-dir", str(tmp_path / "s"), "--db", str(tmp_path / "db"))
    return rc, out, err, json.loads(rep.read_text())


def test_a_class_that_cannot_be_built_is_a_usage_error_and_nothing_is_saved(tmp_path, capsys):
    """DESIGN §4: the class is built once when the target resolves; one that needs arguments fails there."""
    rc, out, err = run(capsys, "fuzz", "--target", CRASHERS + "NeedsArgs", "--time", "3", "--plain",
                       "--report", str(tmp_path / "r.json"), "--seeds-dir", str(tmp_path / "s"),
                       "--db", str(tmp_path / "db"))
    assert rc == 2 and "NeedsArgs() failed: TypeError" in err and "missing 1 required positional argument" in err
    assert "FAILED" not in out and not (tmp_path / "s").exists() and not (tmp_path / "r.json").exists()


def test_a_cache_that_cannot_be_built_mid_campaign_is_a_harness_fault_not_a_seed(tmp_path, capsys):
    from tests.support import crashers

    crashers.BuildsOnce.built = 0
    rc, out, err, doc = fuzz(capsys, tmp_path, "--target", CRASHERS + "BuildsOnce", time_s="3")
    assert rc == 3, out + err
    assert "HARNESS FAULT" in out and "cannot build the cache: OSError" in out and "FAILED" not in out
    assert not (tmp_path / "s").exists() or not list((tmp_path / "s").iterdir())
    assert doc["exit_code"] == 3 and doc["failures"] == [] and doc["totals"]["harness_faults"] == 1
    assert "Too many open files" in doc["harness_faults"][0]["reason"]


def test_the_harness_failing_mid_case_is_a_fault(tmp_path, monkeypatch):
    def broken(self):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(SpecStream, "expected", broken)
    res = fuzz_target(make_pyring(), CampaignConfig(seconds=5, campaign_seed=1, seeds_dir=str(tmp_path)))
    assert res.failures == [] and res.examples == 1 and not list(tmp_path.iterdir())
    (line,) = res.faults
    assert line == "OSError in the harness: [Errno 28] No space left on device"


def test_cases_a_target_leaves_out_are_not_failures(tmp_path):
    """A target may reject a case (Hypothesis's ``reject()``, as the HF targets do for known findings)."""
    from hypothesis import reject

    from fuzz.targets.base import RunStats, Target

    class Picky(Target):
        name = "picky"

        def run(self, case):
            if len(case.ops) % 2:
                reject()
            return RunStats(case.tokens)

    res = fuzz_target(Picky(), CampaignConfig(seconds=2, campaign_seed=0, seeds_dir=str(tmp_path)))
    assert res.failures == [] and res.faults == [] and res.examples > 0 and not list(tmp_path.iterdir())


def test_an_exception_of_the_implementation_is_a_crash_finding(tmp_path, capsys):
    rc, out, err, doc = fuzz(capsys, tmp_path, "--target", CRASHERS + "RaisesOnPush")
    assert rc == 1, out + err
    (f,) = doc["failures"]
    assert f["kind"] == "crash" and "raised RuntimeError: internal state corrupted" in f["error"]
    assert (tmp_path / "s" / f"{f['seed_id']}.json").exists()


def test_an_unwritable_seeds_dir_prints_the_seed_in_full(tmp_path, capsys, monkeypatch):
    from fuzz import seeds

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(seeds, "store_seed", refuse)
    rc, out, err, doc = fuzz(capsys, tmp_path, "--target", CRASHERS + "AlwaysWrong", time_s="5")
    assert rc == 1, out + err
    assert "seed NOT saved: cannot write the seed into" in out and "Permission denied" in out
    assert '"window": 1' in out and '"ops": []' in out  # the seed itself
    assert "kvwindow seeds add --window 1 --ops '' --seeds-dir DIR && kvwindow replay DIR/" in out
    assert doc["failures"] and all(f["seed_path"] is None and "Permission denied" in f["seed_error"]
                                   for f in doc["failures"])  # every distinct finding printed in full


def test_a_worker_that_dies_is_reported_and_its_target_is_not_clean(tmp_path, capsys):
    # --no-isolate: a py: class runs supervised by default (then this death is a crash finding, the test below)
    rc, out, err, doc = fuzz(capsys, tmp_path, "--target", CRASHERS + "KillsItsProcess", "--target", "pyring",
                             "--workers", "2", "--no-isolate", time_s="6")
    assert rc == 3, out + err
    assert doc["worker_errors"] and all("died of SIGKILL" in e for e in doc["worker_errors"])
    (t,) = [t for t in doc["targets"] if t["name"] == CRASHERS + "KillsItsProcess"]
    assert t["done"] and t["harness_faults"] and t["phase"] == "done"
    rows = [ln for ln in out.split("summary")[-1].splitlines() if "│" in ln]
    assert any("KillsItsProcess" in r and "FAULT" in r for r in rows) and not any("running" in r for r in rows)
    # pyring ran on the other worker, or (when one worker had both) is reported as not run; the report lists
    # targets in the order their workers finished, which differs from run to run.
    assert "worker error: worker" in out and ("not run: pyring" in out or any(t["name"] == "pyring"
                                                                             for t in doc["targets"]))


def test_the_same_death_in_an_isolated_child_is_a_crash_finding(tmp_path, capsys):
    rc, out, err, doc = fuzz(capsys, tmp_path, "--target", CRASHERS + "KillsItsProcess", "--isolate", time_s="6")
    assert rc == 1, out + err
    (f,) = doc["failures"]
    assert f["kind"] == "crash" and "SIGKILL at " in f["error"] and "reset" in f["error"]  # a reset op or the opening one


def test_a_worker_that_dies_while_shrinking_keeps_its_smallest_case(tmp_path, capsys):
    rc, out, err, doc = fuzz(capsys, tmp_path, "--target", CRASHERS + "DiesWhileShrinking", "--workers", "2",
                             "--no-isolate", time_s="20")
    assert rc == 1, out + err
    assert doc["failures"] and doc["worker_errors"]
    f = doc["failures"][0]
    assert "stopped while shrinking" in f["note"] and Path(f["seed_path"]).exists()
    rc, out, _ = run(capsys, "replay", f["seed_path"], "--target", CRASHERS + "DiesWhileShrinking")
    assert "FAILED (mismatch)" in out


# ---------------------------------------------------------------------------
# Redis going away


@pytest.fixture
def redis(tmp_path):
    with redis_server(tmp_path) as server:
        yield server


def test_redis_going_away_degrades_to_the_local_database(redis, tmp_path):
    url, server = redis
    rep, sd = tmp_path / "r.json", tmp_path / "s"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", KVWINDOW_PROGRESS_INTERVAL="0.3")
    proc = subprocess.Popen([sys.executable, "-m", "fuzz.cli", "fuzz", "--target", "pyring", "--time", "6", "--plain",
                             "--db", url, "--report", str(rep), "--seeds-dir", str(sd)],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    seen = []
    try:
        for line in proc.stdout:  # kill the server once the campaign is running
            seen.append(line)
            if "examples=" in line and "examples=0 " not in line:
                break
        server.kill()
        out, err = proc.communicate(timeout=60)
    finally:
        watchdog.cancel()
    out = "".join(seen) + out
    assert proc.returncode == 0, out + err
    assert f"warning: the example database {url} failed" in err and "local directory .hypothesis/kvwindow" in err
    assert "FAILED" not in out and not (sd.exists() and list(sd.iterdir()))
    doc = json.loads(rep.read_text())
    assert doc["failures"] == [] and doc["warnings"] and url in doc["warnings"][0]
    before = int(seen[-1].split("examples=")[1].split()[0])
    assert doc["targets"][0]["examples"] > before and doc["targets"][0]["done"]  # it went on fuzzing
