"""What every Hugging Face target shares: the probe at resolve time, transformers' and torch's versions
in reports, where an exception came from (transformers, a finding; the adapter, a harness fault), and
what happens to the cases that hit a finding written up in ``docs/findings/``.

The cache-layer targets are :mod:`fuzz.targets.hf.caches`, the model targets
:mod:`fuzz.targets.hf.models` and :mod:`fuzz.targets.hf.family`; the findings themselves
:mod:`fuzz.targets.hf.findings`.
"""

from __future__ import annotations

import copy
import os
from abc import abstractmethod
from typing import Any, Callable, Optional

from fuzz.ops import Case, Op
from fuzz.oracle import SpecStream
from fuzz.targets.base import Crash, HarnessFault, Mismatch, RunStats, Target
from fuzz.targets.hf.findings import Finding, applicable


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
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(os.path.abspath(tb.tb_frame.f_code.co_filename))
        tb = tb.tb_next
    for path in reversed(frames):
        if path.startswith(tf_root + os.sep):
            return True
        if path.startswith(repo + os.sep):
            return False
    return False


def case_stats(case: Case) -> RunStats:
    """Tokens and boundary phases of ``case`` (what a run of it exercised)."""
    stats = RunStats()
    spec = SpecStream(case.window, 1)
    for op in case.ops:
        stats.phases |= spec.apply(op)
        stats.tokens += op.tokens
    return stats


class HFTarget(Target):
    """What every HF target shares: a probe ran when it was built (the factories call :func:`probed`),
    it reports transformers' and torch's versions, an exception the adapter raised is a
    :class:`HarnessFault` (never a seed), and the cases that hit a finding written up for the installed
    release (:mod:`fuzz.targets.hf.findings`) are

    * **run and reported** (the default): a failure the finding explains is recorded in
      :attr:`RunStats.known` as reproduced (``True``), a pass as not reproduced (``False``), and the
      campaign counts them per finding; a failure it does not explain is raised like any other;
    * **skipped** with ``skip_known`` (``kvwindow fuzz --skip-known``, exploration): recorded as
      ``None``, nothing run;
    * **driven like any other case** with ``strict`` (how ``tests/test_hf_findings.py`` reproduces them).

    Subclasses set ``info`` (:func:`impl.hf.compat.info`), ``strict`` and ``finding_kind`` (the kind findings
    are listed under: ``"dynamic"``, ``"static"``, ``"mistral"``, ``"gemma2"``, ``"hf:<model_type>"``), and
    implement :meth:`run_case`.
    """

    finding_kind: str
    strict: bool = False
    #: From ``CampaignConfig.skip_known`` (:meth:`configured`).
    skip_known: bool = False

    def configured(self, config: Any) -> "HFTarget":
        """This target with the campaign's ``--skip-known`` (a shallow copy sharing the model: configuring
        happens in the process that runs the cases, the isolated child included)."""
        skip = bool(getattr(config, "skip_known", False))
        if skip == self.skip_known:
            return self
        other = copy.copy(self)
        other.skip_known = skip
        return other

    def versions(self) -> dict[str, str]:
        return self.info.versions()

    # -- known findings

    def finding_views(self, case: Case) -> list[Case]:
        """The streams this target drives for ``case``, as cases the findings' predicates read (op
        indices kept): the case itself, and what a target feeds besides (a left-padded batch)."""
        return [case]

    def known_findings(self, case: Case) -> dict[str, list[Finding]]:
        """Finding id -> the rows of it that apply here and that ``case`` (a view of it) exercises."""
        if self.strict:
            return {}
        views = self.finding_views(case)
        out: dict[str, list[Finding]] = {}
        for f in applicable(self.finding_kind, self.info.transformers):
            if any(f.hits(v) for v in views):
                out.setdefault(f.id, []).append(f)
        return out

    def known_finding(self, case: Case) -> Optional[Finding]:
        """The first finding ``case`` hits here, if any."""
        hit = self.known_findings(case)
        return next(iter(hit.values()))[0] if hit else None

    def explained_by(self, case: Case, error: BaseException, hit: dict[str, list[Finding]]) -> Optional[str]:
        """The id of the finding in ``hit`` that explains ``error``, if one does."""
        views = self.finding_views(case)
        for fid, rows in hit.items():
            if any(f.explains(v, error) for f in rows for v in views):
                return fid
        return None

    # -- running a case

    def run(self, case: Case) -> RunStats:
        hit = self.known_findings(case)
        if hit and self.skip_known:
            return RunStats(known={fid: None for fid in hit})
        try:
            stats = self._guarded(case)
        except (Mismatch, Crash) as e:
            fid = self.explained_by(case, e, hit) if hit else None
            if fid is None:
                raise
            stats = case_stats(case)
            stats.known[fid] = True
            return stats
        for fid in hit:
            stats.known[fid] = False
        return stats

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
