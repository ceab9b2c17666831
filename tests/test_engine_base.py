"""The outcome boundary every engine target shares (fuzz/targets/engines/base.py): what the engine
raises inside ``calling`` is a crash at the op it names, a TypeError of the adapter's own call and
anything raised outside it are harness faults; known findings are counted as for transformers;
``close_enough`` names the worst element and never passes a NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fuzz.ops import Case, Push
from fuzz.targets.base import Crash, HarnessFault, Mismatch, RunStats
from fuzz.targets.engines.base import EngineTarget, close_enough
from fuzz.targets.known import Finding, case_stats


def _native(x):
    raise RuntimeError(f"kernel rejected {x}")  # stands for a C extension: no frame of the engine's


class Fake(EngineTarget):
    name, distribution, package, release, finding_kind = "fake:eng", "fake-engine", "json", "1.2.3", "fake:eng"
    findings = (Finding("fake-eng-w1", frozenset({"fake:eng"}), ("1.2",), ("1.2.3",),
                        lambda c: c.window == 1),)

    def __init__(self, how: str):
        self.how = how

    def run_case(self, case: Case) -> RunStats:
        if self.how == "engine":
            with self.calling("kernel", 0, Push()):
                _native(3)
        if self.how == "adapter-typeerror":
            with self.calling("kernel", 0, Push()):
                math.sqrt("x")  # the adapter's wrong call
        if self.how == "adapter":
            raise KeyError("missing")
        if self.how == "mismatch" or (self.how == "w1" and case.window == 1):
            raise Mismatch(self.name, 0, Push(), "differs")
        return case_stats(case)


def test_what_the_engine_raises_is_a_crash_naming_the_op():
    with pytest.raises(Crash, match=r"op #0 \(push\).*kernel raised RuntimeError: kernel rejected 3") as e:
        Fake("engine").run(Case(2, (Push(),)))
    assert "json 1.2.3" in str(e.value)


@pytest.mark.parametrize("how", ["adapter", "adapter-typeerror"])
def test_what_the_adapter_raises_is_a_harness_fault(how):
    with pytest.raises(HarnessFault, match="adapter error on fake-engine 1.2.3"):
        Fake(how).run(Case(2, (Push(),)))


def test_known_findings_apply_by_release_and_kind():
    t = Fake("w1")
    assert t.known_hits(Case(1, (Push(),))) == {"fake-eng-w1"} and t.known_hits(Case(2, ())) == set()
    assert t.run(Case(1, (Push(),))).known == {"fake-eng-w1": True}
    t.release = "1.3.0"
    assert t.known_hits(Case(1, (Push(),))) == set()
    with pytest.raises(Mismatch):
        t.run(Case(1, (Push(),)))


def test_close_enough():
    assert close_enough([1.0, 2.0], [1.0, 2.0 + 1e-9], 1e-6, 0) is None
    why = close_enough([1.0, 2.5], [1.0, 2.0], 1e-3, 1e-3)
    assert "1 of 2 values off: worst at (1,)" in why
    assert close_enough([np.nan], [0.0], 1.0, 1.0) is not None
    assert "shape" in close_enough(np.zeros(2), np.zeros(3), 1, 1)
