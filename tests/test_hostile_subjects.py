"""Hostile code under test in campaigns and replays (issue 30, points 1 and 3): a ``py:`` cache or a ``paged-py:``
pool that ends the process (``sys.exit(0)``), raises a ``KeyboardInterrupt`` or ``GeneratorExit`` of its own,
segfaults or calls ``os._exit`` is a crash finding with its seed — never exit 0, never a dead campaign — and the
replay command printed for it carries the flags it needs. Only the harness's own interrupt
(:class:`fuzz.targets.base.HarnessInterrupt`, raised by kvwindow's signal handlers) ends a run as interrupted.

The subjects are :mod:`tests.support.hostile` (what they do is read from ``KVW_HOSTILE``)."""

from __future__ import annotations

import json
import signal

import pytest

from fuzz.cli import main
from fuzz.config import CampaignConfig
from fuzz.replay import replay_flags
from fuzz.targets.base import Guarded, HarnessInterrupt, SubjectExit, subject_call
from fuzz.workers import StopRequest

CACHE = "py:tests.support.hostile:HostileCache"
POOL = "paged-py:tests.support.hostile:HostilePool"


def fuzz(capsys, tmp_path, target, *extra):
    """One campaign that stops at its first finding: a hostile subject misbehaves on every op, so each kind of
    first op would be a finding of its own (distinct findings are tests/test_distinct_findings.py's)."""
    rc = main(["fuzz", "--target", target, "--max-examples", "20", "--time", "20", "--seed", "1", "--plain",
               "--stop-on-first",
               "--seeds-dir", str(tmp_path / "s"), "--db", str(tmp_path / "db"), "--report", str(tmp_path / "r.json"),
               *extra])
    out = capsys.readouterr()
    return rc, out.out, out.err


def saved_seeds(tmp_path):
    return sorted((tmp_path / "s").glob("*.json"))


@pytest.mark.parametrize("what,raised", [("exit", "SystemExit(0)"), ("kbd", "KeyboardInterrupt"),
                                         ("gen", "GeneratorExit")])
@pytest.mark.parametrize("target", [CACHE, POOL])
def test_a_subject_that_ends_the_process_in_process_is_a_crash_finding(capsys, tmp_path, monkeypatch, target, what,
                                                                        raised):
    monkeypatch.setenv("KVW_HOSTILE", what)
    rc, out, err = fuzz(capsys, tmp_path, target, "--no-isolate")
    assert rc == 1, out + err
    assert f"FAILED {target} (crash)" in out and raised in out, out
    (seed,) = saved_seeds(tmp_path)
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["exit_code"] == 1 and report["failures"][0]["kind"] == "crash"
    # the replay command printed for it runs as printed and fails again (exit 1, not 0)
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("replay: "))
    argv = line.split("replay: kvwindow ", 1)[1].split()
    assert argv[:2] == ["replay", str(seed)] and "--no-isolate" in argv
    assert main(argv) == 1
    assert "FAILED (crash)" in capsys.readouterr().out


@pytest.mark.parametrize("what,needle", [("segv", "SIGSEGV"), ("abort", "SIGABRT"),
                                         ("os_exit", "exited with code 0")])
def test_a_native_death_in_a_py_cache_is_a_crash_finding_by_default(capsys, tmp_path, monkeypatch, what, needle):
    monkeypatch.setenv("KVW_HOSTILE", what)
    rc, out, err = fuzz(capsys, tmp_path, CACHE)  # no --isolate: user code runs supervised by default
    assert rc == 1, out + err
    assert "(crash)" in out and needle in out, out
    (seed,) = saved_seeds(tmp_path)
    assert main(["replay", str(seed), "--target", CACHE]) == 1  # the default replay isolates it too
    assert needle in capsys.readouterr().out


def test_a_paged_pool_that_segfaults_is_a_crash_finding_by_default(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("KVW_HOSTILE", "segv")
    rc, out, err = fuzz(capsys, tmp_path, POOL)
    assert rc == 1 and "SIGSEGV" in out, out + err
    assert len(saved_seeds(tmp_path)) == 1


def test_the_replay_command_carries_the_flags_the_finding_needs(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("KVW_HOSTILE", "sleep")
    rc, out, err = fuzz(capsys, tmp_path, CACHE, "--op-timeout", "1.5")
    assert rc == 1 and "timed out" in out, out + err
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("replay: "))
    assert "--op-timeout 1.5" in line, line
    argv = line.split("replay: kvwindow ", 1)[1].split()
    assert main(argv) == 1 and "timed out" in capsys.readouterr().out


def test_replay_flags_name_what_differs_from_the_default():
    assert replay_flags(CampaignConfig(), CACHE) == ""
    assert replay_flags(CampaignConfig(isolate=True), "pyring") == " --isolate"
    assert replay_flags(CampaignConfig(isolate=False), CACHE) == " --no-isolate"
    assert replay_flags(CampaignConfig(op_timeout=2.0, op_memory=None), CACHE) == " --op-timeout 2 --op-memory 0"
    assert replay_flags(CampaignConfig(op_timeout=2.0), "pyring") == ""  # in process: no op limit applies


def test_only_the_harness_interrupt_passes_the_boundary():
    def kbd():
        raise KeyboardInterrupt

    def stop():
        raise HarnessInterrupt(signal.SIGTERM)

    with pytest.raises(SubjectExit, match="KeyboardInterrupt"):
        subject_call(kbd)
    with pytest.raises(SubjectExit, match=r"SystemExit\(3\)"):
        subject_call(lambda: exit(3))
    with pytest.raises(HarnessInterrupt):
        subject_call(stop)
    with pytest.raises(ValueError):  # ordinary errors pass unchanged: the error contracts read their types
        subject_call(int, "x")

    class C:
        attr = 5

        def m(self):
            raise SystemExit(0)

    g = Guarded(C())
    assert g.attr == 5
    with pytest.raises(SubjectExit):
        g.m()


def test_a_second_ctrl_c_is_the_harness_interrupt():
    stop = StopRequest((signal.SIGINT,))
    with stop:
        stop._handle(signal.SIGINT, None)
        assert stop()
        with pytest.raises(HarnessInterrupt):
            stop._handle(signal.SIGINT, None)
