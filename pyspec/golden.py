"""The golden table (``tests/golden/spec_cases.json``): hand-picked cases both halves check.

pyspec is tested against every case here; ``scripts/gen_goldens.py`` turns the
same table into ``lean/KVWindow/Goldens.lean`` ``#guard`` lines. Entries are
natural numbers (positions). Each case has an ``op`` naming the Lean
definition it exercises, that definition's arguments, and ``expect``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspec import spec
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
}
LIST_ARGS = {"hs", "c", "ys"}  #: arguments that are lists (the rest are naturals)


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
    if op == "inWindow":
        if not isinstance(expect, bool):
            raise GoldenCaseError(f"golden case #{i} ({name!r}): 'expect' must be true/false, got {expect!r}")
    elif not (isinstance(expect, list) and all(_nat(x) for x in expect)):
        raise GoldenCaseError(f"golden case #{i} ({name!r}): 'expect' must be a list of naturals, got {expect!r}")
    if op == "ringRun" and args["w"] < 1:
        raise GoldenCaseError(f"golden case #{i} ({name!r}): a ring needs w >= 1, got {args['w']}")
    extra = set(raw) - {"name", "op", "expect", "why"} - set(OPS[op][1])
    if extra:
        raise GoldenCaseError(f"golden case #{i} ({name!r}): unknown keys {sorted(extra)}")
    return Case(i, name, op, args, expect)


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
    }[case.op]()
