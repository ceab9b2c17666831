"""Issue 28: windows at production scale, the scale tours, threaded cases and the mutants only those sizes show."""

import random

import pytest
from hypothesis import HealthCheck, given, seed, settings

from fuzz.config import CampaignConfig
from fuzz.ops import Case, Instance, OpError
from fuzz.strategies import (FLOAT_BUDGET, LARGE_CASE_WINDOWS, SCALE_TOUR_WINDOWS, SMALL_WINDOW, WINDOW_MAX, cases,
                             draw_window, large_windows, scale_tour, scale_tours, windows)
from fuzz.targets.mutants import mutant_target
from impl.errors import Unavailable
from impl.mutants.catalogue import select


def _draw(strategy, n=600):
    got = []

    @seed(7)
    @settings(max_examples=n, database=None, suppress_health_check=list(HealthCheck), deadline=None)
    @given(strategy)
    def t(x):
        got.append(x)

    t()
    return got


def test_the_default_window_max_reaches_the_uint16_edge_and_small_windows_stay_most_frequent():
    assert WINDOW_MAX == CampaignConfig().window_max == 65_537
    assert large_windows(WINDOW_MAX)[:3] == (31, 32, 33) and large_windows(WINDOW_MAX)[-3:] == (65535, 65536, 65537)
    from hypothesis import strategies as st

    ws = [w for w, _ in _draw(st.tuples(windows(WINDOW_MAX), st.integers(0, 10**9)), 1500)]
    large = [w for w in ws if w > SMALL_WINDOW]
    assert 0.03 < len(large) / len(ws) < 0.25, len(large) / len(ws)  # ~8 %: a window of 1..16 most often
    assert any(w in (31, 32, 33) for w in large) and any(w > 256 for w in large)
    rng = random.Random(1)
    drawn = [draw_window(rng, WINDOW_MAX) for _ in range(4000)]
    assert max(drawn) > 1000 and sum(w > SMALL_WINDOW for w in drawn) / len(drawn) < 0.25
    assert all(1 <= draw_window(rng, 16) <= 16 for _ in range(200))  # --window-max 16: the old mix


def test_a_large_window_case_is_capped_in_tokens_and_in_floats():
    for c in _draw(cases(WINDOW_MAX, drawn_width=True, dtypes=("float32",)), 800):
        widest = c.widest_window()
        width = c.width or 4
        assert widest <= max(SMALL_WINDOW, FLOAT_BUDGET // width), (widest, width)
        if widest > SMALL_WINDOW:
            assert c.tokens <= LARGE_CASE_WINDOWS * widest, c


def test_scale_tours_cross_every_edge_at_its_window_by_chunks():
    assert [c.window for c in scale_tours()] == list(SCALE_TOUR_WINDOWS) and SCALE_TOUR_WINDOWS[-1] == 65_537
    assert [c.window for c in scale_tours(1024)] == [33, 63, 128, 257, 511, 1024]
    t = scale_tour(4097)
    assert len(t.ops) == 10 and t.tokens <= 7 * 4097
    assert scale_tours(WINDOW_MAX, max_tokens=500) == [scale_tour(33), scale_tour(63)]


def test_a_threaded_case_records_its_thread_count_and_round_trips():
    c = Case.parse(4, "@0 chunk:3 @1 chunk:4", instances=[Instance(4)]).replace(threads=True)
    doc = c.to_json()
    assert doc["threads"] == 2 and Case.from_json(doc) == c and "threads=2" in str(c)
    with pytest.raises(OpError, match="threads"):
        Case.from_json({**doc, "threads": 3})
    with pytest.raises(OpError, match="threads"):
        Case(4, (), threads=True)  # one instance: nothing to race


def _target(name):
    (m,) = select([name])
    try:
        return mutant_target(m)
    except Unavailable as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("name,passes,fails", [
    ("ring-head-uint8", [scale_tour(128), scale_tour(256), Case.parse(256, "chunk:255 push push chunk:800")],
     [scale_tour(257)]),
    ("c-long-chunk-slot-from-chunk", [scale_tour(511), Case.parse(1023, "push chunk:1023 chunk:3000")],
     [scale_tour(1024)]),
])
def test_a_size_mutant_is_right_below_its_size_and_wrong_at_it(name, passes, fails):
    t = _target(name)
    for c in passes:
        t.run(c)
    for c in fails:
        with pytest.raises(AssertionError):
            t.run(c)


def test_threads_run_each_instance_in_its_own_thread_and_the_real_ring_passes():
    from fuzz.targets import registry

    ok = registry.resolve("ring-c")
    assert ok.thread_safe
    c = Case.parse(64, " ".join(f"@{k} chunk:{40 + k}" for _ in range(6) for k in range(4)), width=64,
                   instances=[Instance(64)] * 3).replace(threads=True)
    for _ in range(5):
        ok.run(c)


def test_a_static_scratch_buffer_shows_when_threads_push_at_once_and_is_confirmed_by_repetition():
    from fuzz.phases.threads import confirm

    t = _target("c-static-scratch")
    c = Case.parse(1024, " ".join(f"@{k} chunk:1000" for _ in range(8) for k in range(2)), width=256,
                   instances=[Instance(1024)])
    for _ in range(3):
        t.run(c)  # the same two handles interleaved in one thread: right
    failed, runs = confirm(t, c.replace(threads=True), runs=60)
    assert failed >= 1 and runs == 60  # a race: found by repetition, not every run


def test_the_threads_phase_applies_only_where_independence_across_threads_is_promised():
    from fuzz.campaign import fuzz_target
    from fuzz.targets.cache import make_py_class

    res = fuzz_target(make_py_class("fuzz.targets.pyring:PyRing"), CampaignConfig(seconds=2, campaign_seed=1,
                                                                                   save_seeds=False))
    rec = res.phases_run["threads"]
    assert rec["status"] == "n/a" and "thread_safe = True" in rec["why"]


def test_a_leak_that_grows_with_resets_is_a_finding_and_a_clean_ring_is_not():
    from fuzz.phases.leaks import POINTS, probe, verdict

    clean = probe(_target("ring-reset-keeps-window"))  # a wrong ring, but it leaks nothing
    assert verdict(clean) is None, clean
    leaky = probe(_target("ring-reset-leaks"))
    kind, per = verdict(leaky)
    assert kind == "reset" and per >= 64 * 4 * 4, leaky  # a copy of W x width floats kept per reset
    a, b, c = leaky["probes"]["reset"]
    assert c - b >= (POINTS[2] - POINTS[1]) * 64 * 4 * 4


def test_the_leak_phase_saves_a_leak_seed_for_a_c_library(tmp_path):
    from fuzz.campaign import fuzz_target
    from fuzz.seeds import load_seed

    res = fuzz_target(_target("c-reset-leaks"), CampaignConfig(seconds=12, campaign_seed=1, seeds_dir=str(tmp_path),
                                                               isolate=False))
    assert len(res.failures) == 1, res.phases_run["leaks"]
    (f,) = res.failures
    assert f.kind == "leak" and "mallinfo2 heap grew" in f.error, f.error
    seed = load_seed(f.seed_path)
    assert seed.found["kind"] == "leak" and seed.case.ops[0].window == 64


def test_the_c_pool_holds_pages_of_257_and_64_live_sequences():
    """csrc/pagedkv.c at production scale: every paged scale tour (a page of 257, 64 live sequences in a pool
    for half their worst case, windows over 4-16 pages, windows of 4096 and 4097) against the paged oracle."""
    from fuzz.paged.strategies import MANY_LIVE, scale_tours
    from fuzz.targets import registry

    t = registry.resolve("paged-c")
    tours = scale_tours()
    assert max(c.window for c in tours) == 4097 and any(c.window == 4096 and c.block_size == 16 for c in tours)
    assert max(c.block_size for c in tours) == 257 and any(len({o.seq for o in c.ops if hasattr(o, "seq")}) ==
                                                           MANY_LIVE for c in tours)
    for c in tours:
        t.run(c)


@pytest.mark.parametrize("name", ["paged-offset-4-bits", "paged-four-lanes"])
def test_a_paged_size_mutant_passes_every_small_tour_and_fails_a_scale_tour(name):
    from fuzz.paged.strategies import scale_tours, tours

    t = _target(name)
    for c in tours(("fork", "admit"), width=4):
        t.run(c)  # blocks of 1-16, at most 6 sequences of which at most 4 live at once: right
    for c in scale_tours():  # in the campaign's order: the first that fails ends the test
        try:
            t.run(c)
        except AssertionError:
            return
    pytest.fail(f"{name} passed every scale tour")
