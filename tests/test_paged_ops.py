"""The paged op language: one text and one JSON form per op, ids as content hashes, every malformed or
ill-formed case refused with the op named, reduction candidates that stay well formed."""

from __future__ import annotations

import json

import pytest

from fuzz.ops import Case
from fuzz.paged.ops import (Add, Admit, Batch, Chunk, Fork, Free, PagedCase, PagedOpError, Preempt, Push, Spec,
                            case_from_json, is_paged)

TEXT = "+s0 s0 chunk:5 fork:s0>s1 s1 push batch:s0,s1 free:s0 admit:s2<s1:4 spec:s1:3-1 preempt:s1 admit:s3<s2:2#1"
CFG = dict(window=3, block_size=2, num_blocks=8, width=4)


def test_text_and_json_round_trip():
    c = PagedCase.parse(TEXT, **CFG)
    assert c.ops == (Add(0), Chunk(0, 5), Fork(0, 1), Push(1), Batch((0, 1)), Free(0), Admit(2, 1, 4),
                     Spec(1, 3, 1), Preempt(1), Admit(3, 2, 2, 1))
    assert c.text == TEXT
    doc = json.loads(json.dumps(c.to_json()))
    assert set(doc) == {"paged"} and doc["paged"]["ops"][1] == ["chunk", 0, 5]
    assert PagedCase.from_json(doc) == c == case_from_json(doc)
    assert PagedCase.parse(json.dumps(doc["paged"]["ops"]), **CFG) == c
    assert c.id == PagedCase.from_json(doc).id and len(c.id) == 12
    assert c.replace(num_blocks=9).id != c.id
    assert str(c).startswith("paged W=3 B=2 N=8 D=4 ops: +s0")


def test_tokens_and_needs():
    c = PagedCase.parse(TEXT, **CFG)
    # chunk 5, push, batch 2, admit 4, spec 3, preempt (s1 has 5 + 1 + 1 + 3 - 1 = 9), admit 2
    assert c.fed == (0, 5, 0, 1, 2, 0, 4, 3, 9, 2) and c.tokens == 26
    assert c.needs() == {"fork", "admit", "rollback"}
    assert PagedCase.parse("+s0 s0 push batch:s0", **CFG).needs() == set()


@pytest.mark.parametrize("text, needle", [
    ("s0 push", "op #0 (s0 push): s0 is not live"),
    ("+s0 +s0", "op #1 (+s0): s0 is live already"),
    ("+s0 admit:s1<s0:1", "s0 has 0 entries, fewer than the prompt's 1"),
    ("+s0 s0 chunk:2 spec:s0:1-2", "0 <= r <= k"),
    ("fork:s0>s0", "forks a sequence into itself"),
    ("+s0 s0 pull", "must be followed by push or chunk:K"),
    ("+s0 batch:s0,s0", "names a sequence twice"),
    ("+s0 free:s0 free:s0", "op #2 (free:s0): s0 is not live"),
    ("+s99", "an id 0 .. 63"),
    ("+s0 admit:s1<s0:0", "L >= 1"),
    ("hello", "cannot parse 'hello'"),
])
def test_bad_text_is_refused_naming_the_op(text, needle):
    with pytest.raises(PagedOpError, match="op #"):
        PagedCase.parse(text, **CFG)
    with pytest.raises(PagedOpError) as e:
        PagedCase.parse(text, **CFG)
    assert needle in str(e.value)


@pytest.mark.parametrize("doc, needle", [
    ({"paged": {"window": 0, "block_size": 1, "num_blocks": 1, "width": 1, "ops": []}}, "'window'"),
    ({"paged": {"window": 1, "block_size": 1, "num_blocks": 1, "ops": []}}, "missing width"),
    ({"paged": {"window": 1, "block_size": 1, "num_blocks": 1, "width": 1, "ops": [], "x": 1}}, "unknown x"),
    ({"paged": {"window": 1, "block_size": 1, "num_blocks": 1, "width": 1, "ops": [["jump", 0]]}}, "unknown paged op"),
    ({"paged": {"window": 1, "block_size": 1, "num_blocks": 1, "width": 1, "ops": [["add"]]}}, "malformed"),
    ({"paged": {"window": 1, "block_size": 1, "num_blocks": 1, "width": 1, "ops": [["batch", 0]]}}, "list"),
    ({"paged": {"window": 1, "block_size": True, "num_blocks": 1, "width": 1, "ops": []}}, "'block_size'"),
])
def test_bad_json_is_refused(doc, needle):
    with pytest.raises(PagedOpError) as e:
        case_from_json(doc)
    assert needle in str(e.value)


def test_dispatch_between_the_two_kinds():
    ring = Case.parse(3, "push chunk:4")
    assert not is_paged(ring) and case_from_json(ring.to_json()) == ring
    paged = PagedCase.parse("+s0 s0 push", **CFG)
    assert is_paged(paged) and is_paged(case_from_json(paged.to_json()))


def test_candidates_are_smaller_and_well_formed():
    c = PagedCase.parse(TEXT, **CFG)
    cands = list(c.candidates())
    assert cands and all(isinstance(d, PagedCase) for d in cands)
    assert all(len(d.ops) < len(c.ops) or d.tokens < c.tokens or d.num_blocks < c.num_blocks or d.window < c.window
               or d.block_size < c.block_size or d.width < c.width or d != c for d in cands)
    # a sequence's whole life can go in one step (add ... free), which dropping single ops never gives
    life = PagedCase.parse("+s0 s0 chunk:3 admit:s1<s0:2 s1 push free:s1 s0 push", **CFG)
    assert PagedCase.parse("+s0 s0 chunk:3 s0 push", **CFG) in list(life.candidates())


def test_histories_cut_into_segments_differently_agree_where_their_lineages_do():
    """A regression: a chunk of 0 left an empty segment, and two prompts of one source then looked different
    to the sharing audit (a false mismatch on paged-c, seed ef3023a461ca)."""
    from fuzz.paged.oracle import clip, common_prefix

    assert common_prefix([(2, 0, 10)], [(1, 0, 0), (2, 0, 8)]) == 8
    assert common_prefix([(2, 0, 4), (2, 4, 10)], [(2, 0, 10)]) == 10
    assert common_prefix([(2, 0, 4), (3, 4, 10)], [(2, 0, 10)]) == 4
    assert clip([(1, 0, 0), (2, 0, 8)], 8) == clip([(2, 0, 8)], 8)
