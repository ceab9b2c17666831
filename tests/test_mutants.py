"""The mutant catalogue: every mutant is killed within a bounded number of examples; kills write no seeds."""

import pytest

from fuzz import seeds
from fuzz.cli import main
from impl.mutants.catalogue import MutantError, apply_edit, catalogue, py_ring_mutant
from impl.mutants.run import run_mutants

#: Examples (before shrinking) within which every mutant must die, with the fixed seed below.
BOUND = 60


def test_catalogue_covers_design_bug_classes():
    ms = catalogue()
    assert len(ms) >= 8
    for m in ms:
        assert m.bug_class and m.kind in ("py-ring", "c-ring", "decoder")
        if m.name != "decoder-*":
            assert m.reference.startswith("https://github.com/"), m.name
    classes = " ".join(m.bug_class for m in ms)
    for needle in ("off by one", "evict-before-append", "garbage", "cache length", "chunk", "reset",
                   "strict", "slot index"):
        assert needle in classes, needle


def test_every_mutant_is_killed_within_bound():
    before = sorted(p.name for p in seeds.seed_paths())
    results = run_mutants(time_per=30, max_examples=BOUND + 40, seed=0)
    assert sorted(p.name for p in seeds.seed_paths()) == before  # kills write no seeds
    available = [k for k in results if k.available]
    assert len([k for k in available if k.kind == "py-ring"]) >= 8
    survivors = [(k.name, k.examples_run) for k in available if not k.killed]
    assert not survivors, f"mutants survived: {survivors}"
    slow = [(k.name, k.examples) for k in available if k.examples > BOUND]
    assert not slow, f"killed too late: {slow}"
    for k in available:
        assert k.ops is not None and k.window is not None  # the shrunk seed is reported
    for k in results:
        if not k.available:
            assert k.reason  # unavailable mutants say why


def test_baseline_runs_side_by_side():
    (k,) = run_mutants(time_per=10, max_examples=100, seed=0, baseline=True, only=["ring-keeps-W+1"])
    assert k.killed and k.baseline_killed is not None
    if k.baseline_killed:
        assert k.baseline_examples >= 1 and k.ratio is not None


def test_a_stale_edit_fails_loudly():
    with pytest.raises(MutantError, match="expected exactly one occurrence"):
        apply_edit("a = 1\n", "b = 2\n", "b = 3\n", "x.py")
    m = py_ring_mutant("broken-edit", "x", "https://github.com/x/y", "d", "no such line\n", "x\n")
    with pytest.raises(MutantError):
        m.make_target()


def test_cli_kill_table(tmp_path, capsys):
    rc = main(["mutants", "--only", "ring-keeps-W+1", "--only", "ring-garbage", "--max-examples", "80",
               "--baseline", "--save-seeds", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "mutant kill table" in out and "ring-keeps-W+1" in out and "uniform ex" in out
    assert list(tmp_path.glob("*.json"))  # saved only where asked
    assert main(["mutants", "--only", "no-such-mutant"]) == 2
