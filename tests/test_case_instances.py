"""The op language's instance addresses and a case's payload dimensions: one text and one JSON form each,
round trips, the errors that name what is wrong, the ids of single-instance default-payload cases unchanged,
and the projections the reducer and the findings use."""

from __future__ import annotations

import json

import pytest

from fuzz.ops import At, Bad, Case, Chunk, Instance, OpError, Push, Reset, at, target_of
from fuzz.seeds import SEED_DIR, load_seed, parse_seed

CASE = Case.parse(3, "push @1 chunk:5 @0 push @2 reset:4 @2 bad:gap", width=64, dtype="float16",
                  instances=(Instance(5, 8), Instance(2)))


def test_text_and_json_round_trip():
    assert CASE.text == "@0 push @1 chunk:5 @0 push @2 reset:4 @2 bad:gap"
    assert str(CASE) == "window=3 width=64 dtype=float16 @1=5x8 @2=2 ops: " + CASE.text
    doc = CASE.to_json()
    assert doc == {"window": 3, "width": 64, "dtype": "float16", "instances": [{"window": 5, "width": 8}, {"window": 2}],
                   "ops": [["push"], ["@", 1, ["chunk", 5]], ["push"], ["@", 2, ["reset", 4]], ["@", 2, ["bad", "gap"]]]}
    assert Case.from_json(json.loads(json.dumps(doc))) == CASE
    assert Case.parse(3, CASE.text, width=64, dtype="float16", instances=CASE.instances) == CASE
    assert Case.parse(3, json.dumps(doc["ops"]), width=64, dtype="float16", instances=CASE.instances) == CASE


def test_instance_0_is_written_bare_so_old_cases_keep_their_form_and_id():
    assert at(0, Push()) == Push() and at(1, Push()) == At(1, Push()) and target_of(At(2, Chunk(3))) == (2, Chunk(3))
    old = Case(3, (Push(), Chunk(5)))
    assert old.to_json() == {"window": 3, "ops": [["push"], ["chunk", 5]]} and old.text == "push chunk:5"
    for path in sorted(SEED_DIR.glob("*.json")):  # every stored seed still loads and its id still matches
        assert load_seed(path).id == path.stem


@pytest.mark.parametrize("text, match", [
    ("@1 push", "addresses instance 1"),
    ("@9 push", "beyond the 4"),
    ("@1 @1 push", "an address is @K before one op"),
    ("push @1", "addresses no op"),
    ("@x push", "an address is @K"),
])
def test_bad_addresses_are_named(text, match):
    with pytest.raises(OpError, match=match):
        Case.parse(3, text)


@pytest.mark.parametrize("doc, match", [
    ({"window": 3, "ops": [["@", 0, ["push"]]]}, "written bare"),
    ({"window": 3, "ops": [["@", 1, ["@", 1, ["push"]]]]}, "one instance"),
    ({"window": 3, "instances": [{"window": 0}], "ops": []}, "window' must be an int >= 1"),
    ({"window": 3, "instances": {"window": 2}, "ops": []}, "'instances' must be a list"),
    ({"window": 3, "width": 0, "ops": []}, "'width' must be an int >= 1"),
    ({"window": 3, "dtype": "float64", "ops": []}, "'dtype' must be one of"),
])
def test_bad_json_is_named(doc, match):
    with pytest.raises(OpError, match=match):
        Case.from_json(doc)


def test_seed_bounds_cover_widths():
    with pytest.raises(Exception, match="payload width 5000 is beyond the bound"):
        parse_seed({"window": 2, "width": 5000, "ops": []})


def test_projections():
    assert CASE.instance_count == 3 and CASE.instance_width(1) == 8 and CASE.instance_width(2) == 64
    assert CASE.instance_case(2) == Case(2, (Reset(4), Bad("gap")), 64, "float16")
    dropped = CASE.without_instance(1)
    assert dropped.instances == (Instance(2),) and dropped.text == "@0 push @0 push @1 reset:4 @1 bad:gap"
    assert CASE.streams() == [(3, [(0, Push()), (2, Push())])]  # instance 0's, as the findings read them
    assert CASE.widest_window() == 5 and CASE.widest_payload() == 64 and CASE.tokens == 7
    assert CASE.bad_kinds() == {"gap"}
