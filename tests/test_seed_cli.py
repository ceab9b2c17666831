"""kvwindow seeds add/list/show and replay: content ids, atomic writes, bad input exits 2 and loses nothing."""

import json

import pytest

from fuzz import seeds
from fuzz.cli import main
from fuzz.ops import Case, Push
from tests.support.caches import BUGGY


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_add_ops_list_show_and_dedup(tmp_path, capsys):
    d = str(tmp_path)
    rc, out, _ = run(capsys, "seeds", "--seeds-dir", d, "add", "--ops", "push chunk:5 reset:3", "--window", "2",
                     "--note", "hand-made")
    assert rc == 0 and out.startswith("added ")
    sid = out.split()[1].rstrip(":")
    stored = tmp_path / f"{sid}.json"
    before = stored.read_bytes()
    rc, out, _ = run(capsys, "seeds", "--seeds-dir", d, "add", "--ops", "push,chunk:5,reset:3", "--window", "2")
    assert rc == 0 and out.startswith("already stored")
    assert stored.read_bytes() == before  # same case, same id, not rewritten
    rc, out, _ = run(capsys, "seeds", "--seeds-dir", d, "list")
    assert rc == 0 and sid in out and "hand-made" in out
    rc, out, _ = run(capsys, "seeds", "--seeds-dir", d, "show", sid[:6])
    assert rc == 0 and "push chunk:5 reset:3" in out and f"kvwindow replay {stored}" in out
    assert not list(tmp_path.glob(".*.tmp"))  # atomic write leaves no temp files


def test_add_file_copies_and_keeps_id(tmp_path, capsys):
    src = tmp_path / "src"
    s = seeds.Seed(Case(3, [Push()] * 4), {"target": "x"})
    path, _ = seeds.save_seed(s, src)
    rc, out, _ = run(capsys, "seeds", "--seeds-dir", str(tmp_path / "dst"), "add", str(path))
    assert rc == 0 and s.id in out
    assert seeds.load_seed(tmp_path / "dst" / f"{s.id}.json").case.window == 3


@pytest.mark.parametrize("text,needle", [
    ('{"format": 1, "window": 2, "ops": [["push"], ["chu', "not valid JSON"),
    ('{"format": 1, "window": 0, "ops": []}', "'window' must be an int >= 1"),
    ('{"format": 1, "window": 2, "ops": [["jump"]]}', "op #0"),
    ('[1, 2]', "expected a JSON object"),
    ('{"format": 1, "id": "000000000000", "window": 2, "ops": []}', "does not match its content"),
])
def test_malformed_seed_file_exit_2_one_line(tmp_path, capsys, text, needle):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    for argv in (["seeds", "--seeds-dir", str(tmp_path / "d"), "add", str(bad)], ["replay", str(bad)]):
        rc, _, err = run(capsys, *argv)
        assert rc == 2
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "bad.json" in lines[0] and needle in lines[0]
    assert bad.read_text() == text  # never overwritten
    assert not (tmp_path / "d").exists() or not list((tmp_path / "d").iterdir())


def test_corrupt_stored_seed_is_not_replaced(tmp_path, capsys):
    s = seeds.Seed(Case(2, [Push()] * 3))
    stored = tmp_path / f"{s.id}.json"
    stored.write_text("{truncated")
    rc, _, err = run(capsys, "seeds", "--seeds-dir", str(tmp_path), "add", "--ops", "push push push", "--window", "2")
    assert rc == 2 and "not valid JSON" in err
    assert stored.read_text() == "{truncated"


def test_bad_ops_and_missing_args_exit_2(tmp_path, capsys):
    d = str(tmp_path)
    assert run(capsys, "seeds", "--seeds-dir", d, "add", "--ops", "push jump", "--window", "2")[0] == 2
    assert run(capsys, "seeds", "--seeds-dir", d, "add", "--ops", "push")[0] == 2
    assert run(capsys, "seeds", "--seeds-dir", d, "add", "--ops", "push", "--window", "0")[0] == 2
    assert run(capsys, "seeds", "--seeds-dir", d, "show", "ffffff")[0] == 2
    assert not list(tmp_path.iterdir())


def test_replay_ok_and_window_too_wide_exit_2(tmp_path, capsys):
    s = seeds.Seed(Case(3, [Push()] * 5))
    path, _ = seeds.save_seed(s, tmp_path)
    rc, out, _ = run(capsys, "replay", str(path), "--target", "pyring")
    assert rc == 0 and f"{s.id} pyring: ok" in out
    wide = seeds.Seed(Case(40, [Push()] * 3))
    wpath, _ = seeds.save_seed(wide, tmp_path)
    rc, _, err = run(capsys, "replay", str(wpath), "--target", "decoder")
    if "not available" in err:
        pytest.skip(err.strip())
    assert rc == 2 and "window 40 exceeds" in err and len(err.strip().splitlines()) == 1


def test_replay_finds_bug_exit_1(tmp_path, capsys):
    s = seeds.Seed(Case(2, [Push()] * 3))
    path, _ = seeds.save_seed(s, tmp_path)
    rc, out, _ = run(capsys, "replay", str(path), "--target", BUGGY)
    assert rc == 1 and "FAILED" in out
    assert json.loads(path.read_text())["id"] == s.id
