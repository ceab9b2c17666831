"""``kvwindow prove`` (fuzz/prove.py): the no-lake path, the audit parser, a fake lake."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fuzz import prove

ROOT = Path(__file__).resolve().parent.parent


def test_without_lake_says_how_to_install_elan_and_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(prove.shutil, "which", lambda name: None)
    assert prove.main([]) == 2
    err = capsys.readouterr().err
    assert "elan" in err and "lake" in err
    assert "kvwindow prove --check" in err  # the way without elan


def test_without_lake_on_path(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty PATH directory: no lake anywhere
    assert prove.main([]) == 2
    assert "elan" in capsys.readouterr().err


def test_parse_axioms_reads_print_axioms_output():
    log = (
        "info: ././lean/KVWindow/Audit.lean:14:0: 'KVWindow.run_correct' depends on axioms: [propext]\n"
        "info: 'KVWindow.step_lastWindow' depends on axioms: [propext,\n Classical.choice, Quot.sound]\n"
        "'KVWindow.lastWindow_suffix' does not depend on any axioms\n"
    )
    got = prove.parse_axioms(log)
    assert got["run_correct"] == ["propext"]
    assert got["step_lastWindow"] == ["propext", "Classical.choice", "Quot.sound"]
    assert got["lastWindow_suffix"] == []


def test_report_flags_sorry_and_missing(capsys):
    axioms = {n: ["propext"] for n in prove.THEOREMS}
    assert prove.report(axioms) == 0
    axioms["run_correct"] = ["sorryAx"]
    assert prove.report(axioms) == 1
    del axioms["run_correct"]
    assert prove.report(axioms) == 1
    assert "MISSING" in capsys.readouterr().out


def test_inventory_matches_audit_file():
    audit = (ROOT / "lean" / "KVWindow" / "Audit.lean").read_text(encoding="utf-8")
    printed = [line.split("KVWindow.", 1)[1].strip() for line in audit.splitlines()
               if line.startswith("#print axioms")]
    assert printed == list(prove.THEOREMS)


def _fake_lake(tmp_path: Path, body: str) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    lake = bindir / "lake"
    lake.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    lake.chmod(lake.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bindir


def test_with_a_fake_lake_prints_the_inventory(monkeypatch, tmp_path, capsys):
    lines = "".join(f"echo \"info: 'KVWindow.{n}' depends on axioms: [propext, Quot.sound]\"\n"
                    for n in prove.THEOREMS)
    bindir = _fake_lake(tmp_path, 'if [ "$1" = build ]; then\n' + lines + "fi\nexit 0\n")
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    assert prove.main(["--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "push_simulates_step" in out and "Quot.sound" in out
    assert "checked by lake build with the toolchain of lean-toolchain (leanprover/lean4:v4.28.0)" in out


def test_with_a_fake_lake_cached_build_asks_lean_for_the_audit(monkeypatch, tmp_path, capsys):
    lines = "".join(f"echo \"'KVWindow.{n}' does not depend on any axioms\"\n" for n in prove.THEOREMS)
    bindir = _fake_lake(tmp_path, 'if [ "$1" = env ]; then\n' + lines + "fi\nexit 0\n")
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    assert prove.main(["--root", str(tmp_path)]) == 0


def test_failed_build_exits_1(monkeypatch, tmp_path, capsys):
    bindir = _fake_lake(tmp_path, "echo 'error: unsolved goals' >&2\nexit 1\n")
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    assert prove.main(["--root", str(tmp_path)]) == 1
    assert "unsolved goals" in capsys.readouterr().err


# ---------------------------------------------------------------- --check (scripts/lean_check.py)


def test_every_inventory_theorem_has_a_site_in_lean():
    sites = prove.theorem_sites(ROOT / "lean")
    assert set(sites) == set(prove.THEOREMS)
    path, first, last = sites["run_correct"]
    assert path.startswith("lean/KVWindow/") and first <= last
    assert "theorem run_correct" in (ROOT / path).read_text(encoding="utf-8").splitlines()[first - 1]


def test_check_inventory_marks_the_theorem_holding_an_error(capsys):
    lc = prove._lean_check_module(ROOT)
    path, first, _ = prove.theorem_sites(ROOT / "lean")["paged_free_safe"]
    err = lc.Message(path, first + 1, 3, "error", "unsolved goals")
    result = lc.Result([err], [], {}, lc.join(ROOT / "lean"), 1.0)
    assert prove.check_inventory(result, ROOT / "lean", lc.CHECKER) == 1
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("paged_free_safe "))
    assert "ERROR" in row and f"{path}:{first}" in row
    assert f"{len(prove.THEOREMS) - 1} of {len(prove.THEOREMS)} theorems" in out
    clean = lc.Result([], [], {}, result.joined, 1.0)
    assert prove.check_inventory(clean, ROOT / "lean", lc.CHECKER) == 0
    assert "axioms: not checked by this build" in capsys.readouterr().out


def test_check_an_error_outside_every_theorem_still_fails(capsys):
    lc = prove._lean_check_module(ROOT)
    err = lc.Message("lean/KVWindow/Spec.lean", 1, 1, "error", "unexpected token")
    assert prove.check_inventory(lc.Result([err], [], {}, lc.join(ROOT / "lean"), 1.0), ROOT / "lean", lc.CHECKER) == 1


def test_check_without_a_checkout_is_a_usage_error(tmp_path, capsys):
    assert prove.main(["--check", "--root", str(tmp_path)]) == 2
    assert "lean_check.py" in capsys.readouterr().err
