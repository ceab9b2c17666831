"""Paged targets in campaigns: paged-c clean for 20 s, the reference pool held to the protocol as a
paged-py: target, seeds of both kinds replayed where they fit (and refused with the reason elsewhere), the
paged targets resolved and refused as DESIGN §4 says, and the kill table killing every paged mutant."""

from __future__ import annotations

import importlib.util

import json
import sys

import pytest

from fuzz import seeds as seedstore
from fuzz.campaign import fuzz_target
from fuzz.config import CampaignConfig
from fuzz.killtable import run_mutants
from fuzz.ops import Case
from fuzz.paged.ops import PagedCase
from fuzz.replay import replay_outcome
from fuzz.results import TargetResult
from fuzz.targets import isolated, registry
from fuzz.targets.base import TargetError
from impl.mutants.catalogue import catalogue

PAGED_MUTANTS = [m.name for m in catalogue() if m.kind in ("paged-c", "py-paged")]


def test_paged_c_campaign_is_clean(tmp_path):
    cfg = CampaignConfig(targets=("paged-c",), seconds=20, campaign_seed=7, seeds_dir=str(tmp_path))
    target = isolated.resolve("paged-c", cfg)
    try:
        res = fuzz_target(target, cfg)
    finally:
        isolated.close(target)
    assert not res.failures and not res.faults, (res.failures, res.faults)
    assert res.phases_run["paged-tours"]["status"] == "ran" and res.phases_run["paged-generated"]["examples"] > 20
    assert res.phases_run["tours"]["status"] == "n/a" and "paged" in res.phases_run["tours"]["why"]
    back = TargetResult.from_json(json.loads(json.dumps(res.to_json())))
    assert back.efficiency == res.efficiency and back.efficiency_samples.keys() == res.efficiency_samples.keys()
    for kind, sample in res.efficiency_samples.items():  # a sample case replays
        assert PagedCase.from_json(sample["case"]).text in sample["text"]


def test_the_reference_pool_is_held_to_the_protocol(tmp_path):
    cfg = CampaignConfig(targets=("paged-py:pyspec.paged:PagedPool",), seconds=4, campaign_seed=3,
                         seeds_dir=str(tmp_path))
    t = registry.resolve("paged-py:pyspec.paged:PagedPool")
    assert t.kind == "paged" and t.paged_ops == ("fork", "admit")
    res = fuzz_target(t, cfg)
    assert not res.failures and not res.faults and res.examples > 5


def test_paged_targets_resolve_and_refuse(tmp_path, monkeypatch):
    assert registry.resolve("paged-c").paged_ops == ("fork", "admit")
    assert registry.BUILTIN["paged-c"][1]  # a CPU target: in the default campaign wherever it builds
    assert isolated.is_native("paged-c") and isolated.is_native("paged-c:/x.so") and \
        isolated.is_native("mutant:paged-fork-no-cow") and not isolated.is_native("mutant:paged-batch-by-longest")
    with pytest.raises(TargetError, match="no such file"):
        registry.resolve(f"paged-c:{tmp_path}/missing.so")
    (tmp_path / "not_a_lib.so").write_text("x")
    with pytest.raises(TargetError, match="not a loadable shared library"):
        registry.resolve(f"paged-c:{tmp_path}/not_a_lib.so")
    (tmp_path / "needs_args.py").write_text(
        "from impl.mutants.paged_pool import BlockPool\n"
        "class NeedsArgs(BlockPool):\n    def __init__(self, n):\n        super().__init__()\n"
        "class Ring:\n    def configure(self, *a): pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path)] + sys.path)
    with pytest.raises(TargetError, match="built with no arguments"):
        registry.resolve("paged-py:needs_args:NeedsArgs")
    with pytest.raises(TargetError, match="missing add, append"):
        registry.resolve("paged-py:needs_args:Ring")
    with pytest.raises(TargetError, match="expected paged-py:module.path:ClassName"):
        registry.resolve("paged-py:nothing")
    for name in ("vllm:swa", "vllm:hybrid", "sglang:swa"):
        target, why = registry.probe(name)
        if importlib.util.find_spec(name.split(":")[0]) is None:  # the default venv: no engine
            assert target is None and "install_serving_cores" in why, why


def test_seeds_of_both_kinds_replay_where_they_fit(tmp_path):
    paged = seedstore.Seed(PagedCase.parse("+s0 s0 chunk:5 fork:s0>s1 s1 push admit:s2<s0:4 s2 push",
                                           window=3, block_size=2, num_blocks=8, width=4), {"added": "test"})
    ring = seedstore.Seed(Case.parse(3, "push chunk:5"), {"added": "test"})
    for s in (paged, ring):
        saved = seedstore.store_seed(s, tmp_path)
        assert seedstore.load_seed(saved.path).case == s.case
    pc, ring_c = registry.resolve("paged-c"), registry.resolve("ring-c")
    assert replay_outcome(seedstore.load_seed(tmp_path / f"{paged.id}.json"), pc) is None
    assert replay_outcome(ring, ring_c) is None
    with pytest.raises(ValueError, match="is not a paged cache"):
        replay_outcome(paged, ring_c)
    with pytest.raises(ValueError, match="it takes paged cases"):
        replay_outcome(ring, pc)
    text = (tmp_path / f"{paged.id}.json").read_text()
    assert '"paged": {' in text and '      ["fork", 0, 1],' in text  # one op per line


def test_the_kill_table_kills_every_paged_mutant():
    assert len(PAGED_MUTANTS) == 13
    # In process (the C mutants raise at the audit before any read goes through the entry they broke), so the
    # reduction's candidates need no fresh child each; `kvwindow mutants` runs them isolated.
    cfg = CampaignConfig(seconds=3, campaign_seed=0, save_seeds=False, isolate=False)
    results = run_mutants(cfg, only=PAGED_MUTANTS)
    assert {r.name for r in results} == set(PAGED_MUTANTS)
    for r in results:
        assert r.available and r.killed, (r.name, r.reason, r.error)
        assert r.seconds < 3 and len(r.case.ops) <= LONGEST_KILL.get(r.name, 12), (r.name, r.seconds, str(r.case))


#: Reduced kills that cannot be short: 16 table lanes alias only from a 17th live sequence (17 adds, a push into
#: the first and one into the 17th).
LONGEST_KILL = {"paged-c-sixteen-lanes": 19}


def test_seeds_cli_takes_paged_cases(tmp_path, capsys):
    from fuzz.cli import main

    d = str(tmp_path)
    assert main(["seeds", "--seeds-dir", d, "add", "--paged", "3,2,8,4", "--ops", "+s0 s0 chunk:5 fork:s0>s1 s1 push"]) == 0
    assert main(["seeds", "--seeds-dir", d, "add", "--window", "3", "--ops", "push chunk:4"]) == 0
    assert main(["seeds", "--seeds-dir", d, "add", "--paged", "3,2", "--ops", "+s0"]) == 2
    assert main(["seeds", "--seeds-dir", d, "add", "--paged", "3,2,8,4", "--ops", "s0 push"]) == 2
    capsys.readouterr()
    assert main(["seeds", "--seeds-dir", d, "list"]) == 0
    assert "paged W=3 B=2 N=8 ops=4" in capsys.readouterr().out
    assert main(["replay", "--seeds-dir", d, "--target", "paged-c"]) == 0
    out = capsys.readouterr().out
    assert "paged-c: ok" in out and "paged-c: skipped: paged-c is a paged cache" in out


def test_a_sequence_past_the_bound_is_an_efficiency_finding(tmp_path):
    from fuzz.targets.paged import PagedTarget
    from tests.support.paged_caches import wrong

    t = PagedTarget("paged-py:tests.support.paged_caches:FreesByCacheLength", wrong("frees-by-cache-length"))
    cfg = CampaignConfig(seconds=5, campaign_seed=1, seeds_dir=str(tmp_path), db=None)
    res = fuzz_target(t, cfg)
    assert res.failures and res.failures[0].kind == "efficiency", res.failures
    saved = seedstore.load_seed(res.failures[0].seed_path)
    assert saved.found["kind"] == "efficiency" and "more than the rule ever lets a sequence hold" in saved.found["error"]
    # reduced: one sequence, a token or two past the bound (max_rollback 4: ceil((W+4-1)/B) + 1 blocks)
    assert {type(o).__name__ for o in saved.case.ops} <= {"Add", "Push", "Chunk"} and len(saved.case.ops) <= 8, \
        str(saved.case)
