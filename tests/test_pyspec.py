"""pyspec basics: bad input, the bulk mirror against the list mirror, the golden table."""

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st

import pyspec
from pyspec import bulk, index_ring
from pyspec.golden import INDEX_OPS, GoldenCaseError, evaluate, load_cases

GOLDEN = Path(__file__).parent / "golden" / "spec_cases.json"


@pytest.mark.parametrize("fn", [
    lambda: pyspec.last_window(-1, [1, 2]),
    lambda: pyspec.step(-3, [], 1),
    lambda: pyspec.run(-1, [1]),
    lambda: pyspec.push_chunk(-2, [], [1]),
    lambda: pyspec.Ring.empty(0),
    lambda: pyspec.Ring.empty(-5),
])
def test_negative_window_raises_value_error_naming_the_value(fn):
    with pytest.raises(ValueError, match=r"-?\d"):
        fn()


def test_window_error_message_names_value():
    with pytest.raises(ValueError, match="-7"):
        pyspec.last_window(-7, [])
    with pytest.raises(TypeError, match="2.5"):
        pyspec.step(2.5, [], 0)


def test_golden_table_pyspec_agrees_with_every_case():
    cases = load_cases(GOLDEN)
    assert len(cases) >= 20
    ops = {c.op for c in cases}
    assert {"lastWindow", "run", "step", "pushChunk", "ringRun", "sinkWindow", "inWindow"} <= ops
    assert INDEX_OPS <= ops, f"no golden row for {sorted(INDEX_OPS - ops)}"
    for c in cases:
        assert evaluate(c) == c.expect, f"golden case #{c.index} {c.name!r}"


def test_golden_evaluation_fails_on_a_wrong_index_row():
    case = next(c for c in load_cases(GOLDEN) if c.op == "rkv_slot_pos")
    assert evaluate(dataclasses.replace(case, args={**case.args, "s": case.args["s"] + 1})) != case.expect


@pytest.mark.parametrize("fn, arg", [
    (lambda: index_ring.rkv_slot(-1, 3), "-1"),
    (lambda: index_ring.rkv_len(2, -4), "-4"),
    (lambda: index_ring.rkv_split_range(3, 2, -1), "-1"),
    (lambda: index_ring.rkv_cache_row(0, 0, 0, 0, 1, 1, 2.5), "2.5"),
])
def test_index_ring_rejects_what_nat_cannot_hold(fn, arg):
    with pytest.raises((TypeError, ValueError), match=re.escape(arg)):
        fn()


@pytest.mark.parametrize("bad, msg", [
    ({"name": "x", "op": "lastWindow", "w": -1, "hs": [], "expect": []}, r"#1 .*'w' must be a natural"),
    ({"name": "x", "op": "nope", "expect": []}, r"#1 .*unknown op"),
    ({"name": "x", "op": "run", "w": 2, "expect": []}, r"#1 .*needs argument 'hs'"),
    ({"op": "run", "w": 2, "hs": [], "expect": []}, r"#1: missing or empty 'name'"),
    ({"name": "x", "op": "run", "w": 2, "hs": [], "expect": [1.5]}, r"#1 .*'expect'"),
    ({"name": "x", "op": "rkv_slot", "pos": 3, "w": 0, "expect": 3}, r"#1 .*rkv_slot needs w >= 1"),
    ({"name": "x", "op": "rkv_split_range", "len": 3, "nsplit": 0, "j": 0, "expect": [0, 0]},
     r"#1 .*nsplit >= 1"),
    ({"name": "x", "op": "rkv_split_range", "len": 3, "nsplit": 1, "j": 0, "expect": 3}, r"#1 .*\[lo, hi\]"),
    ({"name": "x", "op": "rkv_slot_valid", "n": 3, "w": 2, "s": 0, "expect": 1}, r"#1 .*true/false"),
    ({"name": "x", "op": "rkv_len", "n": 2, "w": 3, "expect": [2]}, r"#1 .*natural number"),
    ({"name": "x", "op": "rkv_len", "n": 2 ** 62, "w": 3, "expect": 3}, r"#1 .*2\*\*62"),
    ({"name": "x", "op": "rkv_cache_row", "b": 2 ** 31, "l": 0, "h": 0, "s": 0, "L": 2 ** 31, "hkv": 2,
      "w": 2, "expect": 0}, r"#1 .*2\*\*62"),
])
def test_golden_loader_reports_malformed_case_with_index(tmp_path, bad, msg):
    good = {"name": "ok", "op": "run", "w": 1, "hs": [0], "expect": [0]}
    p = tmp_path / "cases.json"
    p.write_text(json.dumps({"cases": [good, bad]}))
    with pytest.raises(GoldenCaseError, match=msg):
        load_cases(p)


def test_golden_loader_rejects_invalid_json(tmp_path):
    p = tmp_path / "cases.json"
    p.write_text('{"cases": [')
    with pytest.raises(GoldenCaseError, match="not valid JSON"):
        load_cases(p)


@given(st.integers(0, 200), st.integers(1, 40))
def test_bulk_mirror_matches_list_mirror(n, w):
    rows = bulk.window_positions(n, w)
    assert rows.shape == (n, w)
    cache: list[int] = []
    for t in range(n):
        cache = pyspec.step(w, cache, t)
        row = rows[t]
        assert row[: len(cache)].tolist() == cache
        assert (row[len(cache):] == bulk.PAD).all()
        assert bulk.window_lengths(n, w)[t] == len(cache)


def test_bulk_mirror_detects_a_wrong_row():
    """The comparison above can fail: an off-by-one window disagrees with the list mirror."""
    rows = bulk.window_positions(10, 3)
    wrong = bulk.window_positions(10, 4)
    assert not np.array_equal(rows[:, :3], wrong[:, :3])


def test_bulk_rejects_bad_window():
    with pytest.raises(ValueError, match="0"):
        bulk.window_positions(5, 0)
