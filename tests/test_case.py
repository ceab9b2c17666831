"""``fuzz.ops.Case``: one text form and one JSON form, each the inverse of its parser, and the seed id."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given

from fuzz.ops import Case, Chunk, OpError, Push, Reset
from fuzz.strategies import cases, uniform_cases


@given(cases(window_max=20))
def test_text_form_round_trips(case):
    assert Case.parse(case.window, case.text) == case


@given(uniform_cases(12))
def test_json_form_round_trips(case):
    assert Case.from_json(json.loads(json.dumps(case.to_json()))) == case


def test_the_forms():
    case = Case(3, (Push(), Chunk(5), Reset(2), Chunk(0)))
    assert case.text == "push chunk:5 reset:2 chunk:0"
    assert case.to_json() == {"window": 3, "ops": [["push"], ["chunk", 5], ["reset", 2], ["chunk", 0]]}
    assert str(case) == "window=3 ops: push chunk:5 reset:2 chunk:0"
    assert Case.parse(3, "push, chunk:5 reset:2 chunk:0") == case  # commas separate too
    assert Case.parse(3, '[["push"], ["chunk", 5], ["reset", 2], ["chunk", 0]]') == case
    assert str(Case(1)) == "window=1 ops: (none)"


def test_id_hashes_the_canonical_json_form():
    case = Case(4, (Chunk(5), Push()))
    canon = json.dumps({"ops": [["chunk", 5], ["push"]], "window": 4}, separators=(",", ":"))
    assert case.id == hashlib.sha256(canon.encode()).hexdigest()[:12]
    assert Case(4, [Chunk(5), Push()]).id == case.id  # a list of ops is the same case
    assert Case(5, (Chunk(5), Push())).id != case.id


@pytest.mark.parametrize("window, text, needle", [
    (3, "push jump", "op #1"), (3, "chunk:x", "op #0"), (3, "reset:0", "reset takes a window >= 1"),
    (0, "push", "'window' must be an int >= 1"), (3, "[1", "not valid JSON"),
])
def test_bad_text_is_named(window, text, needle):
    with pytest.raises(OpError, match=needle):
        Case.parse(window, text)


@pytest.mark.parametrize("doc, needle", [
    ([], "JSON object"), ({"window": 2}, "missing 'ops'"), ({"window": True, "ops": []}, "'window'"),
    ({"window": 2, "ops": [["chunk", -1]]}, "op #0"), ({"window": 2, "ops": "push"}, "ops must be a list"),
])
def test_bad_json_is_named(doc, needle):
    with pytest.raises(OpError, match=needle):
        Case.from_json(doc)


def test_streams_split_at_resets():
    case = Case.parse(3, "push chunk:2 reset:5 push reset:1")
    assert case.streams() == [(3, [(0, Push()), (1, Chunk(2))]), (5, [(3, Push())]), (1, [])]
    assert case.tokens == 4 and case.widest_window() == 5


@pytest.mark.parametrize("make, needle", [(lambda: Chunk(-1), "chunk takes a token count n >= 0, got -1"),
                                          (lambda: Chunk(True), "got True"),
                                          (lambda: Reset(0), "reset takes a window >= 1, got 0")])
def test_an_op_constructor_refuses_an_invalid_count(make, needle):
    """No code path (a reducer, a strategy, a hand-written case) can build an op the language lacks."""
    with pytest.raises(OpError, match=needle):
        make()


def test_the_tour_reducer_never_goes_below_chunk_0():
    """The boundary-tour reducer once turned ``chunk:0`` into ``chunk:-991`` (each ``n - 1`` candidate of
    a target that raises on anything, kept because it failed the same way). Every candidate it keeps
    now is a valid case: ``chunk:0`` has no smaller candidate."""
    from fuzz.campaign import reduce_failure
    from fuzz.targets.base import RunStats, Target

    class FailsOnAnyChunk(Target):
        name = "fails-on-any-chunk"

        def run(self, case):
            if any(isinstance(op, Chunk) for op in case.ops):
                raise RuntimeError("a chunk")
            return RunStats()

    best, stopped = reduce_failure(FailsOnAnyChunk(), Case(3, (Push(), Chunk(0), Push())), RuntimeError("a chunk"))
    assert stopped is None and best.case == Case(1, (Chunk(0),))
