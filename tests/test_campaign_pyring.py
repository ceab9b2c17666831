"""The first campaign: pyring runs clean, and a broken ring is caught and shrunk to a seed."""

import json
from pathlib import Path

from fuzz import campaign, seeds
from fuzz.cli import main
from fuzz.config import CampaignConfig
from fuzz.targets.cache import CacheTarget
from fuzz.targets.pyring import make_pyring
from tests.support.caches import BUGGY, ReadsFromSlotZero


def test_pyring_campaign_runs_clean(tmp_path):
    res = campaign.fuzz_target(make_pyring(), CampaignConfig(seconds=60, max_examples=150, campaign_seed=3,
                                                              seeds_dir=str(tmp_path)))
    assert not res.failures
    assert res.examples >= 150 and res.tokens > 0
    assert res.phases["first-eviction"] > 0 and res.phases["chunk>W"] > 0


def test_broken_ring_is_caught_and_shrunk(tmp_path):
    target = CacheTarget("broken-ring", ReadsFromSlotZero)
    res = campaign.fuzz_target(target, CampaignConfig(seconds=60, max_examples=500, campaign_seed=1,
                                                      seeds_dir=str(tmp_path)))
    assert res.failures and "positions" in res.failures[0].error
    stored = seeds.load_seed(res.failures[0].seed_path)
    # Shrunk: the minimal trigger is a first eviction, W + 1 pushes of W = 1, or one chunk.
    assert len(stored.case.ops) <= 2
    assert stored.found["target"] == "broken-ring"
    assert json.loads(Path(res.failures[0].seed_path).read_text())["id"] == stored.id


def test_cli_fuzz_exit_codes(tmp_path, capsys):
    assert main(["fuzz", "--target", "pyring", "--time", "2", "--seed", "0"]) == 0
    assert main(["fuzz", "--target", "no-such-target", "--time", "1"]) == 2
    assert "unknown target" in capsys.readouterr().err


def test_cli_fuzz_py_target_exits_1_on_bug(tmp_path, monkeypatch):
    monkeypatch.setenv("KVWINDOW_SEEDS", str(tmp_path))  # the CLI's default seeds directory (seeds.default_seeds_dir)
    rc = main(["fuzz", "--target", BUGGY, "--time", "20", "--seed", "0"])
    assert rc == 1
    assert list(tmp_path.glob("*.json"))
