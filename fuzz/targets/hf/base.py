"""What every Hugging Face target shares: the probe at resolve time, transformers' and torch's versions
in reports, where an exception came from (transformers, a finding; the adapter, a harness fault), and
what happens to the cases that hit a finding written up in ``docs/findings/``.

The cache-layer targets are :mod:`fuzz.targets.hf.caches`, the model targets
:mod:`fuzz.targets.hf.models` and :mod:`fuzz.targets.hf.family`; the findings themselves
:mod:`fuzz.targets.hf.findings`.
"""

from __future__ import annotations

import os
from abc import abstractmethod
from typing import Any, Callable, Optional

from fuzz.ops import Case, Op
from fuzz.targets.base import Crash, HarnessFault, Mismatch, RunStats
from fuzz.targets.hf.findings import Finding, applicable
from fuzz.targets.known import KnownFindingsTarget, case_stats, raised_inside, release_label  # noqa: F401 - case_stats re-exported


def _hf():
    """The installed transformers' :class:`~impl.hf.compat.HFInfo`; raises ``HFUnavailable`` (an
    :class:`impl.errors.Unavailable`) without it."""
    from impl.hf import compat

    return compat.info()


_PROBED: dict[tuple, Optional[BaseException]] = {}


def probed(probe: Callable[..., None], *args: Any) -> None:
    """Run an adapter's probe (:func:`impl.hf.caches.probe`, :func:`impl.hf.models.probe`,
    :func:`impl.hf.families.probe`) once per process and arguments; re-raise what it raised each time.
    Its :class:`~impl.hf.compat.HFIncompatible` (an ``Unavailable``) makes the target unavailable with the
    release and the API named: ``--target`` is then a usage error, ``--list-targets`` gives the reason."""
    from impl.hf import compat

    from impl.decoder import torch_threads

    key = (probe, args)
    if key not in _PROBED:
        try:
            with torch_threads(1):  # tiny models: one thread is ~10x faster than contending ones
                probe(*args)
            _PROBED[key] = None
        except compat.HFUnavailable as e:
            _PROBED[key] = e
    err = _PROBED[key]
    if err is not None:
        raise err


def _roots() -> tuple[str, str]:
    import transformers

    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.dirname(os.path.abspath(transformers.__file__)), os.path.abspath(os.path.join(here, "..", "..", ".."))


def from_transformers(error: BaseException) -> bool:
    """Did transformers raise ``error`` (rather than this project's adapter)?

    The innermost frame of its traceback that is either transformers' code or this repository's decides
    (torch, numpy and the standard library in between are passed over): an exception raised inside
    transformers on a spec-valid op is the implementation's (a finding); one raised in the adapter — a
    call transformers rejected at the call site, a shim that read the wrong attribute, a hook of the
    reference — is a harness fault. An :class:`~impl.hf.compat.HFUnavailable` is always the adapter's."""
    from impl.hf import compat

    if isinstance(error, compat.HFUnavailable):
        return False
    tf_root, repo = _roots()
    return raised_inside(error, tf_root, repo)


class HFTarget(KnownFindingsTarget):
    """What every HF target shares: a probe ran when it was built (the factories call :func:`probed`),
    it reports transformers' and torch's versions, an exception the adapter raised is a
    :class:`HarnessFault` (never a seed), and the cases that hit a finding written up for the installed
    release (:mod:`fuzz.targets.hf.findings`) are handled as :class:`~fuzz.targets.known.KnownFindingsTarget`
    says: run and reported by default, skipped with ``skip_known``, driven like any other with ``strict``.

    Subclasses set ``info`` (:func:`impl.hf.compat.info`), ``strict`` and ``finding_kind`` (the kind findings
    are listed under: ``"dynamic"``, ``"static"``, ``"mistral"``, ``"gemma2"``, ``"hf:<model_type>"``), and
    implement :meth:`run_case`.
    """

    finding_kind: str

    def versions(self) -> dict[str, str]:
        return self.info.versions()

    def findings_here(self) -> list[Finding]:
        return applicable(self.finding_kind, self.info.transformers, self.versions())

    def finding_release(self) -> str:
        return release_label("transformers", self.info.transformers)

    # -- running a case

    def _guarded(self, case: Case) -> RunStats:
        try:
            return self.run_case(case)
        except (Mismatch, Crash, HarnessFault):
            raise
        except Exception as e:  # noqa: BLE001 - classified: transformers' crash, or the adapter's fault
            if from_transformers(e):
                raise Crash(self.name, None, None, f"transformers raised {type(e).__name__}: {e}") from e
            raise self.fault(e) from e

    def fault(self, error: BaseException, what: str = "") -> HarnessFault:
        """The adapter failed: a harness fault naming the release, the exception and where it was raised."""
        where = ""
        tb = error.__traceback__
        while tb is not None:
            where = f" ({os.path.relpath(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno})"
            tb = tb.tb_next
        first = (str(error).splitlines() or [""])[0][:300]
        return HarnessFault(self.name, f"adapter error on transformers {self.info.transformers}"
                                       f"{': ' + what if what else ''}: {type(error).__name__}: {first}{where}")

    def raised(self, index: int, op: Optional[Op], what: str, error: BaseException) -> Exception:
        """What an exception from a call into transformers (``what``) during op ``index`` is: a
        :class:`Mismatch` when transformers raised it (a disagreement on a spec-valid op), else the
        adapter's :meth:`fault`."""
        if from_transformers(error):
            return Mismatch(self.name, index, op, f"{what} raised {type(error).__name__}: {error}")
        return self.fault(error, what)

    @abstractmethod
    def run_case(self, case: Case) -> RunStats:
        """Drive ``case`` and raise at the first disagreement (no known-finding handling)."""
