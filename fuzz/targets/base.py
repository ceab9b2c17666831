"""What every target is: the :class:`Target` a campaign drives, the :class:`Mismatch` it raises, and
the usage error :class:`TargetError` a ``--target`` value that names no usable target raises.

A :class:`Target` runs one test case — a window and an op list — and raises
:class:`Mismatch` at the first op after which it disagrees with the oracle.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from fuzz.ops import Case, Op


class TargetError(ValueError):
    """A ``--target`` value that names no usable target (a usage error: exit 2).

    A target that exists but cannot run on this machine raises :class:`impl.errors.Unavailable`
    instead; :func:`fuzz.targets.registry.resolve` turns that into this error for ``--target``."""


class Mismatch(AssertionError):
    """The target disagreed with the spec; the message says after which op and how."""

    def __init__(self, target: str, index: int, op: Op | None, detail: str):
        self.target, self.index, self.op, self.detail = target, index, op, detail
        where = "after reset" if op is None else f"after op #{index} ({op.text})"
        super().__init__(f"{target}: {where}: {detail}")


@dataclass
class RunStats:
    """What one case exercised: tokens pushed (a chunk of k is k) and the boundary phases it passed."""

    tokens: int = 0
    phases: set[str] = field(default_factory=set)


class Target(ABC):
    """One implementation under test. ``name`` is what ``--target`` takes to build it again."""

    name: str = "?"
    #: ``cache`` targets compare contents; ``model`` targets also compare logits.
    kind: str = "cache"
    #: The largest window the target accepts (``None``: no limit of its own).
    window_max: int | None = None
    #: Largest stream length per case the campaign should generate (model targets are slower).
    max_tokens: int | None = None

    def accepts(self, case: Case) -> str | None:
        """``None`` if the case fits this target, else why not (e.g. a window above ``window_max``)."""
        if self.window_max is None:
            return None
        widest = case.widest_window()
        if widest > self.window_max:
            return f"window {widest} exceeds {self.name}'s maximum {self.window_max}"
        return None

    @abstractmethod
    def run(self, case: Case) -> RunStats:
        """Drive fresh streams through ``case``; raise :class:`Mismatch` at the first disagreement."""

    def versions(self) -> dict[str, str]:
        """Versions of third-party code this target exercises (for campaign reports)."""
        return {}
