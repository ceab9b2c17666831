"""Long streams and the rest of the C ABI: the long tour crosses 2**15, 2**16 and 70 000 with
every crossing pushed and checked; the bulk phase checks at least 100 k tokens of every C campaign
through ringkv_trace (one stream past 2**16), and a trace failure comes back as an ordinary op list
that replays on every target; ringkv_checksum is checked against the spec after every op."""

from __future__ import annotations

import random
import shutil

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fuzz.campaign import fuzz_target
from fuzz.config import CampaignConfig
from fuzz.ops import Case, Chunk, Push
from fuzz.oracle import SpecStream
from fuzz.replay import replay_seed
from fuzz.seeds import Seed
from fuzz.strategies import LONG_CROSSINGS, boundary_tours, cases, long_tour
from fuzz.targets import registry
from fuzz.targets import ring_bulk as bulk
from fuzz.targets.base import Mismatch
from fuzz.targets.mutants import make_mutant
from fuzz.targets.ring import CRingTarget
from impl.ring import CRing, load_library
from pyspec.bulk import window_positions, window_rows

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler: cannot build broken copies of the ring")


def test_the_long_tour_pushes_across_each_crossing():
    case = long_tour(16)
    assert case.window == 3 and case.tokens > 70_000
    n, pushed = 0, set()
    for op in case.ops:
        if isinstance(op, Push):
            pushed.add(n)
        n += op.tokens
    for cross in LONG_CROSSINGS:  # the positions on both sides of each crossing arrive one push at a time
        assert {cross - 1, cross} <= pushed
    assert long_tour(16) in boundary_tours(16) and long_tour(16) not in boundary_tours(16, max_tokens=64)


@pytest.mark.parametrize("name", ["pyring", "ring-c", "cuda-index"])
def test_targets_pass_the_long_tour(name):
    target, why = registry.probe(name)
    if target is None:
        pytest.skip(why)
    assert target.run(long_tour(16)).tokens == long_tour(16).tokens


def test_window_rows_are_rows_of_window_positions():
    for w in range(1, 7):
        for n in range(12):
            for a in range(n + 1):
                assert np.array_equal(window_rows(a, n - a, w), window_positions(n, w)[a:])
    with pytest.raises(ValueError, match="window must be an int >= 1"):
        window_rows(0, 3, 0)


@given(cases(window_max=12, max_tokens=200), st.integers(0, 3))
@settings(max_examples=60)
def test_spec_checksum_is_what_the_real_ring_stores(case, epoch_shift):
    """The prefix-sum checksum the op loop compares with ringkv_checksum, against the C ring itself."""
    ring = CRing(4)
    spec = SpecStream(case.window)
    ring.reset(case.window)
    for op in case.ops:
        if isinstance(op, Push):
            ring.push(*spec.next_entry())
        elif isinstance(op, Chunk):
            ring.push_arrays(*spec.new_entries(op.n))
        else:
            ring.reset(op.window)
        spec.apply(op)
        assert ring.checksum() == bulk.spec_checksum(spec)


def test_bulk_streams_reach_the_default_and_cross_the_boundaries():
    for seed in range(20):
        streams = bulk.bulk_streams(16, random.Random(seed))
        assert sum(n for _, n in streams) >= bulk.BULK_TOKENS
        w, n = streams[0]
        assert n > bulk.CROSS and 1 <= w <= 16
        assert all(1 <= w <= 16 for w, _ in streams)
        long = bulk.bulk_streams(16, random.Random(seed), long=True)
        assert long[:-1] == streams and long[-1][1] > bulk.LONG_CROSS


def test_every_c_campaign_runs_the_bulk_phase():
    res = fuzz_target(registry.resolve("ring-c"), CampaignConfig(seconds=30, max_examples=20, campaign_seed=5,
                                                                  save_seeds=False))
    assert not res.failures and res.bulk_tokens >= bulk.BULK_TOKENS and res.bulk_seconds > 0
    assert res.to_json()["bulk_tokens"] == res.bulk_tokens
    py = fuzz_target(registry.resolve("pyring"), CampaignConfig(seconds=30, max_examples=20, campaign_seed=5,
                                                                 save_seeds=False))
    assert py.bulk_tokens == 0  # no ringkv_trace: no bulk phase
    uniform = fuzz_target(registry.resolve("ring-c"), CampaignConfig(seconds=30, max_examples=20, campaign_seed=5,
                                                                      save_seeds=False, tester="uniform"))
    assert uniform.bulk_tokens == 0  # the naive baseline has none either


def test_the_isolated_ring_c_runs_the_bulk_phase_in_its_child_and_the_summary_says_so(tmp_path, capsys):
    from fuzz.cli import main
    from fuzz.targets.isolated import IsolatedTarget, resolve

    with resolve("ring-c") as t:
        assert isinstance(t, IsolatedTarget) and t.traced
        res = fuzz_target(t, CampaignConfig(seconds=30, max_examples=20, campaign_seed=5, save_seeds=False))
    assert not res.failures and res.bulk_tokens >= bulk.BULK_TOKENS and res.bulk_seconds > 0
    rc = main(["fuzz", "--target", "ring-c", "--time", "5", "--max-examples", "20", "--seed", "5", "--plain",
               "--seeds-dir", str(tmp_path / "s"), "--db", str(tmp_path / "db")])
    out = capsys.readouterr().out
    assert rc == 0 and f"bulk phase: ring-c: {res.bulk_tokens:,} tokens through ringkv_trace" in out, out


def test_the_long_tour_runs_only_when_the_target_can_end_it_within_the_budget(tmp_path):
    """The time budget holds (issue 13) and fast targets still cross 2**15, 2**16 and 70 000 (issue 14)."""
    from fuzz.campaign import LONG_TOUR_SKIPPED, slack
    from fuzz.targets.cache import CacheTarget
    from tests.support.crashers import SlowRing

    cfg = CampaignConfig(seconds=3, campaign_seed=1, save_seeds=False)
    slow = fuzz_target(CacheTarget("slow", SlowRing), cfg)
    assert not slow.failures and slow.seconds <= 3 + slack(3) + 1, slow.seconds
    (warning,) = [w for w in slow.warnings if w.startswith(LONG_TOUR_SKIPPED)]
    assert "-token probe took" in warning and slow.tokens < 70_001
    fast = fuzz_target(registry.resolve("pyring"), cfg)
    assert not fast.warnings and fast.tokens >= 70_001


def _available_targets():
    out = []
    for name in ("pyring", "ring-c", "cuda-index", "hf-dynamic", "hf-static", "decoder"):
        t, _ = registry.probe(name)
        if t is not None:
            out.append(t)
    return out


def test_a_trace_bug_is_found_by_the_bulk_phase_and_reduced_to_an_ordinary_seed():
    target = make_mutant("c-trace-int16-positions")
    phase = bulk.bulk_phase(target, CampaignConfig(), 0)
    assert isinstance(phase.error, Mismatch), phase.error
    assert "ringkv_trace: after the push of position 32768: window positions differ from spec lastWindow at " \
        "index 0" in str(phase.error) and "got [<-32768>], spec [<32768>]" in str(phase.error)
    case = phase.case
    assert case.window == 1 and case.tokens == 32769 and len(case.ops) <= 3, case  # the smallest window and step
    with pytest.raises(Mismatch):
        target.run(case)
    seed = Seed(case, {})
    for t in _available_targets():  # replays on every target that can take it, and they all pass
        if t.accepts(case) is None:
            assert replay_seed(seed, t) is None, t.name


def test_a_campaign_of_a_trace_bug_saves_the_reduced_seed(tmp_path):
    res = fuzz_target(make_mutant("c-trace-int16-positions"),
                      CampaignConfig(seconds=60, max_examples=300, campaign_seed=2, seeds_dir=str(tmp_path),
                                     stop_on_first=True))  # its first finding: the trace's rows and checksum are two
    (fail,) = res.failures
    assert "32768" in fail.error and fail.seed_path and fail.case.tokens <= 32769 + 3


@needs_cc
def test_a_checksum_bug_only_in_the_trace_is_caught_step_by_step(tmp_path):
    """The trace drops the evicted entry's hash one step late at W >= 4: positions and reads are right."""
    from impl._ring_build import compile_ring_library

    edit = ("    if (rkv_len(p, w) == w) {\n", "    if (rkv_len(p, w) == w && (w < 4 || p % 97 != 50)) {\n")
    target = CRingTarget("c:broken-trace", load_library(compile_ring_library(tmp_path / "lib.so", replace=edit)))
    target.run(Case.parse(3, "push push push push chunk:9 reset:5 push"))
    with pytest.raises(Mismatch, match="ringkv_trace: after the push of position \\d+ the checksum is"):
        target.run(Case(4, (Push(),) * 200))
    phase = bulk.bulk_phase(target, CampaignConfig(), 1)
    assert phase.error is not None and phase.case.window >= 4
    with pytest.raises(Mismatch):
        target.run(phase.case)


def test_the_int16_python_counter_dies_in_the_long_tour():
    target = make_mutant("ring-int16-position-counter")
    for tour in boundary_tours(16)[:-1]:
        target.run(tour)  # short streams cannot see it
    with pytest.raises(Mismatch, match="got \\[32766, 32767, <-32768>\\], spec \\[32766, 32767, <32768>\\]"):
        target.run(long_tour(16))


def test_bulk_counts_travel_with_a_result_and_add_up_across_workers():
    from fuzz.results import TargetResult, merge

    a = TargetResult("ring-c", bulk_tokens=100_000, bulk_seconds=0.5)
    b = TargetResult.from_json(TargetResult("ring-c", bulk_tokens=100_007, bulk_seconds=0.25,
                                            tolerances={"logits": {"atol": 1e-4}}).to_json())
    m = merge("ring-c", [a, b])
    assert (m.bulk_tokens, m.bulk_seconds, m.tolerances) == (200_007, 0.75, {"logits": {"atol": 1e-4}})
