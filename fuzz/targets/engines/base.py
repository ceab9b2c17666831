"""What every engine target shares (ONNX Runtime, mlx-lm, CTranslate2, llama.cpp, keras-hub).

An engine target drives a case (window + ops, :mod:`fuzz.ops`) through the engine the way its users
drive it and compares what comes out — attention outputs, logits, cache contents where the engine
exposes them — with the float64 spec-mask reference (:mod:`pyspec.attention` for op-level targets,
:mod:`impl.hf.reference` for model-level ones) under a tolerance stated per engine
(:meth:`EngineTarget.tolerances`, printed in every report).

The outcome boundary (DESIGN §4): an exception raised *by the engine* on a spec-valid op is a
:class:`~fuzz.targets.base.Crash` (a finding); one raised by this repository's adapter is a
:class:`~fuzz.targets.base.HarnessFault` (never a seed). Python frames decide where they can
(:func:`fuzz.targets.known.raised_inside`); a call into a native extension leaves no frame of the
engine's, so adapters make such calls inside :meth:`EngineTarget.calling`, which counts what the
call raised as the engine's — except a ``TypeError`` (the adapter called it wrongly).

Known findings (``docs/findings/<engine>-<id>.md``) work as they do for transformers
(:class:`~fuzz.targets.known.KnownFindingsTarget`): each engine module keeps its findings table and
passes it as :attr:`EngineTarget.findings`.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from abc import abstractmethod
from typing import Any, Callable, Optional, Sequence

import numpy as np

from fuzz.ops import Case, Op, target_of
from fuzz.targets.base import Crash, HarnessFault, Mismatch, RunStats, run_at_once
from fuzz.targets.known import Finding, KnownFindingsTarget, raised_inside, release_label, repo_root


class EngineCallFailed(Exception):
    """An exception the engine raised inside :meth:`EngineTarget.calling` (wrapped so it is classified once)."""

    def __init__(self, what: str, index: Optional[int], op: Optional[Op], error: BaseException):
        self.what, self.index, self.op, self.error = what, index, op, error
        super().__init__(f"{what} raised {type(error).__name__}: {error}")


class _Calling:
    """:meth:`EngineTarget.calling`'s context manager."""

    __slots__ = ("target", "what", "index", "op")

    def __init__(self, target: "EngineTarget", what: str, index: Optional[int], op: Optional[Op]):
        self.target, self.what, self.index, self.op = target, what, index, op

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, tb) -> bool:
        if error is None or not isinstance(error, Exception) \
                or isinstance(error, (Mismatch, Crash, HarnessFault, EngineCallFailed)):
            return False
        if isinstance(error, TypeError) and not self.target.from_engine(error):
            return False  # the adapter called it wrongly: a harness fault upstream
        raise EngineCallFailed(self.what, self.index, self.op, error) from error


class EngineTarget(KnownFindingsTarget):
    """One engine entry point as a campaign target. Subclasses set :attr:`distribution` (the PyPI
    name), :attr:`package` (the import name whose files are the engine's), :attr:`release` (the
    installed version, read at construction), :attr:`finding_kind` and :attr:`findings`, and implement
    :meth:`run_case`."""

    kind = "model"
    distribution: str = "?"
    package: str = "?"
    release: str = "?"
    finding_kind: str = "?"
    findings: tuple[Finding, ...] = ()
    #: Whether the engine's API documents that ONE engine object (a session, a generator) may be called from
    #: several threads at once, each caller with its own stream: the threads phase (:mod:`fuzz.phases.threads`)
    #: then drives 2-4 streams at once against the shared object (:meth:`_run_threads`). :attr:`threads_doc`
    #: cites the document either way (the phase's "n/a" reason where nothing is promised).
    thread_safe = False
    threads_doc = "the engine documents no concurrent use of one engine object"
    #: The threaded case being run (:meth:`_run_threads`): a target whose engine object is keyed by a choice
    #: drawn from the case's seed (intra-op threads) draws it from this case, so every thread meets ONE object.
    threads_parent: Optional[Case] = None

    def versions(self) -> dict[str, str]:
        return {self.distribution: self.release, "numpy": np.__version__}

    def findings_here(self) -> list[Finding]:
        versions = self.versions()
        return [f for f in self.findings if f.applies(self.finding_kind, self.release) and f.met(versions)]

    def finding_release(self) -> str:
        return release_label(self.distribution, self.release)

    def probe_calls(self) -> dict[Any, tuple[str, Case]]:
        """The availability probes (:func:`probe_once` keys) whose call this target makes for a case: key ->
        (the call, in words; the case). A death of one of them on the window is this target's crash
        (:meth:`probe_crashes`); a probe whose call the target does not make is left to the target that does."""
        return {}

    def probe_crashes(self) -> list:
        """The :data:`PROBE_CRASHES` of :meth:`probe_calls`' probes, each with the probe's call as its case."""
        from fuzz.targets.probes import probe_crash

        return [probe_crash(self, case, what, PROBE_CRASHES[key])
                for key, (what, case) in self.probe_calls().items() if key in PROBE_CRASHES]

    # -- running a case

    @abstractmethod
    def run_case(self, case: Case) -> RunStats:
        """Drive ``case`` and raise at the first disagreement (no known-finding handling)."""

    # -- threads (one shared engine object, one stream per thread)

    def thread_streams(self, case: Case) -> list[Case]:
        """A threaded case's instance ``k`` as a case of its own (its window, its ops): thread ``k``'s stream."""
        ops: list[list[Op]] = [[] for _ in range(case.instance_count)]
        for op in case.ops:
            k, bare = target_of(op)
            ops[k].append(bare)
        windows = [case.window] + [inst.window for inst in case.instances]
        return [Case(windows[k], tuple(ops[k]), case.width, case.dtype) for k in range(case.instance_count)]

    def accepts(self, case: Case) -> Optional[str]:
        if not (case.threads and self.thread_safe):
            return super().accepts(case)
        for k, sub in enumerate(self.thread_streams(case)):
            why = super().accepts(sub)
            if why is not None:
                return f"thread {k}'s stream: {why}"
        return None

    def _run_threads(self, case: Case) -> RunStats:
        """Each instance's ops as a stream of its own (:meth:`thread_streams`), all run at once from one thread
        each against this target's engine objects (shared: that is the documented promise), released together
        by a barrier; each thread checks its own outputs as the single-thread path does (:meth:`run_case`). The
        first failure by thread is raised, its op index mapped back to the case's."""
        subs = self.thread_streams(case)
        where = [[i for i, op in enumerate(case.ops) if target_of(op)[0] == k] for k in range(len(subs))]
        outcomes: list[Optional[BaseException]] = [None] * len(subs)
        gate = threading.Barrier(len(subs))
        ran: list[Optional[RunStats]] = [None] * len(subs)

        def drive(k: int) -> None:
            try:
                gate.wait(timeout=60)
                ran[k] = self._guarded(subs[k])
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                outcomes[k] = e

        self.threads_parent = case
        try:
            run_at_once(drive, len(subs), "kvwindow-stream")
        finally:
            self.threads_parent = None
        for k, e in enumerate(outcomes):
            if e is None:
                continue
            note = f"thread {k} of {len(subs)} (one shared engine object, all at once): "
            if isinstance(e, Mismatch):
                i = where[k][e.index] if 0 <= e.index < len(where[k]) else e.index
                out: BaseException = Mismatch(self.name, i, case.ops[i] if 0 <= i < len(case.ops) else e.op,
                                              note + e.detail)
            elif isinstance(e, Crash):
                i = where[k][e.index] if e.index is not None and 0 <= e.index < len(where[k]) else e.index
                out = Crash(self.name, i, case.ops[i] if i is not None and 0 <= i < len(case.ops) else e.op,
                            note + e.detail, signal=e.signal)
            else:
                raise e
            out.thread = k  # type: ignore[attr-defined] - explained_by reads the thread's own error (__cause__)
            raise out from e
        stats = RunStats()
        for r in ran:
            if r is not None:
                stats.phases |= r.phases
                stats.tokens += r.tokens
        return stats

    def finding_views(self, case: Case) -> list[Case]:
        """A threaded case's findings are read per thread: each thread's stream is a case of its own."""
        if case.threads and self.thread_safe:
            return self.thread_streams(case)
        return super().finding_views(case)

    def explained_by(self, case: Case, error: BaseException, hit: dict[str, list[Finding]]) -> Optional[str]:
        """A threaded failure is explained on its thread's stream, by the error its thread raised (its op index
        is the stream's own, not the case's): a known finding met in thread 2 stays known."""
        k = getattr(error, "thread", None)
        if k is None or not (case.threads and self.thread_safe) or error.__cause__ is None:
            return super().explained_by(case, error, hit)
        sub, own = self.thread_streams(case)[k], error.__cause__
        for fid, rows in hit.items():
            if any(f.explains(sub, own) for f in rows):
                return fid
        return None

    def _guarded(self, case: Case) -> RunStats:
        if case.threads and self.thread_safe:
            return self._run_threads(case)
        try:
            return self.run_case(case)
        except (Mismatch, Crash, HarnessFault):
            raise
        except EngineCallFailed as e:
            raise Crash(self.name, e.index, e.op, f"{self.package} {self.release}: {e}") from e.error
        except Exception as e:  # noqa: BLE001 - classified: the engine's crash, or the adapter's fault
            if self.from_engine(e):
                raise Crash(self.name, None, None, f"{self.package} {self.release} raised "
                                                   f"{type(e).__name__}: {e}") from e
            raise self.fault(e) from e

    def calling(self, what: str, index: Optional[int] = None, op: Optional[Op] = None) -> "_Calling":
        """Run one call into the engine: what it raises is the engine's (a crash at op ``index``), except a
        ``TypeError`` raised in this repository's code or at the call itself (the adapter's fault).

        A plain class rather than a generator context manager: op-level targets make tens of calls per
        example, and entering a generator-based one costs several times as much."""
        return _Calling(self, what, index, op)

    def from_engine(self, error: BaseException) -> bool:
        """Was ``error`` raised in the engine's Python files (rather than this repository's)?"""
        try:
            root = os.path.dirname(os.path.abspath(importlib.import_module(self.package).__file__ or ""))
        except Exception:  # noqa: BLE001 - no package: nothing can have come from it
            return False
        return raised_inside(error, root, repo_root())

    def fault(self, error: BaseException, what: str = "") -> HarnessFault:
        """The adapter failed: a harness fault naming the release, the exception and where it was raised."""
        where = ""
        tb = error.__traceback__
        while tb is not None:
            where = f" ({os.path.relpath(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno})"
            tb = tb.tb_next
        first = (str(error).splitlines() or [""])[0][:300]
        return HarnessFault(self.name, f"adapter error on {self.distribution} {self.release}"
                                       f"{': ' + what if what else ''}: {type(error).__name__}: {first}{where}")


class CountsLaunches:
    """A kernel target (``triton:*``, ``flex:*``, ``gpu:*``) counts its kernel launches (``launches``, one per
    launch); :meth:`run` puts a case's share and its seconds in the case's stats, which the campaign report turns
    into calls/s (the summary's ``kernel calls:`` line; JSON ``kernel_calls_per_s``). A case that raised made
    launches too; they are not counted: its stats never reach the report. Mixed in before the target's class."""

    launches = 0

    def run(self, case: Case) -> RunStats:
        before, began = self.launches, time.perf_counter()
        stats = super().run(case)  # type: ignore[misc]
        stats.calls, stats.call_seconds = self.launches - before, time.perf_counter() - began
        return stats


def close_enough(got: Any, want: Any, atol: float, rtol: float) -> Optional[str]:
    """``None`` when ``|got - want| <= atol + rtol * |want|`` everywhere (and the shapes agree), else a
    one-line description of the worst element: index, values and error. NaN in ``got`` is never close."""
    g = np.asarray(got, dtype=np.float64)
    w = np.asarray(want, dtype=np.float64)
    if g.shape != w.shape:
        return f"shape {g.shape} != reference {w.shape}"
    err = np.abs(g - w)
    bound = atol + rtol * np.abs(w)
    bad = ~(err <= bound)  # NaN compares False: counted as bad
    if not bad.any():
        return None
    excess = np.where(np.isnan(err), np.inf, err - bound)
    i = np.unravel_index(int(np.argmax(excess)), g.shape)
    return (f"{int(bad.sum())} of {g.size} values off: worst at {tuple(int(x) for x in i)}: got {g[i]:.6g}, "
            f"reference {w[i]:.6g} (|err| {err[i]:.3g} > {atol:g} + {rtol:g}*|ref|)")


#: (probe key) -> how the probe died with the window while the same call without one ran (DESIGN §4): the
#: target stays available and its campaign reproduces the death as a crash finding with a seed.
PROBE_CRASHES: dict = {}


def probe_once(cache: dict, key: Any, probe, *args: Any, plain: Optional[Callable[[], Any]] = None) -> None:
    """Run an adapter's probe once per process and key; re-raise what it raised (an ``Unavailable``) each time.

    ``plain`` is the same probe with the window disabled, where the adapter has one: a windowed probe that dies
    (an exception, or :class:`~impl.engines.EngineIncompatible`) is re-run as ``plain``; if that runs, the
    engine drives fine and died on the window only — a crash for the campaign to find, recorded in
    :data:`PROBE_CRASHES`, never "unavailable" (:func:`impl.errors.window_probe`). A missing package
    (:class:`~impl.engines.EngineUnavailable` that is not an incompatibility) is never re-run."""
    from impl.engines import EngineIncompatible, EngineUnavailable
    from impl.errors import Unavailable, window_probe

    if key not in cache:
        raised: list[BaseException] = []

        def died(run) -> Optional[str]:
            try:
                run()
            except EngineUnavailable as e:
                if not isinstance(e, EngineIncompatible):
                    raise
                raised.append(e)
                return str(e)
            except Exception as e:  # noqa: BLE001 - how it died, kept as the reason
                raised.append(e)
                return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            return None

        try:
            if plain is None:
                cache[key] = None if died(lambda: probe(*args)) is None else raised[0]
            else:
                crash = window_probe(lambda: died(lambda: probe(*args)), lambda: died(plain))
                cache[key] = None
                if crash is not None:
                    PROBE_CRASHES[key] = crash
        except Unavailable as e:  # not installed, or died without the window too (window_probe names both)
            cache[key] = e
    if cache[key] is not None:
        raise cache[key]


def rows_of(findings: Sequence[Finding], kind: str) -> list[Finding]:
    """The rows of a findings table that name ``kind`` (every release): for the notes' release tables."""
    return [f for f in findings if kind in f.kinds]
