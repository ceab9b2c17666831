"""Bad input is refused up front — exit 2, one line naming the value, nothing run and nothing written — and
the exit codes are documented where a user looks for them."""

from __future__ import annotations

from fuzz.config import WINDOW_BOUND

import time

import pytest

from fuzz.cli import build_parser, main
from fuzz.workers import max_workers


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("argv,needle", [
    (["--time", "nan"], "--time must be a finite number of seconds > 0, got nan"),
    (["--time", "inf"], "--time must be a finite number"),
    (["--time", "0"], "--time must be"),
    (["--max-examples", "0"], "--max-examples must be >= 1, got 0"),
    (["--window-max", "0"], f"--window-max must be between 1 and {WINDOW_BOUND}"),
    (["--window-max", "1000000000"], f"--window-max must be between 1 and {WINDOW_BOUND}, got 1000000000"),
    (["--workers", "100000"], "--workers must be between 1 and"),
    (["--op-timeout", "0"], "--op-timeout must be"),
    (["--op-memory", "3"], "--op-memory must be 0 (no limit) or at least 64 MiB"),
    (["--sanitize", "--no-isolate"], "cannot be combined with --no-isolate"),
    (["--report", "/proc/nope/r.json"], "--report /proc/nope: cannot write there"),
    (["--report", "{tmp}"], "is a directory; give a file name"),
    (["--seeds-dir", "{tmp}/afile/sub"], "afile is not a directory"),
    (["--seeds-dir", "/proc/x"], "--seeds-dir /proc/x: cannot write there"),
    (["--db", "{tmp}/afile"], "--db {tmp}/afile: exists and is not a directory"),
    (["--db", "/proc/nope"], "--db /proc/nope: cannot write there"),
])
def test_bad_input_exits_2_before_any_work(tmp_path, capsys, argv, needle):
    (tmp_path / "afile").write_text("x")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    base = {"--seeds-dir": str(tmp_path / "s"), "--db": str(tmp_path / "db")}
    for flag, value in base.items():
        if flag not in argv:
            argv += [flag, value]
    t0 = time.monotonic()
    rc, out, err = run(capsys, "fuzz", "--target", "pyring", "--time", "30", *argv) if "--time" not in argv else \
        run(capsys, "fuzz", "--target", "pyring", *argv)
    assert time.monotonic() - t0 < 10  # nothing ran (and --window-max allocated nothing)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("kvwindow: error:"), err
    assert needle.replace("{tmp}", str(tmp_path)) in lines[0], lines[0]
    assert "examples=" not in out
    assert not (tmp_path / "s").exists() and not (tmp_path / "db").exists()


def test_the_workers_bound_is_derived_from_the_machine():
    import os

    bound = max_workers()
    assert 1 <= bound <= 4 * len(os.sched_getaffinity(0))


def test_exit_codes_are_documented_in_help(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["fuzz", "--help"])
    out = capsys.readouterr().out
    for code, word in (("0", "nothing failed"), ("1", "a finding"), ("2", "a usage error"),
                       ("3", "a harness fault"), ("130", "interrupted")):
        assert any(ln.strip().startswith(code) and word in ln for ln in out.splitlines()), (code, out)
