"""Hostile gate subjects (issue 30, points 1, 2 and 4): a decoder that sleeps forever, segfaults, calls
``sys.exit(0)`` or raises a ``KeyboardInterrupt`` of its own fails the step that called it (exit 1, the report
written, the cell named) — the gate neither hangs, nor dies, nor passes; an answer outside the protocol (logits of
the wrong width, a NaN ``kv_bytes()``) is the subject's failure too, never a harness fault; a window of 10**9 in
an identity is refused before anything is sized by it; a real SIGTERM writes the finished steps and exits 143.

Each hostile decoder misbehaves once (``KVW_HOSTILE_ONCE``), so the rest of the run is an ordinary one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.gate import D, run_gate, steps

H = "py-decoder:tests.support.hostile:"
BASE = D + "MinimalDecoder"
ROOT = Path(__file__).resolve().parents[1]


def failed_checks(doc):
    return [(s["number"], c["name"], c["detail"]) for s in doc["steps"] for c in s["checks"] if c["verdict"] == "fail"]


@pytest.mark.parametrize("what,needle,extra", [
    ("sleep", "ran past its 2 s limit (--op-timeout)", ("--op-timeout", "2")),
    ("segv", "died of SIGSEGV", ()),
    ("exit", "SystemExit", ()),
    ("kbd", "KeyboardInterrupt", ()),
])
def test_a_hostile_decode_fails_its_step_and_the_gate_goes_on(tmp_path, monkeypatch, what, needle, extra):
    monkeypatch.setenv("KVW_HOSTILE", what)
    monkeypatch.setenv("KVW_HOSTILE_ONCE", str(tmp_path / "once"))
    rc, doc = run_gate(tmp_path, BASE, H + "HostileDecoder", "layout", "exact", *extra)
    assert rc == 1 and doc is not None
    fails = failed_checks(doc)
    assert len(fails) == 1, fails
    number, cell, detail = fails[0]
    assert "decode raised" in detail and needle in detail, detail
    assert cell  # the cell it failed in is named
    assert all(s["verdict"] != "fault" for s in doc["steps"]) and not doc["faults"]
    assert {s["number"] for s in doc["steps"]} == set(range(1, 9))  # every step ran after it


def test_the_same_decode_in_process_ends_no_gate(tmp_path, monkeypatch):
    """``--no-isolate``: the protocol boundary itself (Handle) turns a SystemExit into the subject's failure."""
    monkeypatch.setenv("KVW_HOSTILE", "exit")
    monkeypatch.setenv("KVW_HOSTILE_ONCE", str(tmp_path / "once"))
    rc, doc = run_gate(tmp_path, BASE, H + "HostileDecoder", "layout", "exact", "--no-isolate")
    assert rc == 1 and doc is not None
    assert [d for *_, d in failed_checks(doc)] and "SystemExit" in failed_checks(doc)[0][2]


@pytest.mark.parametrize("cls,needle", [("WideLogits", "logits per token"),
                                        ("NaNBytes", "not a whole number of bytes")])
def test_answers_outside_the_protocol_are_the_subjects_failure(tmp_path, cls, needle):
    rc, doc = run_gate(tmp_path, BASE, H + cls, "layout", "exact", "--no-isolate")
    assert rc == 1, doc and doc["faults"]
    assert not doc["faults"] and all(s["verdict"] != "fault" for s in doc["steps"])
    assert any(needle in d for *_, d in failed_checks(doc)), failed_checks(doc)


def test_an_identity_window_beyond_the_bound_is_a_usage_error(tmp_path, capsys):
    rc, doc = run_gate(tmp_path, H + "HugeWindow", BASE, "layout", "exact", "--no-isolate")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and doc is None and len(err) == 1 and "window 1000000000" in err[0], err


def test_sigterm_writes_the_finished_steps_and_exits_143(tmp_path):
    out = tmp_path / "report"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", KVW_SLOW_S="0.2")
    proc = subprocess.Popen([sys.executable, "-m", "fuzz.cli", "gate", "--baseline", BASE, "--candidate",
                             H + "SlowDecoder", "--intervention", "layout", "--claim", "exact", "--smoke",
                             "--report", str(out), "--pyproject", str(tmp_path / "none.toml")],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(300, proc.kill)
    watchdog.start()
    try:
        for line in proc.stderr:  # the progress lines: signal once step 2 has started (step 1 is finished)
            if "step 2 ..." in line:
                proc.send_signal(signal.SIGTERM)
                break
        stdout, _ = proc.communicate(timeout=120)
    finally:
        watchdog.cancel()
    assert proc.returncode == 143, stdout
    doc = json.loads((out / "report.json").read_text())
    by = steps(doc)
    assert doc["exit"] == 143 and doc["interrupted"] == "SIGTERM"
    assert by[1]["verdict"] == "pass"
    assert all(by[n]["summary"] == "not reached: interrupted (SIGTERM)" for n in range(2, 9))
    assert "INTERRUPTED" in (out / "report.md").read_text() and (out / "report.html").exists()
    assert "INTERRUPTED" in stdout


def test_subject_text_is_escaped_in_the_html_report(tmp_path, monkeypatch):
    """A subject's own words reach the report (its exception message): they are text, never markup."""
    monkeypatch.setenv("KVW_HOSTILE", "exit")
    monkeypatch.setenv("KVW_HOSTILE_ONCE", str(tmp_path / "once"))
    monkeypatch.setenv("KVW_HOSTILE_MESSAGE", "<script>alert(1)</script>")
    rc, doc = run_gate(tmp_path, BASE, H + "HostileDecoder", "layout", "exact", "--no-isolate")
    html = (tmp_path / "report" / "report.html").read_text()
    assert rc == 1 and "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)" in html


IMPORT = "py-decoder:tests.support.hostile_import:Decoder"


@pytest.mark.parametrize("role", ["baseline", "candidate"])
def test_a_subject_module_that_segfaults_on_import_fails_the_gate_with_a_report(tmp_path, monkeypatch, role):
    """The gate resolves subjects in their child (fuzz.gate.isolate.spawn): a module that dies while it is imported
    kills that child, not the gate; the gate fails (exit 1, not a usage error), the report names the subject and
    what it was doing, and no step claims to have run."""
    monkeypatch.setenv("KVW_HOSTILE_IMPORT", "segv")
    base, cand = (IMPORT, BASE) if role == "baseline" else (BASE, IMPORT)
    rc, doc = run_gate(tmp_path, base, cand)
    assert rc == 1 and doc is not None and doc["verdict"] == "fail"
    fails = failed_checks(doc)
    assert len(fails) == 1 and fails[0][1] == "probe", fails
    assert "died of SIGSEGV" in fails[0][2] and "imported" in fails[0][2], fails[0][2]
    assert all(s["verdict"] == "n/a" and "not reached" in s["summary"] for s in doc["steps"] if s["number"] > 1)
    assert doc["subjects"][role]["spec"] == IMPORT


def test_a_subject_whose_import_hangs_is_killed_after_the_confirmation(tmp_path, monkeypatch):
    """Importing and resolving a subject is setup, timed apart (fuzz.gate.isolate.STARTUP_TIMEOUT, shortened
    here) and confirmed: past the limit it gets CONFIRM_FACTOR times as long before it is killed."""
    from fuzz.config import CONFIRM_FACTOR
    from fuzz.gate import isolate

    monkeypatch.setenv("KVW_HOSTILE_IMPORT", "sleep")
    monkeypatch.setattr(isolate, "STARTUP_TIMEOUT", 1.0)
    rc, doc = run_gate(tmp_path, BASE, IMPORT)
    assert rc == 1 and doc is not None
    (_, cell, detail), = failed_checks(doc)
    assert cell == "probe" and f"had not answered after {CONFIRM_FACTOR:g} s" in detail, detail


def test_a_probe_that_hangs_fails_the_gate_not_a_usage_error(tmp_path, monkeypatch):
    """A hang in the subject's first answers (identity) is its failure (exit 1), never "usage" (exit 2)."""
    monkeypatch.setenv("KVW_HOSTILE_PROBE", "1")
    rc, doc = run_gate(tmp_path, BASE, IMPORT, "layout", "exact", "--op-timeout", "1")
    assert rc == 1 and doc is not None
    (_, cell, detail), = failed_checks(doc)
    assert cell == "probe" and "identity" in detail and "ran past its 1 s limit (--op-timeout)" in detail, detail


def test_a_subject_module_that_exits_on_import_is_one_line_not_a_traceback(tmp_path, monkeypatch, capsys):
    """``sys.exit(0)`` while the module is imported: the subject's error, sent back from its child; the gate says
    so in one line (exit 2: the subject cannot be started) and never passes."""
    monkeypatch.setenv("KVW_HOSTILE_IMPORT", "exit")
    rc, _ = run_gate(tmp_path, BASE, IMPORT)
    err = capsys.readouterr().err
    assert rc == 2 and "SystemExit" in err and "Traceback" not in err, err


def test_a_slow_call_that_answers_within_the_confirmation_is_noted_not_failed():
    """fuzz.gate.isolate.SubjectProcess._await: an answer past the limit but within CONFIRM_FACTOR x it is slow,
    not hung: it is returned and noted."""
    from fuzz.gate.isolate import SubjectProcess

    class Conn:
        def __init__(self):
            self.polls = []

        def poll(self, timeout):
            self.polls.append(timeout)
            return len(self.polls) == 2  # not within the limit; within the confirmation

        def recv(self):
            return ("ok", 1, 0.5)

    p = SubjectProcess("x", "candidate", op_timeout=None)
    p.conn = Conn()
    assert p.limit() == 60.0
    assert p._await("decode()", 0.01) == ("ok", 1, 0.5)
    assert len(p.slow) == 1 and "slow, not a hang" in p.slow[0]
    p.slowest = 20.0
    assert p.limit() == 200.0  # 10 x the slowest call measured, above the floor
