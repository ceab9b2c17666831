"""Hostile and careless input (issue 30, points 5, 6 and 7): one set of bounds on every way in, seeds read only
from regular files, and one line — never a traceback — for a bad ``--db`` URL, a non-UTF-8 ``pyproject.toml``, a
malformed seed or a nonsense flag; the temp folders of killed conversions are removed by the next one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz import seeds
from fuzz.cli import main
from fuzz.config import PAYLOAD_FLOATS_BOUND, WIDTH_BOUND, WINDOW_BOUND, bounds_error
from fuzz.ops import Case, Chunk, Push

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def one_line_usage(rc, err, needle):
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("kvwindow"), err
    assert needle in lines[0], lines[0]
    assert "Traceback" not in err


# ---------------------------------------------------------------------------
# point 5: one set of bounds


@pytest.mark.parametrize("argv,needle", [
    (["--width", "1000000000"], f"--width must be between 1 and {WIDTH_BOUND}"),
    (["--width", "5000"], f"--width must be between 1 and {WIDTH_BOUND}"),
    (["--width", "4096", "--window-max", str(WINDOW_BOUND)], "floats per payload array is beyond the bound"),
])
def test_payload_flags_beyond_the_bounds_are_usage_errors(tmp_path, capsys, argv, needle):
    rc, _, err = run(capsys, "fuzz", "--target", "pyring", "--time", "30", "--seeds-dir", str(tmp_path / "s"),
                     "--db", str(tmp_path / "db"), *argv)
    one_line_usage(rc, err, needle)
    assert not (tmp_path / "s").exists()


def test_replay_takes_the_same_width_bound(tmp_path, capsys):
    rc, _, err = run(capsys, "replay", str(tmp_path), "--target", "pyring", "--width", "5000")
    one_line_usage(rc, err, "--width must be between 1")


@pytest.mark.parametrize("argv,needle", [
    (["--paged", "8,4,16,4", "--ops", "+s0 s0 chunk:999999999"], "chunk 999999999 is beyond the bound"),
    (["--paged", "8,4096,4096,4096", "--ops", "+s0"], "floats is beyond the bound"),
    (["--paged", "8,4,16,4", "--ops", "+s99"], "s63"),
    (["--window", str(WINDOW_BOUND), "--width", "4096", "--ops", "push"], "floats per payload array"),
    (["--window", "3", "--width", "5000", "--ops", "push"], "payload width 5000 is beyond the bound"),
])
def test_seeds_add_beyond_the_bounds_is_refused(tmp_path, capsys, argv, needle):
    d = tmp_path / "s"
    rc, _, err = run(capsys, "seeds", "--seeds-dir", str(d), "add", *argv)
    one_line_usage(rc, err, needle)
    assert not d.exists() or not list(d.iterdir())


@pytest.mark.parametrize("window,width", [(WINDOW_BOUND, 1), (WINDOW_BOUND, PAYLOAD_FLOATS_BOUND // WINDOW_BOUND),
                                          (16, WIDTH_BOUND), (4096, WIDTH_BOUND), (1, 1)])
def test_what_a_campaign_may_save_replay_accepts(window, width):
    """A --window-max/--width the CLI takes gives cases (the widest window, its longest chunk) seeds accept."""
    if bounds_error(window=window, width=width) is not None:
        pytest.skip("the CLI refuses this pair")
    seeds.check_bounds(Case(window, (Chunk(3 * window + 3), Push()), width=width))
    seeds.parse_seed(seeds.Seed(Case(window, (Push(),), width=width)).to_json())


# ---------------------------------------------------------------------------
# point 6: seeds from regular files only


def test_a_fifo_seed_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    p = subprocess.run([sys.executable, "-m", "fuzz.cli", "replay", str(fifo), "--target", "pyring"], cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "is a FIFO, not a seed file" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a_symlink_to_dev_zero_is_refused_in_one_line(tmp_path, capsys):
    link = tmp_path / "z.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(seeds.SeedError, match="is a device, not a seed file"):
        seeds.load_seed(link)
    rc, _, err = run(capsys, "seeds", "show", str(link))
    one_line_usage(rc, err, "is a device")


def test_a_non_regular_file_at_a_save_path_is_moved_aside(tmp_path, capsys):
    seed = seeds.Seed(Case(3, (Push(), Push())), {"target": "pyring"})
    d = tmp_path / "s"
    d.mkdir()
    (d / f"{seed.id}.json").symlink_to("/dev/zero")
    saved = seeds.store_seed(seed, d)  # a campaign's save: the seed is written, the link kept aside
    assert saved.created and saved.moved_aside is not None and saved.moved_aside.is_symlink()
    assert seeds.load_seed(saved.path).id == seed.id
    os.unlink(saved.path)
    os.mkfifo(d / f"{seed.id}.json")
    rc, _, err = run(capsys, "seeds", "--seeds-dir", str(d), "add", "--window", "3", "--ops", "push push")
    one_line_usage(rc, err, "is a FIFO")  # by hand: refused, the user decides


def test_an_oversized_seed_is_read_no_further_than_the_bound(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (seeds.MAX_SEED_BYTES + 10))
    with pytest.raises(seeds.SeedError, match="too large"):
        seeds.load_seed(big)


def test_seeds_list_exits_2_on_a_malformed_seed(tmp_path, capsys):
    d = tmp_path / "s"
    d.mkdir()
    (d / "aaaaaaaaaaaa.json").write_text("{not json")
    rc, out, _ = run(capsys, "seeds", "--seeds-dir", str(d), "list")
    assert rc == 2 and "MALFORMED" in out


def test_a_seed_naming_a_module_imports_nothing(tmp_path, capsys):
    seed = seeds.Seed(Case(3, (Push(),)), {"target": "py:tests.support.never_imported_canary:X"})
    saved = seeds.store_seed(seed, tmp_path)
    rc, out, _ = run(capsys, "seeds", "show", str(saved.path))
    assert rc == 0 and "tests.support.never_imported_canary" not in sys.modules


# ---------------------------------------------------------------------------
# point 7: one line, never a traceback


@pytest.mark.parametrize("db", ["redis://[::1", "redis://localhost:99999/0", "redis://localhost:port/0"])
def test_a_bad_redis_url_is_one_line(tmp_path, capsys, db):
    rc, _, err = run(capsys, "fuzz", "--target", "pyring", "--time", "1", "--seeds-dir", str(tmp_path / "s"),
                     "--db", db)
    one_line_usage(rc, err, f"--db {db}")


def test_a_non_utf8_pyproject_is_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "pyproject.toml").write_bytes(b"[tool.kvwindow]\nseeds-dir = \"\xff\xfe\"\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(seeds.SEEDS_ENV, raising=False)
    rc, _, err = run(capsys, "fuzz", "--target", "pyring", "--time", "1", "--db", str(tmp_path / "db"))
    one_line_usage(rc, err, "pyproject.toml: cannot read [tool.kvwindow]")


@pytest.mark.parametrize("argv", [["fuzz", "--bogus"], ["fuzz", "--time", "x"], ["seeds", "add", "--paged", "x",
                                                                                    "--ops", "+s0"],
                                  ["gate", "--bogus"], ["replay", "--op-timeout", "-1"], ["nonsense"],
                                  ["mutants", "--window-max", "1000000000", "--only", "ring-keeps-W+1"],
                                  ["gate", "--op-timeout", "nan", "--baseline", "decoder", "--candidate", "decoder",
                                   "--intervention", "layout", "--claim", "exact"]])
def test_nonsense_flags_exit_2(capsys, argv):
    rc, _, err = run(capsys, *argv)
    assert rc == 2 and "Traceback" not in err


def test_killed_conversions_leave_no_temp_folders(tmp_path, monkeypatch):
    from impl.engines import store

    monkeypatch.setenv(store.ENV, str(tmp_path / "cache"))
    base = tmp_path / "cache" / "gguf"
    base.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = base / f".{'0' * 20}.{dead.pid}.abcd"  # what a conversion killed by SIGKILL leaves behind
    stale.mkdir()
    (stale / "model.gguf").write_bytes(b"half")
    mine = base / f".{'1' * 20}.{os.getpid()}.efgh"  # a conversion of this process, in progress
    mine.mkdir()
    built = store.entry("gguf", {"k": 1}, lambda folder: (folder / "x").write_text("done"))
    assert (built / "x").read_text() == "done"
    assert not stale.exists() and mine.exists()
    assert json.loads((built / store.MANIFEST).read_text())["key"] == {"k": 1}
