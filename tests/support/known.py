"""A stand-in Hugging Face target with a bug written up as a known finding, for the known-finding tests
(no transformers needed): the machinery of :class:`fuzz.targets.hf.base.HFTarget` on a release and a
finding of its own (:data:`FINDING`, added to the table with ``monkeypatch``).

* bug A (the known finding): a stream with window 2 fails at the op that brings it to 3 tokens;
* bug B (not written up, ``chunk5=True``): any ``chunk:5`` fails.

``FINDING`` hits every case with a window-2 stream, so a window-2 stream shorter than 3 tokens is a
case that hits it and passes (not reproduced), and a ``chunk:5`` before the window-2 stream is a
failure it does not explain.
"""

from __future__ import annotations

from fuzz.ops import Case, Chunk
from fuzz.targets.base import Mismatch, RunStats
from fuzz.targets.hf.base import HFTarget, case_stats
from fuzz.targets.hf.findings import Finding

RELEASE = "9.9.1"
FINDING = Finding("fake-window-2", frozenset({"fake"}), ("9.9",), (RELEASE,),
                  lambda case: any(w == 2 for w, _ in case.streams()))


class Info:
    transformers = RELEASE

    def versions(self) -> dict[str, str]:
        return {"transformers": RELEASE}


class WindowTwoBug(HFTarget):
    finding_kind = "fake"

    def __init__(self, *, chunk5: bool = False, fixed: bool = False, strict: bool = False, name: str = "fake-known"):
        self.info, self.chunk5, self.fixed, self.strict, self.name = Info(), chunk5, fixed, strict, name
        self.ran: list[Case] = []

    def run_case(self, case: Case) -> RunStats:
        self.ran.append(case)
        w, n = case.window, 0
        for i, op in enumerate(case.ops):
            if op.tokens == 0 and not isinstance(op, Chunk):  # a reset
                w, n = op.window, 0
                continue
            if self.chunk5 and isinstance(op, Chunk) and op.n == 5:
                raise Mismatch(self.name, i, op, "bug B: chunk:5")
            n += op.tokens
            if not self.fixed and w == 2 and n >= 3:
                raise Mismatch(self.name, i, op, "bug A: window 2 past 3 tokens")
        return case_stats(case)


def make_known() -> WindowTwoBug:
    return WindowTwoBug()


def make_fixed() -> WindowTwoBug:
    return WindowTwoBug(fixed=True, name="fake-fixed")
