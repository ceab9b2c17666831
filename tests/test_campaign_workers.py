"""--workers N: real parallel processes sharing one example database (a directory, or Redis)."""

import json
import os
import time

import pytest

from fuzz.cli import main
from fuzz.targets import registry
from fuzz.strategies import boundary_tours
from tests.support.caches import BUGGY, GAP_BUGGY
from tests.support.redis_server import free_port, redis_server


def test_workers_run_in_parallel_and_merge(tmp_path, capsys):
    rep = tmp_path / "r.json"
    t0 = time.monotonic()
    rc = main(["fuzz", "--target", "pyring", "--time", "4", "--workers", "2", "--seed", "5",
               "--db", str(tmp_path / "db"), "--report", str(rep), "--seeds-dir", str(tmp_path / "s")])
    wall = time.monotonic() - t0
    assert rc == 0, capsys.readouterr()
    doc = json.loads(rep.read_text())
    pids = doc["worker_pids"]
    assert len(pids) == 2 and len(set(pids)) == 2 and os.getpid() not in pids
    (t,) = doc["targets"]
    assert t["workers"] == 2 and t["examples"] > 0
    assert wall < 2 * 4 + 20  # two 4 s workers ran side by side, not one after the other


def test_workers_dedupe_a_shared_bug(tmp_path, capsys):
    sd = tmp_path / "s"
    rc = main(["fuzz", "--target", BUGGY, "--time", "30", "--workers", "2", "--seed", "0",
               "--db", str(tmp_path / "db"), "--seeds-dir", str(sd), "--report", str(tmp_path / "r.json")])
    assert rc == 1
    doc = json.loads((tmp_path / "r.json").read_text())
    files = list(sd.glob("*.json"))
    assert files and len(files) == len({f["seed_id"] for f in doc["failures"]})


@pytest.fixture
def redis_url(tmp_path):
    with redis_server(tmp_path) as (url, _):
        yield url


def test_redis_database_is_shared(redis_url, tmp_path, capsys):
    import redis

    sd = tmp_path / "s"
    rc = main(["fuzz", "--target", GAP_BUGGY, "--time", "30", "--workers", "2", "--seed", "0",
               "--db", redis_url, "--seeds-dir", str(sd)])
    assert rc == 1
    keys = redis.Redis.from_url(redis_url).keys("hypothesis-example:*")
    assert keys, "nothing was stored in Redis"
    # A fresh campaign (another machine, say) replays the stored failure right after the tours.
    rep = tmp_path / "r.json"
    rc = main(["fuzz", "--target", GAP_BUGGY, "--time", "30", "--seed", "99", "--db", redis_url,
               "--seeds-dir", str(sd), "--report", str(rep)])
    assert rc == 1
    # Its one-off phases (window and instance tours, its error tour, the long tour and its probe, the scale
    # tours, the leak probe) run first; the stored failure is the very next example.
    (t,) = json.loads(rep.read_text())["targets"]
    explicit = sum(t["campaign_phases"][p]["examples"] for p in ("tours", "errors", "long", "scale", "leaks")
                   if p in t["campaign_phases"])
    target = registry.resolve(GAP_BUGGY)
    assert explicit >= len(boundary_tours(16, target.max_tokens, target.bad_kinds))
    assert t["examples_to_fail"] <= explicit + 1  # at the latest the first example after them: the stored one


def test_unreachable_redis_is_a_usage_error(capsys):
    pytest.importorskip("redis")
    rc = main(["fuzz", "--target", "pyring", "--time", "1", "--db", f"redis://127.0.0.1:{free_port()}/0"])
    assert rc == 2 and "cannot reach Redis" in capsys.readouterr().err
