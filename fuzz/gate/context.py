"""What every step of one gate run shares: the two subjects, the window and vocabulary the token streams
are sized by, the budget, and how each subject's cached path is judged against its own ``full()``.

The streams are sized by the baseline's widest sliding window ``W`` (``identity()["window"]``; 8 when
the subject reports none), so lengths "around W" mean the subject's own boundary. Tokens are a pure
function of the run's seed and a tag, so a report replays identically.

Judging a cached path: the baseline, and a candidate of an exact kind, against ``full()`` at the
subject's own tolerance; the candidate of an approximate kind (eviction, quantisation) differs from
``full()`` by design, so at the claim's level instead (and not at all for a ``task`` claim).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from fuzz.gate.compare import agrees, within
from fuzz.gate.config import Budget, GateConfig
from fuzz.gate.protocol import Subject

DEFAULT_WINDOW = 8


@dataclass
class Judge:
    """How one subject's cached rows are held to its ``full()`` rows: ``judge(got, ref, positions)`` is
    ``None`` when they agree, else the difference; ``checked=False`` means nothing is asserted."""

    label: str
    fn: Callable[[np.ndarray, np.ndarray, Sequence[int]], str | None]
    checked: bool = True
    #: whether each layer's held entries are judged too (not for an approximate candidate: an eviction
    #: cache holds fewer entries and a quantised one other values, by design)
    layers: bool = True

    def __call__(self, got: np.ndarray, ref: np.ndarray, positions: Sequence[int]) -> str | None:
        return self.fn(got, ref, positions) if self.checked else None


def tolerance_judge(tol: tuple[float, float]) -> Judge:
    label = f"|cached - full| <= {tol[0]:g}" + (f" + {tol[1]:g}*|full|" if tol[1] else "")
    return Judge(label, lambda got, ref, pos: within(got, ref, tol, pos))


@dataclass
class Context:
    config: GateConfig
    baseline: Subject
    candidate: Subject
    window: int
    windows: list[Any]
    vocab: int
    identities: dict[str, dict[str, Any]]
    log: Callable[[str], None] = print
    notes: list[str] = field(default_factory=list)
    #: step 4's results per subject spec and cell name, reused by steps 5 and 7
    cells: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def budget(self) -> Budget:
        return self.config.budget

    @property
    def claim(self):
        return self.config.claim

    def roles(self) -> list[tuple[str, Subject]]:
        return [("baseline", self.baseline), ("candidate", self.candidate)]

    def judge(self, role: str, subject: Subject) -> Judge:
        if role == "candidate" and self.config.approximate:
            claim = self.claim
            if not claim.checked:
                return Judge("not checked (a task claim)", lambda g, r, p: None, checked=False, layers=False)
            return Judge(f"at the claim {claim.text} (an approximate {self.config.intervention} candidate "
                         "differs from full() by design)",
                         lambda g, r, p: agrees(g, r, claim, subject.tolerance, p), layers=False)
        return tolerance_judge(subject.tolerance)

    def tokens(self, tag: str, n: int) -> list[int]:
        """``n`` tokens of stream ``tag``; ids 3.. where the vocabulary has room (0-2 are often pad/BOS/EOS)."""
        lo = 3 if self.vocab > 8 else 0
        rng = np.random.default_rng([self.config.seed, zlib.crc32(tag.encode())])
        return [int(t) for t in rng.integers(lo, self.vocab, size=n)]


def stream_window(identity: dict[str, Any]) -> tuple[int | None, list[Any]]:
    """The widest sliding window an identity reports, and its per-layer windows (``None``: none reported)."""
    w = identity.get("window")
    ws = list(w) if isinstance(w, (list, tuple)) else ([w] if w is not None else [])
    sliding = [int(x) for x in ws if isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x > 0]
    return (max(sliding) if sliding else None), ws
