"""A stand-in for a target whose availability probe died on the sliding window (no transformers or torch compile
needed): what ``hf:<type>@flex_attention`` is on torch 2.13's CPU, made cheap for the probe-crash tests.

The "kernel" is compiled by the first call of a target object that feeds tokens: a decode step past W right
after a prefill as the object's first compile dies (``FakeCompileError``), any other first call compiles it and
nothing dies afterwards. So the probe (:data:`PROBE`, run when the object is built, as in a fresh process) died,
the campaign's own cases (a W = 1 tour first) never die, and a replay of the probe's case on a fresh object dies
again — the flex attention finding's shape (docs/findings/hf-flex-attention-sliding-compile.md).

Registered in tests as ``fakeprobe`` and ``fakeprobe-strict`` (``monkeypatch.setitem(registry.BUILTIN, ...)``);
:data:`FINDING` explains the death where a test adds it to the findings table (``monkeypatch``).
"""

from __future__ import annotations

from fuzz.ops import Case, Chunk, Push
from fuzz.targets.base import Crash, RunStats
from fuzz.targets.hf.base import HFTarget, case_stats
from fuzz.targets.hf.findings import Finding
from fuzz.targets.probes import probe_crash

RELEASE = "9.9.1"
#: The probe's call, as a case: a prefill of 4 past W = 3, then decode steps (impl.hf.families.Family._try's shape).
PROBE = Case(3, (Chunk(4), Push(), Push()))
DEATH = "FakeCompileError: 'cur_kvSplitSize0' was not declared in this scope"


FINDING = Finding("fake-probe-compile", frozenset({"fakeprobe"}), ("9.9",), (RELEASE,),
                  lambda case: any(w < 4 and len([op for _, op in s if op.tokens]) >= 2 for w, s in case.streams()),
                  "a decode step after a prefill", failure=lambda e: "FakeCompileError" in str(e))


class Info:
    transformers = RELEASE

    def versions(self) -> dict[str, str]:
        return {"transformers": RELEASE}


class ProbeDies(HFTarget):
    finding_kind = "fakeprobe"
    kind = "model"
    window_max = 8
    max_tokens = 12

    def __init__(self, name: str, *, strict: bool = False):
        self.info, self.name, self.strict = Info(), name, strict
        self.compiled = False
        self.probe_died = self._compile(PROBE) is not None  # the probe: its own first compile

    def _compile(self, case: Case):
        """The object's first calls: ``None`` if they compiled the kernel (or it was compiled), else the failing op."""
        if self.compiled:
            return None
        for w, stream in case.streams():
            fed = [(i, op) for i, op in stream if op.tokens]
            if not fed:
                continue
            if len(fed) >= 2 and fed[0][1].tokens >= 2 and fed[0][1].tokens + fed[1][1].tokens > w:
                return fed[1]
            self.compiled = True
            return None
        return None

    def probe_crashes(self) -> list:
        return [probe_crash(self, PROBE, "the fake probe (a child process)", DEATH)] if self.probe_died else []

    def run_case(self, case: Case) -> RunStats:
        dies = self._compile(case)
        if dies is not None:
            i, op = dies
            raise Crash(self.name, i, op, f"raised {DEATH}")
        return case_stats(case)


def make() -> ProbeDies:
    return ProbeDies("fakeprobe")


def make_strict() -> ProbeDies:
    return ProbeDies("fakeprobe-strict", strict=True)
