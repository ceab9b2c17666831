"""What every Hugging Face target shares: transformers' and torch's versions in reports, and the
cases that hit a finding written up in ``docs/findings/`` left out unless ``strict``.

The cache-layer targets are :mod:`fuzz.targets.hf.caches`, the model targets
:mod:`fuzz.targets.hf.models`; the findings themselves :mod:`fuzz.targets.hf.findings`.
"""

from __future__ import annotations

from typing import Optional

from hypothesis import reject
from hypothesis.control import currently_in_test_context

from fuzz.ops import Case
from fuzz.targets.base import Target
from fuzz.targets.hf.findings import Finding, known_hit


def _hf():
    """The installed transformers' :class:`~impl.hf.compat.HFInfo`; raises ``HFUnavailable`` (an
    :class:`impl.errors.Unavailable`) without it."""
    from impl.hf import compat

    return compat.info()


class KnownFinding(RuntimeError):
    """A case that exercises a documented finding, run on a non-strict target outside Hypothesis."""


class HFTarget(Target):
    """What every HF target shares: it reports transformers' and torch's versions, and unless
    ``strict`` it leaves out the cases that hit a finding written up for the installed cache API
    (:mod:`fuzz.targets.hf.findings`), so a campaign explores everything else instead of re-finding it.

    Subclasses set ``info`` (:func:`impl.hf.compat.info`), ``strict`` and ``finding_kind``
    (the kind findings are listed under: ``"dynamic"``, ``"static"``, ``"mistral"``, ``"gemma2"``).
    """

    finding_kind: str
    strict: bool = False

    def versions(self) -> dict[str, str]:
        return self.info.versions()

    def known_finding(self, case: Case) -> Optional[Finding]:
        return None if self.strict else known_hit(self.finding_kind, self.info.api, case)

    def accepts(self, case: Case) -> Optional[str]:
        why = super().accepts(case)
        f = None if why is not None else self.known_finding(case)
        return why if f is None else f"hits known finding {f.id} ({f.doc})"

    def skip_known(self, case: Case) -> None:
        """Leave out a case that hits a known finding: Hypothesis discards it; elsewhere it raises."""
        f = self.known_finding(case)
        if f is None:
            return
        if currently_in_test_context():
            reject()
        raise KnownFinding(f"{self.name}: case hits known finding {f.id} ({f.doc}); run with strict=True to drive it")
