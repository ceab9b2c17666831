"""Done-when demo: a bug injected into a copy of the C ring is found by a campaign, saved as a seed,
replayed by ``kvwindow replay`` (exit 1 on the buggy library, 0 on the real one), and survives a
restart: fresh processes re-read the seed from disk."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz import seeds
from fuzz.cli import main
from fuzz.replay import replay_seed

ROOT = Path(__file__).resolve().parents[1]


def _kvwindow(*argv):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "fuzz.cli", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_injected_c_bug_found_saved_replayed_and_survives_restart(tmp_path, capsys):
    from impl._ring_build import compile_ring_library

    rt = pytest.importorskip("fuzz.targets.ring", reason="the C ring targets have not landed")
    try:
        real = compile_ring_library(tmp_path / "real.so")
        # The bug: a slot is stamped with the cache length instead of the token's absolute position.
        buggy = compile_ring_library(tmp_path / "buggy.so",
                                     replace=("  r->pos[s] = pos;\n", "  r->pos[s] = rkv_len(r->n, r->w);\n"))
    except FileNotFoundError as e:
        pytest.skip(f"no C compiler: {e}")
    sd = tmp_path / "seeds"
    rep = tmp_path / "report.json"
    rc = main(["fuzz", "--target", f"c:{buggy}", "--time", "30", "--seed", "0", "--seeds-dir", str(sd),
               "--report", str(rep), "--db", str(tmp_path / "db")])
    assert rc == 1
    doc = json.loads(rep.read_text())
    # One seed per distinct finding (the bug shows in read and in the trace, filling and full: DESIGN §4).
    assert sorted(p.stem for p in sd.glob("*.json")) == sorted(f["seed_id"] for f in doc["failures"])
    seed_file = sd / f"{doc['failures'][0]['seed_id']}.json"
    # Restart: new processes re-read the seed from disk.
    bad = _kvwindow("replay", str(seed_file), "--target", f"c:{buggy}")
    assert bad.returncode == 1 and "FAILED" in bad.stdout, bad.stdout + bad.stderr
    good = _kvwindow("replay", str(seed_file), "--target", f"c:{real}")
    assert good.returncode == 0, good.stdout + good.stderr
    # And pytest-style replay against the built-in targets that can take it.
    s = seeds.load_seed(seed_file)
    assert replay_seed(s, rt.make_c_library(str(real))) is None
    assert replay_seed(s, rt.make_c_library(str(buggy))) is not None
