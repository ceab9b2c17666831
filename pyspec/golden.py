"""The golden table (``tests/golden/spec_cases.json``): hand-picked cases every layer checks.

pyspec is tested against every case here; ``scripts/gen_goldens.py`` turns the
same table into ``lean/KVWindow/Goldens.lean`` ``#guard`` lines and, for the
index-math rows (``op`` a function of ``csrc/ringkv_index.h``), into the rows the
C test (``csrc/test_ringkv.c``) checks; ``tests/test_golden_index.py`` checks those
rows against the header compiled for the CPU (``impl._cudaindex``). Entries are
natural numbers (positions). Each case has an ``op`` naming the Lean definition
it exercises, that definition's arguments, and ``expect``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspec import index_ring, spec
from pyspec.ring import ring_run
from pyspec.spec import sink_run


class GoldenCaseError(ValueError):
    """A malformed golden case; the message names its index and what is wrong."""


# op -> (Lean expression head, argument names in Lean order); LIST_ARGS says which are lists
OPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "lastWindow": ("lastWindow", ("w", "hs")),
    "step": ("step", ("w", "c", "x")),
    "run": ("run", ("w", "hs")),
    "pushChunk": ("pushChunk", ("w", "c", "ys")),
    "ringRun": ("Ring.toList (Ring.run", ("w", "hs")),
    "sinkWindow": ("sinkWindow", ("s", "w", "hs")),
    "sinkRun": ("sinkRun", ("s", "w", "hs")),
    "positionsLastWindow": ("positionsLastWindow", ("w", "n")),
    "inWindow": ("inWindow", ("w", "t", "p")),
    # csrc/ringkv_index.h, mirrored by lean/KVWindow/IndexRing.lean and pyspec/index_ring.py
    "rkv_slot": ("rkv_slot", ("pos", "w")),
    "rkv_len": ("rkv_len", ("n", "w")),
    "rkv_oldest": ("rkv_oldest", ("n", "w")),
    "rkv_logical_slot": ("rkv_logical_slot", ("n", "w", "i")),
    "rkv_chunk_first_kept": ("rkv_chunk_first_kept", ("k", "w")),
    "rkv_in_window": ("rkv_in_window", ("w", "t", "p")),
    "rkv_chunk_kept": ("rkv_chunk_kept", ("k", "w")),
    "rkv_chunk_src": ("rkv_chunk_src", ("k", "w", "i")),
    "rkv_chunk_dst": ("rkv_chunk_dst", ("pos0", "k", "w", "i")),
    "rkv_slot_valid": ("rkv_slot_valid", ("n", "w", "s")),
    "rkv_slot_pos": ("rkv_slot_pos", ("n", "w", "s")),
    "rkv_split_range": ("rkv_split_range", ("len", "nsplit", "j")),
    "rkv_cache_row": ("rkv_cache_row", ("b", "l", "h", "s", "L", "hkv", "w")),
}
LIST_ARGS = {"hs", "c", "ys"}  #: arguments that are lists (the rest are naturals)
INDEX_OPS = frozenset(op for op in OPS if op.startswith("rkv_"))  #: the functions of ringkv_index.h
BOOL_OPS = frozenset({"inWindow", "rkv_in_window", "rkv_slot_valid"})  #: ops whose result is true/false
PAIR_OPS = frozenset({"rkv_split_range"})  #: ops whose result is a pair, written [lo, hi]
#: index ops the header only defines for w >= 1 (they divide by w or compare against it)
_NEEDS_W = frozenset(op for op in INDEX_OPS if "w" in OPS[op][1]) - {"rkv_in_window", "rkv_cache_row"}
_INT64_SAFE = 1 << 62  #: index-row values stay far from int64 overflow in C and CUDA


@dataclass(frozen=True)
class Case:
    index: int
    name: str
    op: str
    args: dict[str, Any]
    expect: Any


def _nat(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _parse(i: int, raw: Any) -> Case:
    if not isinstance(raw, dict):
        raise GoldenCaseError(f"golden case #{i}: expected an object, got {type(raw).__name__}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise GoldenCaseError(f"golden case #{i}: missing or empty 'name'")
    op = raw.get("op")
    if op not in OPS:
        raise GoldenCaseError(f"golden case #{i} ({name!r}): unknown op {op!r}; known: {sorted(OPS)}")
    args = {}
    for a in OPS[op][1]:
        if a not in raw:
            raise GoldenCaseError(f"golden case #{i} ({name!r}): op {op!r} needs argument {a!r}")
        v = raw[a]
        ok = isinstance(v, list) and all(_nat(x) for x in v) if a in LIST_ARGS else _nat(v)
        if not ok:
            kind = "a list of naturals" if a in LIST_ARGS else "a natural number"
            raise GoldenCaseError(f"golden case #{i} ({name!r}): {a!r} must be {kind}, got {v!r}")
        args[a] = v
    if "expect" not in raw:
        raise GoldenCaseError(f"golden case #{i} ({name!r}): missing 'expect'")
    expect = raw["expect"]
    if op in BOOL_OPS:
        if not isinstance(expect, bool):
            raise GoldenCaseError(f"golden case #{i} ({name!r}): 'expect' must be true/false, got {expect!r}")
    elif op in PAIR_OPS:
        if not (isinstance(expect, list) and len(expect) == 2 and all(_nat(x) for x in expect)):
            raise GoldenCaseError(f"golden case #{i} ({name!r}): 'expect' must be [lo, hi], got {expect!r}")
    elif op in INDEX_OPS:
        if not _nat(expect):
            raise GoldenCaseError(f"golden case #{i} ({name!r}): 'expect' must be a natural number, got {expect!r}")
    elif not (isinstance(expect, list) and all(_nat(x) for x in expect)):
        raise GoldenCaseError(f"golden case #{i} ({name!r}): 'expect' must be a list of naturals, got {expect!r}")
    if op == "ringRun" and args["w"] < 1:
        raise GoldenCaseError(f"golden case #{i} ({name!r}): a ring needs w >= 1, got {args['w']}")
    if op in INDEX_OPS:
        _check_index_preconditions(i, name, op, args)
    extra = set(raw) - {"name", "op", "expect", "why"} - set(OPS[op][1])
    if extra:
        raise GoldenCaseError(f"golden case #{i} ({name!r}): unknown keys {sorted(extra)}")
    return Case(i, name, op, args, expect)


def _check_index_preconditions(i: int, name: str, op: str, args: dict[str, Any]) -> None:
    """An index row is evaluated by the C header too, so it must meet the header's preconditions."""
    if op in _NEEDS_W and args["w"] < 1:
        raise GoldenCaseError(f"golden case #{i} ({name!r}): {op} needs w >= 1 (the C header divides "
                              f"by or compares against w), got w = {args['w']}")
    if op == "rkv_split_range" and args["nsplit"] < 1:
        raise GoldenCaseError(f"golden case #{i} ({name!r}): rkv_split_range needs nsplit >= 1, "
                              f"got {args['nsplit']}")
    big = [a for a, v in args.items() if v >= _INT64_SAFE]
    if big or (op == "rkv_cache_row"
               and index_ring.rkv_cache_row(*(args[a] for a in OPS[op][1])) >= _INT64_SAFE):
        raise GoldenCaseError(f"golden case #{i} ({name!r}): values must stay below 2**62 so the C and "
                              f"CUDA int64 arithmetic cannot overflow ({big or 'the row'})")


def index_cases(cases: list[Case]) -> list[Case]:
    """The rows for ``csrc/ringkv_index.h`` (checked by Lean, pyspec, the C test and ``impl._cudaindex``)."""
    return [c for c in cases if c.op in INDEX_OPS]


def load_cases(path: str | Path) -> list[Case]:
    """Parse and validate the table; a malformed case raises :class:`GoldenCaseError` with its index."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise GoldenCaseError(f"{path}: not valid JSON: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
        raise GoldenCaseError(f"{path}: expected an object with a 'cases' list")
    return [_parse(i, raw) for i, raw in enumerate(doc["cases"])]


def evaluate(case: Case) -> Any:
    """What pyspec computes for the case (compare with ``case.expect``)."""
    a = case.args
    return {
        "lastWindow": lambda: spec.last_window(a.get("w"), a.get("hs")),
        "step": lambda: spec.step(a.get("w"), a.get("c"), a.get("x")),
        "run": lambda: spec.run(a.get("w"), a.get("hs")),
        "pushChunk": lambda: spec.push_chunk(a.get("w"), a.get("c"), a.get("ys")),
        "ringRun": lambda: ring_run(a.get("w"), a.get("hs")).to_list(),
        "sinkWindow": lambda: spec.sink_window(a.get("s"), a.get("w"), a.get("hs")),
        "sinkRun": lambda: sink_run(a.get("s"), a.get("w"), a.get("hs")),
        "positionsLastWindow": lambda: spec.positions_last_window(a.get("w"), a.get("n")),
        "inWindow": lambda: spec.in_window(a.get("w"), a.get("t"), a.get("p")),
    }.get(case.op, lambda: _evaluate_index(case))()


def _evaluate_index(case: Case) -> Any:
    """An index op: the pyspec mirror of the header function of the same name."""
    got = getattr(index_ring, case.op)(*(case.args[a] for a in OPS[case.op][1]))
    return list(got) if isinstance(got, tuple) else got  # rkv_split_range: (lo, hi) as [lo, hi]
