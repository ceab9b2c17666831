"""The mutant catalogue: every mutant is killed within a bounded number of examples; kills write no seeds.

Also the baseline measurement: per-seed runs of both testers, censored statistics
(a survivor counts as "more than its budget"), a reproducible uniform tester, and
the boundary-only mutants that only an exact boundary exposes.
"""

import random

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

from fuzz import seeds
from fuzz.cli import main
from fuzz.config import CampaignConfig
from fuzz.ops import Case, Chunk, Push, Reset
from fuzz.strategies import uniform_case, uniform_cases
from impl.errors import Unavailable
from fuzz.killtable import censored_stats, run_mutants, summarize
from fuzz.targets.mutants import mutant_target
from impl.mutants.catalogue import MutantError, apply_edit, catalogue, py_ring_mutant, select

#: Examples (before shrinking) within which every mutant must die, with the fixed seed below.
BOUND = 60


def test_catalogue_covers_design_bug_classes():
    ms = catalogue()
    assert len(ms) >= 8
    assert set(BOUNDARY) <= {m.name for m in ms}
    for m in ms:
        assert m.bug_class and m.kind in ("py-ring", "c-ring", "decoder", "paged-c", "py-paged")
        if m.name != "decoder-*":
            assert m.reference.startswith("https://github.com/"), m.name
    classes = " ".join(m.bug_class for m in ms)
    for needle in ("off by one", "evict-before-append", "garbage", "cache length", "chunk", "reset",
                   "strict", "slot index"):
        assert needle in classes, needle


#: Paged mutants wrong only at production sizes (pages above 16 tokens, more than 4 live sequences; for the C pool's:
#: pools past 256 blocks, more than 16 live sequences, pages of 257): the paged scale tours and the one-in-four large
#: draws reach them after the small paged tours, so they are held to twice the bound.
AT_SCALE = ("paged-offset-4-bits", "paged-four-lanes", "paged-c-block-id-8-bits", "paged-c-sixteen-lanes",
            "paged-c-slot-8-bits")


def test_every_mutant_is_killed_within_bound():
    before = sorted(p.name for p in seeds.seed_paths())
    results = run_mutants(CampaignConfig(seconds=30, max_examples=BOUND + 40, campaign_seed=0, save_seeds=False))
    assert sorted(p.name for p in seeds.seed_paths()) == before  # kills write no seeds
    available = [k for k in results if k.available]
    assert len([k for k in available if k.kind == "py-ring"]) >= 8
    survivors = [(k.name, k.examples_run) for k in available if not k.killed and k.name not in RACES]
    assert not survivors, f"mutants survived: {survivors}"
    slow = [(k.name, k.examples) for k in available
            if k.name not in RACES and k.examples > (2 * BOUND if k.name in AT_SCALE else BOUND)]
    assert not slow, f"killed too late: {slow}"
    for k in available:
        if k.name not in RACES:  # a race may survive this budget: test_the_race_mutants_die_in_the_threads_phase
            assert k.case is not None  # the shrunk seed is reported
    for k in results:
        if not k.available:
            assert k.reason  # unavailable mutants say why


#: Mutants whose bug needs two threads inside the library at once: found by repetition in the threads phase, so they
#: are held to a time budget (below), not to an example count.
RACES = ("c-static-scratch",)


def test_the_race_mutants_die_in_the_threads_phase():
    results = run_mutants(CampaignConfig(seconds=60, campaign_seed=0, save_seeds=False), mutants=select(list(RACES)))
    for k in results:
        assert k.available and k.killed, (k.name, k.examples_run)
        assert k.case.threads and k.case.instance_count >= 2, k.case  # the seed records its threads
        assert "threaded re-runs" in (k.note or ""), k.note  # confirmed by repetition before it was saved


#: Mutants whose bug needs two live instances (the instance tours and the instances phase reach them).
SHARED_STATE = ("ring-shared-position-buffer", "c-shared-slab")


def test_the_shared_state_mutants_take_two_live_instances_to_kill():
    results = run_mutants(CampaignConfig(seconds=30, campaign_seed=0, save_seeds=False),
                          mutants=select(list(SHARED_STATE)))
    for k in results:
        assert k.available and k.killed, (k.name, k.examples_run)
        assert k.case.instances, k.case  # it takes two live instances to show


def test_the_kill_table_runs_c_mutants_in_an_isolated_child_and_stops_it():
    """C mutants are native targets: the kill table runs them as every campaign does (issue 13), and the
    new ones of issue 14 (an error path, a repeated position, a narrowed trace) are still killed there."""
    from fuzz.killtable import _campaign_target
    from fuzz.targets.isolated import IsolatedTarget

    cfg = CampaignConfig(seconds=30, max_examples=BOUND + 40, campaign_seed=0, save_seeds=False)
    (c_mutant,) = select(["c-len-W+1"])
    with _campaign_target(c_mutant, cfg) as t:
        assert isinstance(t, IsolatedTarget) and t.name == "mutant:c-len-W+1" and t.traced
    assert not isinstance(_campaign_target(c_mutant, cfg.replace(isolate=False)), IsolatedTarget)
    assert not isinstance(_campaign_target(select(["ring-keeps-W+1"])[0], cfg), IsolatedTarget)
    new = ["c-error-path-moves-state", "c-accepts-repeated-position", "c-trace-int16-positions"]
    results = run_mutants(cfg, repeats=2, only=new)
    assert [k.name for k in results] == new and all(k.killed_every_repeat for k in results), results


#: Mutants that are right on every stream except at one exact boundary, with a case that
#: hits the boundary (must fail) and cases that come close but miss it (must pass).
BOUNDARY = {
    "ring-chunk-overflow-by-one": (4, ["chunk:5", "push push push push chunk:1", "push chunk:4"],
                                   ["chunk:6 push chunk:3 chunk:4 chunk:0 push", "chunk:4 push chunk:2 reset:3 chunk:3"]),
    "ring-chunk-fill-reads-empty": (4, ["chunk:4", "push push chunk:2", "chunk:1 chunk:3"],
                                    ["chunk:3 push push chunk:6", "push chunk:5 push chunk:2 reset:2 chunk:1 push"]),
    "c-chunk-fills-window-fast-path": (4, ["push chunk:4", "chunk:2 chunk:4", "chunk:7 chunk:4"],
                                       ["chunk:4 chunk:4 push chunk:3 chunk:5", "push chunk:3 chunk:5 chunk:8"]),
    "c-read-first-lap-le": (4, ["chunk:5", "push push push push push", "chunk:3 chunk:2"],
                            ["chunk:4 chunk:2 push push", "chunk:6 push reset:1 push push push"]),
}


@pytest.mark.parametrize("name", sorted(BOUNDARY))
def test_boundary_mutant_fails_only_at_its_boundary(name):
    (m,) = select([name])
    try:
        target = mutant_target(m)
    except Unavailable as e:
        pytest.skip(str(e))
    window, hits, misses = BOUNDARY[name]
    for text in hits:
        with pytest.raises(AssertionError):
            target.run(Case.parse(window, text))
    for text in misses:
        target.run(Case.parse(window, text))  # no mismatch


@pytest.mark.parametrize("name", sorted(BOUNDARY))
def test_boundary_mutant_killed_under_every_seed(name):
    (k,) = run_mutants(CampaignConfig(seconds=30, max_examples=BOUND + 40, campaign_seed=0, save_seeds=False),
                       repeats=5, only=[name])
    if not k.available:
        pytest.skip(k.reason)
    assert [r["campaign_seed"] for r in k.biased_runs] == [0, 1, 2, 3, 4]
    slow = [(r["campaign_seed"], r["examples"] if r["killed"] else f">{r['examples_run']}")
            for r in k.biased_runs if not r["killed"] or r["examples"] > BOUND]
    assert not slow, f"{name}: not killed within {BOUND} examples under seeds {slow}"


def test_baseline_reports_every_seed():
    (k,) = run_mutants(CampaignConfig(seconds=10, max_examples=150, campaign_seed=3, save_seeds=False),
                       mode="both", repeats=3, only=["ring-chunk-overflow-by-one"])
    assert k.repeats == 3 and len(k.biased_runs) == len(k.baseline_runs) == 3
    for runs in (k.biased_runs, k.baseline_runs):
        assert [r["campaign_seed"] for r in runs] == [3, 4, 5]
        for r in runs:
            assert set(r) >= {"killed", "examples", "tokens", "examples_run", "tokens_run", "seconds_run"}
            if r["killed"]:
                assert 1 <= r["examples"] <= r["examples_run"] and r["tokens"] >= 1
            else:
                assert r["examples"] is None and r["examples_run"] >= 1
    # repeat 0 fills the fields kvwindow bench reads
    assert k.killed == k.biased_runs[0]["killed"] and k.examples == k.biased_runs[0]["examples"]
    assert k.baseline_killed == k.baseline_runs[0]["killed"]
    j = k.to_json()
    assert j["summary"]["biased"]["runs"] == 3 and j["summary"]["uniform"]["runs"] == 3
    assert set(j["summary"]["median_ratio"]) == {"examples", "tokens"}


def test_censored_stats_count_survivors_as_lower_bounds():
    runs = [{"killed": True, "examples": 4, "examples_run": 4},
            {"killed": False, "examples": None, "examples_run": 100},
            {"killed": True, "examples": 9, "examples_run": 9}]
    st = censored_stats(runs, "examples")
    assert (st["min"], st["median"], st["max"]) == (4, 9, 100)
    assert not st["median_lower_bound"] and st["max_lower_bound"]
    runs.append({"killed": False, "examples": None, "examples_run": 100})
    st = censored_stats(runs, "examples")
    assert st["median"] == (9 + 100) / 2 and st["median_lower_bound"]
    for r in runs:
        r["tokens"], r["tokens_run"] = r["examples"], r["examples_run"]
    s = summarize(runs)
    assert s["kills"] == 2 and s["kill_rate"] == 0.5 and s["tokens"]["max_lower_bound"]


def test_uniform_baseline_is_naive_and_reproducible():
    rng = random.Random(7)
    sizes, resets, kinds = set(), set(), {"push": 0, "chunk": 0, "reset": 0}
    for _ in range(400):
        case = uniform_case(rng, window_max=8)
        w, ops = case.window, case.ops
        assert 1 <= w <= 8 and len(ops) <= 24
        for op in ops:
            if isinstance(op, Chunk):
                kinds["chunk"] += 1
                sizes.add(op.n)
            elif isinstance(op, Reset):
                kinds["reset"] += 1
                resets.add(op.window)
            else:
                assert isinstance(op, Push)
                kinds["push"] += 1
    assert sizes == set(range(0, 25)) and resets == set(range(1, 9))  # chunks uniform in 0..3*window_max
    assert min(kinds.values()) > 0.8 * max(kinds.values())  # push / chunk / reset equally likely

    def draw(salt):
        got = []

        @seed(11)
        @settings(max_examples=5, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(uniform_cases(8, salt=salt))
        def collect(case):
            got.append(case)

        collect()
        return got

    assert draw(0) == draw(0)  # the campaign seed fixes the baseline's cases
    assert draw(0)[0] != draw(1)[0]  # and each campaign seed starts from its own case


def test_baseline_runs_side_by_side():
    (k,) = run_mutants(CampaignConfig(seconds=10, max_examples=100, campaign_seed=0, save_seeds=False),
                       mode="both", only=["ring-keeps-W+1"])
    assert k.killed and k.baseline_killed is not None
    if k.baseline_killed:
        assert k.baseline_examples >= 1 and k.ratio is not None


def test_a_stale_edit_fails_loudly():
    with pytest.raises(MutantError, match="expected exactly one occurrence"):
        apply_edit("a = 1\n", "b = 2\n", "b = 3\n", "x.py")
    m = py_ring_mutant("broken-edit", "x", "https://github.com/x/y", "d", "no such line\n", "x\n")
    with pytest.raises(MutantError):
        mutant_target(m)


def test_cli_kill_table(tmp_path, capsys):
    rc = main(["mutants", "--only", "ring-keeps-W+1", "--only", "ring-garbage", "--max-examples", "80",
               "--baseline", "--save-seeds", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "mutant kill table" in out and "ring-keeps-W+1" in out and "uniform" in out and "ratio" in out
    assert list(tmp_path.glob("*.json"))  # saved only where asked
    assert main(["mutants", "--only", "no-such-mutant"]) == 2
