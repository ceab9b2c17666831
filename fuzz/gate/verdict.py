"""What a step says: a verdict (pass, fail, not applicable) with its evidence, check by check.

A :class:`Check` is one comparison on one subject ("cached vs uncached · baseline · prefill 9 then 10
decodes") with its verdict and a one-line detail; a :class:`Step` is one of seed 000's eight steps,
its checks and a one-line summary. A step fails when any check fails, passes when at least one check
passes and none fails, and is not applicable (with the reason) when nothing in it could be checked.
A harness fault inside a step (the gate's own error, an adapter that cannot drive its release) makes
that step ``fault`` and the run exit 3.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PASS, FAIL, NA, FAULT = "pass", "fail", "n/a", "fault"
#: How reports show a verdict.
LABEL = {PASS: "PASS", FAIL: "FAIL", NA: "n/a", FAULT: "HARNESS FAULT"}

TITLES = {
    1: "Intervention named",
    2: "Equivalence claim",
    3: "Cache identity",
    4: "Positive parity",
    5: "Negative controls",
    6: "Phase-specific performance",
    7: "Quality slices",
    8: "Invalidation and recovery",
}


@dataclass
class Check:
    name: str
    subject: str
    verdict: str
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Step:
    number: int
    verdict: str = NA
    summary: str = ""
    checks: list[Check] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def title(self) -> str:
        return TITLES[self.number]

    def add(self, name: str, subject: str, verdict: str, detail: str, **data: Any) -> Check:
        c = Check(name, subject, verdict, detail, data)
        self.checks.append(c)
        return c

    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.verdict == FAIL]

    def settle(self, passed: str, na: str) -> "Step":
        """Set the verdict from the checks; ``passed`` / ``na`` are the summaries when nothing failed."""
        fails = self.failures()
        if fails:
            self.verdict = FAIL
            first = fails[0]
            more = f" (and {len(fails) - 1} more)" if len(fails) > 1 else ""
            self.summary = f"{first.name} · {first.subject}: {first.detail}{more}"
        elif any(c.verdict == PASS for c in self.checks):
            self.verdict, self.summary = PASS, passed
        else:
            self.verdict, self.summary = NA, na
        return self


def mark_shared(step: Step) -> None:
    """Say where the candidate's failures are the baseline's too (a reviewer's first question: is this a
    regression?): each shared failing check gets a note, and the summary says so when all are shared."""
    base = {c.name for c in step.checks if c.verdict == FAIL and c.subject.startswith("baseline ")}
    cand = [c for c in step.checks if c.verdict == FAIL and c.subject.startswith("candidate ")]
    for c in cand:
        if c.name in base:
            c.detail += " [the baseline fails this too]"
    if step.verdict == FAIL and base and all(c.name in base for c in cand):
        step.summary += " — the baseline fails it too (not a regression)"


def overall(steps: list[Step], faults: bool = False) -> str:
    """FAIL when a step failed (a failure is evidence, and outranks a fault, as a finding does in a
    campaign), else FAULT when a step or the report faulted, else PASS."""
    if any(s.verdict == FAIL for s in steps):
        return FAIL
    return FAULT if faults or any(s.verdict == FAULT for s in steps) else PASS
