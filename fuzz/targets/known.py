"""Known findings of third-party code, for every target that drives somebody else's library.

A *known finding* is a divergence from the spec written up in ``docs/findings/<id>.md`` with the
releases it applies to and a predicate saying which cases exercise it (looking at the case only,
never at results). The transformers targets were the first to have them
(:mod:`fuzz.targets.hf.findings`); every engine target (:mod:`fuzz.targets.engines`) has them too,
so the machinery lives here, once:

* :class:`Finding`: one row of a findings table (an id with several parts has one row per part);
* :class:`KnownFindingsTarget`: what a target does with a case that hits a finding that applies to
  the installed release — by default it **runs** it and records whether the finding reproduced
  (:attr:`~fuzz.targets.base.RunStats.known`: ``True`` a failure the finding explains, ``False`` a
  pass); a failure the finding does not explain is raised like any other; ``skip_known`` leaves the
  case out (recorded as ``None``); ``strict`` drives it like any other case (how the findings'
  own tests reproduce them). :meth:`KnownFindingsTarget.known_hits` names the findings a case hits
  *before* it runs, which is what lets a campaign stop paying for a finding it has already seen
  (:mod:`fuzz.phases.known`).
* :func:`raised_inside`: whether an exception came from the third-party package (a finding: the
  implementation raised on a spec-valid op) or from this repository's adapter (a harness fault).

Which releases a finding applies to (DESIGN §4): from its first affected release on, releases newer than any
the matrix ran included, until the matrix sees a release on which it no longer reproduces. A row's spans say
so: ``"4.57+"`` is open (every release from 4.57 on: nobody has seen it fixed), ``"4.45-4.55"`` is closed (the
matrix ran a later release where it did not reproduce: fixed in the next series it ran). A span never ends at
"the newest release we happen to have run" — that is what made every known finding on transformers 5.25.0 (a
day newer than the matrix) an unexplained failure. :data:`MATRIX_NEWEST` names the newest release of each
library ``docs/compat.md`` has a row for; a target on a newer one says so (:func:`release_label`,
:func:`release_warnings`).
"""

from __future__ import annotations

import copy
import os
import re
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Sequence

from fuzz.ops import Case
from fuzz.targets.base import Crash, Mismatch, RunStats, Target


def minor(release: str) -> tuple[int, int]:
    """``"4.48.3"`` -> ``(4, 48)``: the series a release belongs to (pre-release tags ignored)."""
    parts = release.split(".")
    try:
        return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()))
    except (IndexError, ValueError):
        raise ValueError(f"not a release number: {release!r}") from None


def in_span(release: str, span: str) -> bool:
    """Is ``release`` in ``span``: one minor series (``"4.48"``), an inclusive range of them (``"4.45-4.51"``:
    closed, the matrix saw the next series it ran fixed), or every series from one on (``"4.57+"``: open, not
    seen fixed)?"""
    if span.endswith("+"):
        return minor(span[:-1]) <= minor(release)
    lo, _, hi = span.partition("-")
    return minor(lo) <= minor(release) <= minor(hi or lo)


def is_open(span: str) -> bool:
    """Does ``span`` reach every later release (``"4.57+"``)?"""
    return span.endswith("+")


def span_text(span: str) -> str:
    """A span as the notes' release tables write it (``4.45 – 4.51``, ``4.57 and later (not seen fixed)``)."""
    return f"{span[:-1]} and later (not seen fixed)" if is_open(span) else span.replace("-", " – ")


#: The newest release of each library under test that ``docs/compat.md`` has a row for (``scripts/hf_matrix.sh``,
#: ``scripts/engine_matrix.sh``); ``tests/test_compat_table.py`` and ``tests/test_engine_compat.py`` check it
#: against the tables. A library missing here has no table: nothing is said about its releases.
MATRIX_NEWEST: dict[str, str] = {
    "transformers": "5.25.0",
    "onnxruntime": "1.32.0",
    "mlx-lm": "0.32.2",
    "ctranslate2": "4.8.5",
    "llama-cpp-python": "0.3.36",
    "vllm": "0.34.0",  # the triton:vllm-* kernels (scripts/engine_matrix.sh triton-vllm)
    "sglang": "0.5.23",  # the triton:sglang-* kernels (scripts/engine_matrix.sh triton-sglang)
}


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", release.split("+")[0])[:3])


def newer_than_matrix(distribution: str, release: str) -> bool:
    """Is ``release`` of ``distribution`` newer than the newest ``docs/compat.md`` ran?"""
    newest = MATRIX_NEWEST.get(distribution)
    return newest is not None and _release_key(release) > _release_key(newest)


def release_label(distribution: str, release: str) -> str:
    """How a report names the release a finding reproduced on: ``transformers 5.25.0``, with
    ``(newer than docs/compat.md)`` where the matrix has not run it."""
    return f"{distribution} {release}" + (" (newer than docs/compat.md)" if newer_than_matrix(distribution, release)
                                          else "")


def release_warnings(versions: dict[str, str]) -> list[str]:
    """One warning per library of ``versions`` (a target's :meth:`~fuzz.targets.base.Target.versions`) newer
    than the matrix. The text depends on the library and release only, so a campaign over many targets of one
    library prints it once (warnings are printed deduplicated)."""
    out = []
    for dist, release in versions.items():
        if newer_than_matrix(dist, str(release)):
            out.append(f"{dist} {release} is newer than the newest release docs/compat.md ran ({MATRIX_NEWEST[dist]}): "
                       "written-up findings still apply to it until a matrix run sees them fixed, and an API the "
                       "adapter cannot drive is a harness fault naming it (run the matrix with --releases newest)")
    return out


@dataclass(frozen=True)
class Finding:
    id: str
    #: The target kinds it applies to (``dynamic``, ``hf:<model_type>``, ``ort:gqa``, ...).
    kinds: frozenset[str]
    #: Minor series (``"4.45"``), closed ranges of them (``"4.45-4.51"``: fixed in the next series the matrix ran)
    #: or open ones (``"4.57+"``: not seen fixed; releases newer than the matrix included) it applies to.
    releases: tuple[str, ...]
    #: Releases a release matrix reproduced it on (the note's release table).
    seen: tuple[str, ...]
    #: Does the case exercise it?
    hits: Callable[[Case], bool]
    #: Which cases, in words (the note's release table).
    cases: str = ""
    #: Can a failure with this message come from it (beyond the case hitting it)? ``None``: any failure.
    failure: Optional[Callable[[BaseException], bool]] = None
    #: Where the note lives (``docs/findings``); the note is ``<docs>/<id>.md``.
    docs: str = "docs/findings"
    #: The upstream tracker thread, or ``""`` when none was found (the note says so).
    upstream: str = ""
    #: Other libraries the finding needs, each with the minor series it applies to (``(("torch", "2.13+"),)``: a
    #: transformers finding that is torch's code generation's as much); checked against the target's
    #: ``versions()`` (:meth:`met`). Empty: the target's own library decides alone.
    requires: tuple[tuple[str, str], ...] = ()

    @property
    def doc(self) -> str:
        return f"{self.docs}/{self.id}.md"

    def applies(self, kind: str, release: str) -> bool:
        return kind in self.kinds and any(in_span(release, s) for s in self.releases)

    def met(self, versions: dict[str, str]) -> bool:
        """Are the other libraries of :attr:`requires` at a release it applies to (one missing from
        ``versions``: not met)?"""
        for dist, span in self.requires:
            have = versions.get(dist)
            try:
                if have is None or not in_span(str(have), span):
                    return False
            except ValueError:
                return False
        return True

    def explains(self, case: Case, error: BaseException) -> bool:
        """Is ``error``, raised by ``case``, this finding? The ops up to the one the error names must
        already hit it (the trigger came before the failure), and the error must be of its kind."""
        if self.failure is not None and not self.failure(error):
            return False
        index = getattr(error, "index", None)
        prefix = case if index is None or index < 0 else case.replace_ops(case.ops[:index + 1])
        return self.hits(prefix)


def link(finding_id: str, rows: Iterable[Finding]) -> str:
    """One line naming where a finding is written up: the note, and the upstream thread if there is one."""
    for f in rows:
        if f.id == finding_id:
            return f.doc + (f" (upstream: {f.upstream})" if f.upstream else "")
    return f"docs/findings/{finding_id}.md"


def raised_inside(error: BaseException, package_root: str, repo_root: str) -> bool:
    """Did the code under ``package_root`` raise ``error`` (rather than this repository's, under
    ``repo_root``)? The innermost frame of its traceback that is in either decides (torch, numpy and
    the standard library in between are passed over); an exception with neither in its traceback is
    the adapter's (it was raised at a call site the adapter built)."""
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(os.path.abspath(tb.tb_frame.f_code.co_filename))
        tb = tb.tb_next
    for path in reversed(frames):
        if path.startswith(package_root + os.sep):
            return True
        if path.startswith(repo_root + os.sep):
            return False
    return False


def repo_root() -> str:
    """This repository's (or the installed package's) root: the folder holding ``fuzz/``."""
    return os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


class KnownFindingsTarget(Target):
    """A target of third-party code with written-up findings. Subclasses implement
    :meth:`findings_here` (the rows that apply to this target on the installed release) and
    :meth:`_guarded` (drive the case, raising classified outcomes), and may widen
    :meth:`finding_views` (the streams a target feeds besides the case itself)."""

    knows_findings = True
    strict: bool = False
    #: The run drives every path of a case and raises a failure no finding the case hits explains
    #: (:func:`fuzz.targets.engines.lm.pick`): a case that hits a known finding still tests every other path,
    #: so the campaign never leaves it out (:class:`fuzz.phases.known.KnownBudget`) — on CTranslate2, where a
    #: stream longer than W hits ``ct2-forward-past-window`` on one path, leaving those cases out left only
    #: streams within W for every path (a 120 s ``ct2:mistral`` campaign: 4,793 cases run, 73,124 left out).
    every_path_runs: bool = False
    #: From ``CampaignConfig.skip_known`` (:meth:`configured`).
    skip_known: bool = False

    def configured(self, config: Any) -> "KnownFindingsTarget":
        """This target with the campaign's ``--skip-known`` (a shallow copy sharing the model: configuring
        happens in the process that runs the cases, the isolated child included)."""
        skip = bool(getattr(config, "skip_known", False))
        if skip == self.skip_known:
            return self
        other = copy.copy(self)
        other.skip_known = skip
        return other

    @abstractmethod
    def findings_here(self) -> Sequence[Finding]:
        """The findings rows that apply to this target on the installed release."""

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
        for f in self.findings_here():
            if any(f.hits(v) for v in views):
                out.setdefault(f.id, []).append(f)
        return out

    def known_hits(self, case: Case) -> set[str]:
        return set(self.known_findings(case))

    def finding_release(self) -> str:
        """The package and release the findings are about, as a report names them (``transformers 5.24.0``;
        :func:`release_label`)."""
        return "?"

    def finding_links(self) -> dict[str, dict[str, str]]:
        """Where each finding that applies here is written up: ``{id: {"doc", "upstream", "release"}}``."""
        return {f.id: {"doc": f.doc, "upstream": f.upstream, "release": self.finding_release()}
                for f in self.findings_here()}

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
            # A target that ran every path says which findings its failures reproduced (lm.pick); the others
            # the case hits passed on their paths.
            reproduced = getattr(e, "known_reproduced", None)
            if reproduced is not None:
                for other in hit:
                    stats.known[other] = other in reproduced
            stats.known[fid] = True
            return stats
        for fid in hit:
            stats.known[fid] = False
        return stats

    @abstractmethod
    def _guarded(self, case: Case) -> RunStats:
        """Drive ``case``: a :class:`~fuzz.targets.base.Mismatch` or :class:`~fuzz.targets.base.Crash` is the
        implementation's, a :class:`~fuzz.targets.base.HarnessFault` the adapter's."""


def case_stats(case: Case) -> RunStats:
    """Tokens and boundary phases of ``case`` (what a run of it exercised)."""
    from fuzz.oracle import SpecStream

    stats = RunStats()
    spec = SpecStream(case.window, 1)
    for op in case.ops:
        stats.phases |= spec.apply(op)
        stats.tokens += op.tokens
    return stats
