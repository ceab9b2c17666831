"""A real ``kvwindow fuzz`` process for the tests that signal it: started with fast progress lines, and
signalled once its output shows the moment a test waits for."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]


def start(tmp_path: Path, *argv: str) -> subprocess.Popen:
    """``kvwindow fuzz ARGV`` writing its report, seeds and database under ``tmp_path`` (progress every 0.5 s)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", KVWINDOW_PROGRESS_INTERVAL="0.5")
    return subprocess.Popen([sys.executable, "-m", "fuzz.cli", "fuzz", *argv, "--plain", "--seed", "1",
                             "--report", str(tmp_path / "r.json"), "--seeds-dir", str(tmp_path / "s"),
                             "--db", str(tmp_path / "db")],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def signal_when(proc: subprocess.Popen, until: str | Callable[[str], bool], sig: int) -> tuple[str, str]:
    """Send ``sig`` once a stdout line contains ``until`` (or satisfies it); returns the whole stdout and
    stderr. A watchdog kills a process that never gets there."""
    seen_it = until if callable(until) else (lambda line: until in line)
    watchdog = threading.Timer(240, proc.kill)
    watchdog.start()
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if seen_it(line):
                proc.send_signal(sig)
                break
        out, err = proc.communicate(timeout=120)
    finally:
        watchdog.cancel()
    return "".join(seen) + out, err
