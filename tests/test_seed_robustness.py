"""Seed files: every undecodable file is named in one line (and never stops the replay of the others),
bounds are enforced, writes are atomic with the umask's mode, stale temp files are cleaned, a corrupt file
is moved aside rather than overwritten, and ``c:`` paths load exactly the file named."""

from __future__ import annotations

from fuzz.config import WINDOW_BOUND

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz import seeds
from fuzz.cli import main
from fuzz.ops import Case, Chunk, Push, Reset

ROOT = Path(__file__).resolve().parents[1]

#: name -> (bytes, what the one-line error says)
BAD = {
    "aaaaaaaaaaaa": (b"\xff\xfe{binary", "not UTF-8"),
    "bbbbbbbbbbbb": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "cccccccccccc": (b'{"format": 1, "window": 2, "ops": {"a": 1}}', "ops must be a list"),
    "dddddddddddd": (b'{"format": 1, "window": 1000000, "ops": [["push"]]}', "beyond the bound"),
    "eeeeeeeeeeee": (b'{"format": 1, "window": 3, "ops": [["chunk", 100000000]]}', "chunk of 100000000 tokens"),
    "ffffffffffff": (b'{"format": 1, "window": 2, "ops": [["push"]], "x": ' + b"9" * 5000 + b"}", "not valid JSON"),
}


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def mixed_dir(tmp_path):
    d = tmp_path / "seeds"
    d.mkdir()
    for name, (data, _) in BAD.items():
        (d / f"{name}.json").write_bytes(data)
    good = seeds.Seed(Case(3, (Push(),) * 5))
    seeds.save_seed(good, d)
    return d, good


def test_each_bad_file_is_named_in_one_line(mixed_dir, capsys):
    d, good = mixed_dir
    for name, (_, needle) in BAD.items():
        with pytest.raises(seeds.SeedError) as e:
            seeds.load_seed(d / f"{name}.json")
        assert f"{name}.json" in str(e.value) and needle in str(e.value) and "\n" not in str(e.value)
    rc, out, _ = run(capsys, "seeds", "--seeds-dir", str(d), "list")
    assert rc == 2  # a malformed seed is bad input (usage), not a finding
    for name, (_, needle) in BAD.items():
        (line,) = [ln for ln in out.splitlines() if ln.startswith(name)]
        assert "MALFORMED" in line and needle in line
    assert any(ln.startswith(good.id) and "MALFORMED" not in ln for ln in out.splitlines())
    rc, out, err = run(capsys, "replay", "--seeds-dir", str(d), "--target", "pyring")
    assert rc == 2 and f"{good.id} pyring: ok" in out  # the good seed still ran
    assert len(err.strip().splitlines()) == len(BAD) and f"{len(BAD)} malformed" in out
    for name in BAD:
        rc, _, err = run(capsys, "seeds", "--seeds-dir", str(d), "show", name)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and f"{name}.json" in err


def test_seeds_show_empty_and_directory_are_clear_errors(mixed_dir, capsys):
    d, _ = mixed_dir
    rc, _, err = run(capsys, "seeds", "--seeds-dir", str(d), "show", "")
    assert rc == 2 and "give a seed id" in err and "Traceback" not in err
    rc, _, err = run(capsys, "seeds", "--seeds-dir", str(d), "show", str(d))
    assert rc == 2 and "not the directory" in err and "Traceback" not in err
    rc, _, err = run(capsys, "replay", "", "--target", "pyring")
    assert rc == 2 and "empty seed name" in err


def test_the_pytest_replay_fails_one_test_per_bad_file_and_runs_the_rest(mixed_dir, tmp_path):
    d, good = mixed_dir
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(ROOT / "tests" / "test_seed_replay.py", suite / "test_replay_copy.py")
    (suite / "conftest.py").write_text(f"import fuzz.seeds\nfuzz.seeds.SEED_DIR = __import__('pathlib').Path({str(d)!r})\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite), "-k",
                           "MALFORMED or pyring"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "error" not in out.splitlines()[-1]  # no collection error
    for name in BAD:
        assert f"MALFORMED:{name}.json" in out
    assert f"{len(BAD)} failed" in out.splitlines()[-1]
    assert "passed" in out.splitlines()[-1]  # the good seed's replay and format checks ran


def test_seeds_beyond_the_bounds_are_refused_at_add(tmp_path, capsys):
    d = str(tmp_path / "s")
    for argv, needle in ((["--window", "1000000000000", "--ops", "push"], f"--window must be between 1 and {WINDOW_BOUND}"),
                         (["--window", "3", "--ops", "chunk:100000000"], "beyond the bound"),
                         (["--window", "3", "--ops", "reset:70000 push"], "window 70000 is beyond the bound")):
        rc, _, err = run(capsys, "seeds", "--seeds-dir", d, "add", *argv)
        assert rc == 2 and needle in err, err
    assert not Path(d).exists()
    seeds.check_bounds(Case(65536, (Chunk(seeds.CHUNK_BOUND), Reset(65536))))  # the bounds themselves are fine


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_seed_and_report_files_get_the_umask_mode(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        path, _ = seeds.save_seed(seeds.Seed(Case(2, (Push(),))), tmp_path)
        seeds.atomic_write_json(tmp_path / "r.json", {"a": 1})
    finally:
        os.umask(old)
    assert (path.stat().st_mode & 0o777, (tmp_path / "r.json").stat().st_mode & 0o777) == (mode, mode)


def test_stale_temp_files_are_cleaned_and_live_ones_kept(tmp_path, capsys):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".abc.json.{int(dead.stdout)}.x1y2z3.tmp"
    live = tmp_path / f".abd.json.{os.getpid()}.q1w2e3.tmp"
    other = tmp_path / ".notes.tmp"
    for f in (stale, live, other):
        f.write_text("partial")
    rc, _, _ = run(capsys, "seeds", "--seeds-dir", str(tmp_path), "add", "--window", "2", "--ops", "push")
    assert rc == 0
    assert not stale.exists() and live.exists() and other.exists()


def test_a_corrupt_file_with_the_new_seeds_id_is_moved_aside(tmp_path, capsys):
    """The campaign's finding is saved; the corrupt file is kept, renamed, and reported."""
    sd = tmp_path / "s"
    sd.mkdir()
    smallest = Case(1, ())  # what every campaign against AlwaysWrong shrinks to
    corrupt = sd / f"{smallest.id}.json"
    corrupt.write_text("{garbage")
    rc, out, err = run(capsys, "fuzz", "--target", "py:tests.support.crashers:AlwaysWrong", "--time", "10",
                       "--seed", "0", "--seeds-dir", str(sd), "--db", str(tmp_path / "db"))
    assert rc == 1, out + err
    assert seeds.load_seed(corrupt).case == smallest
    assert (sd / f"{smallest.id}.json.corrupt").read_text() == "{garbage"
    assert f"moved aside to {sd / smallest.id}.json.corrupt" in out
    # A second campaign: the seed is already stored, nothing else is moved.
    rc, out, _ = run(capsys, "fuzz", "--target", "py:tests.support.crashers:AlwaysWrong", "--time", "10",
                     "--seed", "0", "--seeds-dir", str(sd), "--db", str(tmp_path / "db"))
    assert rc == 1 and "already stored" in out and not (sd / f"{smallest.id}.json.corrupt.1").exists()


def test_c_paths_load_exactly_the_file_named(tmp_path, monkeypatch, capsys):
    from impl._ring_build import NoCompiler, compile_ring_library

    from fuzz.targets.ring import make_c_library

    try:
        compile_ring_library(tmp_path / "lib.so")
    except NoCompiler as e:
        pytest.skip(str(e))
    assert [p.name for p in tmp_path.iterdir()] == ["lib.so"]  # nothing beside the library (no _src.c)
    monkeypatch.chdir(tmp_path)
    target = make_c_library("./lib.so")
    assert target.factory().__dict__["_b"].origin == str(tmp_path / "lib.so")  # absolute: no search path
    rc, _, err = run(capsys, "fuzz", "--target", "c:libm.so.6", "--time", "1")
    assert rc == 2 and "no such file" in err  # never the system libm through the library path
    shutil.copy(tmp_path / "lib.so", tmp_path / "libm.so.6")
    t = make_c_library("libm.so.6")  # a local file of that name: that file, not the system libm
    assert t.factory().__dict__["_b"].origin == str(tmp_path / "libm.so.6")
    assert t.run(Case(3, (Push(),) * 5)).tokens == 5
