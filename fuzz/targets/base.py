"""What every target is: the :class:`Target` a campaign drives, the outcomes it raises, and the
usage error :class:`TargetError` a ``--target`` value that names no usable target raises.

A :class:`Target` runs one test case — a window and an op list — and raises at the
first op that goes wrong. The exception says which of DESIGN §4's outcomes it is:

* :class:`Mismatch` — contents or logits differ from the spec (a finding);
* :class:`Crash` — the implementation under test died, aborted, timed out, or raised
  on a spec-valid op (a finding);
* :class:`HarnessFault` — the harness itself failed: database, filesystem, adapter
  setup, an unsupported third-party release (never a seed, exit 3).

Findings are saved as seeds and make a campaign exit 1; a harness fault is not
evidence about the implementation, so saving it as a seed would be a false bug report.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from fuzz.ops import Case, Op


class TargetError(ValueError):
    """A ``--target`` value that names no usable target (a usage error: exit 2).

    A target that exists but cannot run on this machine raises :class:`impl.errors.Unavailable`
    instead; :func:`fuzz.targets.registry.resolve` turns that into this error for ``--target``."""


class TargetFault(TargetError):
    """A ``--target`` whose adapter cannot drive the installed release (an API it needs is missing or changed:
    ``HFIncompatible``, ``EngineIncompatible``): a harness fault naming the release and the API (exit 3), never
    a usage error and never a finding — what a release newer than the matrix breaks."""


class Mismatch(AssertionError):
    """The target disagreed with the spec; the message says after which op and how."""

    def __init__(self, target: str, index: int, op: Op | None, detail: str):
        self.target, self.index, self.op, self.detail = target, index, op, detail
        where = "after reset" if op is None else f"after op #{index} ({op.text})"
        super().__init__(f"{target}: {where}: {detail}")

    def __reduce__(self):  # the outcomes cross process boundaries (an isolated child's replies)
        return rebuild, (type(self), (self.target, self.index, self.op, self.detail), {})


#: Failure kinds, as reports and :class:`fuzz.results.Failure` name them.
MISMATCH, CRASH, HARNESS = "mismatch", "crash", "harness"
#: A paged sequence holding more blocks than the freeing rule's bound (:class:`fuzz.paged.checks.OverBound`).
EFFICIENCY = "efficiency"
#: Memory a reset, free or destroy should have returned, growing with the ops (DESIGN §4; :mod:`fuzz.phases.leaks`).
LEAK = "leak"
#: The kinds that are findings (saved as seeds, exit 1).
FINDINGS = (MISMATCH, CRASH, EFFICIENCY, LEAK)


class Crash(Exception):
    """The implementation under test died (a signal, an abort), timed out, broke a memory limit, or
    raised on a spec-valid op. ``index``/``op`` name the op that was running (``-1``/``None``: the
    reset that starts the case; ``None``/``None``: a target that does not publish its op, see
    :attr:`Target.op_slot`); ``signal`` is the signal's name when the process died of one."""

    def __init__(self, target: str, index: int | None, op: Op | None, detail: str, *, signal: str | None = None):
        self.target, self.index, self.op, self.detail, self.signal = target, index, op, detail, signal
        where = ("while running the case" if index is None else
                 "at the opening reset" if op is None else f"at op #{index} ({op.text})")
        super().__init__(f"{target}: {signal + ' ' if signal else ''}{where}: {detail}")

    def __reduce__(self):
        return rebuild, (type(self), (self.target, self.index, self.op, self.detail), {"signal": self.signal})


def crash_from(target: str, index: int | None, op: Op | None, error: BaseException, where: str = "") -> Crash:
    """The :class:`Crash` an exception the implementation raised at op ``index`` stands for (``-1``: the opening
    reset; ``None``: not at an op of a case, e.g. in the bulk phase); ``where`` names a live instance."""
    return Crash(target, index, op, f"{where + ': ' if where else ''}raised {raised(error)}")


# ---------------------------------------------------------------------------
# The boundary around code under test


class HarnessInterrupt(KeyboardInterrupt):
    """A real Ctrl-C or SIGTERM delivered to kvwindow: raised only by kvwindow's own signal handlers
    (:class:`fuzz.workers.StopRequest`, :func:`interrupt_handlers`). Any other ``KeyboardInterrupt`` — or
    ``SystemExit``, ``GeneratorExit`` — that comes out of a call into code under test was raised by that
    code: its outcome (a crash finding), never the harness's exit. ``signum`` is the signal's number."""

    def __init__(self, signum: int = 2):
        self.signum = signum
        super().__init__(f"signal {signum}")


class SubjectExit(Exception):
    """Code under test raised a ``BaseException`` that is not an ``Exception`` (``SystemExit``, a
    ``KeyboardInterrupt`` of its own, ``GeneratorExit``): carried as an ordinary exception, so every
    ``except Exception`` of the harness classifies it as the subject's outcome (a crash)."""

    def __init__(self, original: BaseException):
        self.original_type = type(original).__name__
        super().__init__(f"{self.original_type}({original})" if str(original) else self.original_type)


def raised(error: BaseException) -> str:
    """``Type: message`` of what code under test raised (a :class:`SubjectExit` names the original type)."""
    if isinstance(error, SubjectExit):
        return f"{error} (a BaseException, not an error: code under test tried to end the process)"
    return f"{type(error).__name__}: {error}"


def subject_call(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """``fn(*args, **kw)``, a call into code under test: a ``BaseException`` it raises that is not an ``Exception``
    comes out as :class:`SubjectExit`; only the harness's own :class:`HarnessInterrupt` passes through."""
    try:
        return fn(*args, **kw)
    except Exception:
        raise
    except HarnessInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - SystemExit, KeyboardInterrupt, GeneratorExit of the subject's
        raise SubjectExit(e) from e


def escaped(target: str, error: BaseException) -> "Crash":
    """The crash a ``BaseException`` that is not an ``Exception`` stands for when it surfaces in a target's run outside
    a guarded call (from an object the code under test returned: a generator, an array-like): the harness raises
    none of them, and the harness's own interrupt is :class:`HarnessInterrupt`, never passed here."""
    return Crash(target, None, None, f"raised {raised(SubjectExit(error))}")


class Guarded:
    """Code under test seen through :func:`subject_call`: every attribute read and every method call of the wrapped
    object (a ``py:`` cache, a ``paged-py:`` pool) is a boundary. Everything else it does is the object's own."""

    __slots__ = ("_kv_obj",)

    def __init__(self, obj: Any):
        object.__setattr__(self, "_kv_obj", obj)

    def __getattr__(self, name: str) -> Any:
        value = subject_call(getattr, object.__getattribute__(self, "_kv_obj"), name)
        if callable(value):
            return functools.partial(subject_call, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        subject_call(setattr, object.__getattribute__(self, "_kv_obj"), name, value)

    def __repr__(self) -> str:
        return f"Guarded({object.__getattribute__(self, '_kv_obj')!r})"


def guarded(factory: Callable[[], Any]) -> Callable[[], Any]:
    """A factory of :class:`Guarded` instances of ``factory`` (its constructor is a boundary too); the class
    attributes the harness reads (``dtypes``, ``validates_positions``, ...) stay readable on it."""

    @functools.wraps(factory, updated=())
    def build() -> Guarded:
        return Guarded(subject_call(factory))

    build.subject_class = factory  # type: ignore[attr-defined]
    return build


@contextlib.contextmanager
def interrupt_handlers(signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """While open, SIGINT and SIGTERM raise :class:`HarnessInterrupt` (in the main thread; elsewhere nothing changes),
    so a real Ctrl-C or SIGTERM is told apart from a ``KeyboardInterrupt`` the code under test raises; the previous
    handlers come back on exit (a test runner calling ``main()`` keeps its own)."""
    def handle(signum, frame):
        raise HarnessInterrupt(signum)

    old: dict[int, Any] = {}
    try:
        for s in signals:
            old[s] = signal.signal(s, handle)
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def rebuild(cls: type, args: tuple, kwargs: dict) -> BaseException:
    """``cls(*args, **kwargs)``: how the outcome exceptions are unpickled (their constructors take parts)."""
    return cls(*args, **kwargs)


def run_at_once(drive: Callable[[int], None], n: int, name: str) -> None:
    """``drive(0) .. drive(n - 1)`` in ``n`` daemon threads started together, returning when all have ended (the
    threads phase: a cache's live instances, an engine's streams on one shared object). ``drive`` keeps its own
    outcome: an exception escaping it would be lost with its thread."""
    threads = [threading.Thread(target=drive, args=(k,), name=f"{name}-{k}", daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class HarnessFault(Exception):
    """The harness failed, not the implementation: an example database that went away, an unwritable
    output, an adapter that cannot drive the installed third-party release. ``reason`` is one line."""

    def __init__(self, target: str, reason: str):
        self.target, self.reason = target, reason
        super().__init__(f"{target}: harness fault: {reason}")

    def __reduce__(self):
        return rebuild, (type(self), (self.target, self.reason), {})


def failure_kind(error: BaseException) -> str:
    """The outcome an exception raised by :meth:`Target.run` stands for.

    A target that cannot tell where an exception came from raises it unclassified;
    such an exception counts as a crash of the implementation (the conservative
    reading: a finding is shown and can be replayed, a harness fault is not kept)."""
    if isinstance(error, HarnessFault):
        return HARNESS
    if isinstance(error, Mismatch) and getattr(error, "efficiency", False):
        return EFFICIENCY
    if isinstance(error, Mismatch) and getattr(error, "leak", False):
        return LEAK
    if isinstance(error, Mismatch):
        return MISMATCH
    return CRASH


@dataclass
class RunStats:
    """What one case exercised: tokens pushed (a chunk of k is k) and the boundary phases it passed."""

    tokens: int = 0
    phases: set[str] = field(default_factory=set)
    #: Known findings (``docs/findings/<id>.md``) the case hit: id -> ``True`` reproduced (the target did
    #: not raise), ``False`` not reproduced, ``None`` skipped (not run).
    known: dict[str, bool | None] = field(default_factory=dict)
    #: Paged targets: efficiency observations (reported, not failed: :data:`fuzz.paged.checks.EFFICIENCY`)
    #: -> how many times the case made each, and the op index it first did.
    efficiency: dict[str, int] = field(default_factory=dict)
    efficiency_first: dict[str, int] = field(default_factory=dict)
    #: Kernel targets (``triton:*``, ``gpu:*``): kernel launches the case made and the seconds it took to run
    #: (what the report's calls/s is made of; a launch costs seconds under Triton's interpreter).
    calls: int = 0
    call_seconds: float = 0.0


class Target(ABC):
    """One implementation under test. ``name`` is what ``--target`` takes to build it again."""

    name: str = "?"
    #: ``cache`` targets compare contents; ``model`` targets also compare logits.
    kind: str = "cache"
    #: The largest window the target accepts (``None``: no limit of its own).
    window_max: int | None = None
    #: Largest stream length per case the campaign should generate (model targets are slower).
    max_tokens: int | None = None
    #: Where :meth:`run` publishes the index of the op it is running (``slot[OP] = i``; ``-1`` the
    #: opening reset), so a supervising process can name the op a native death happened at
    #: (:mod:`fuzz.targets.isolated`; the layout: :mod:`fuzz.targets.progress`). ``None`` outside a
    #: supervised child: the loop skips the write.
    op_slot = None
    #: The shared checksum buffer a trace call writes its per-push progress into while supervised
    #: (:func:`fuzz.targets.progress.trace_buffer`), or ``None``.
    trace_sums = None
    #: Whether :meth:`run` writes :attr:`op_slot` (a target that does not is named "while running the case").
    publishes_ops: bool = False
    #: The ``bad:KIND`` ops this target's error contract takes (:mod:`fuzz.targets.ring_errors`).
    bad_kinds: tuple[str, ...] = ()
    #: Whether it has written-up known findings (:meth:`known_hits` can name some).
    knows_findings: bool = False
    #: Whether a case may drive several live instances of it at once (:class:`fuzz.ops.At`).
    instances: bool = False
    #: Whether the payload width (floats per key and value) is a dimension of its cases (cache targets).
    widths: bool = False
    #: Every payload width it takes is a multiple of this (a layout of heads x head dim).
    width_multiple: int = 1
    #: The payload dtypes it declares it stores exactly (drawn among them); empty: dtype is no dimension.
    dtypes: tuple[str, ...] = ()

    def setting_up(self):
        """``with self.setting_up():`` around one-time setup inside :meth:`run` (a model built, converted or
        compiled for a new window; a first call per shape): a supervisor times it apart from the ops
        (:func:`fuzz.targets.progress.setting_up`), so a slow setup on a busy machine is never a hang."""
        from fuzz.targets.progress import setting_up

        return setting_up(self.op_slot)

    def accepts(self, case: Case) -> str | None:
        """``None`` if the case fits this target, else why not (a window above ``window_max``, a
        bad call its error contract does not cover)."""
        paged = getattr(case, "paged", False)
        if paged != (self.kind == "paged"):
            return (f"{self.name} is not a paged cache: a paged case (sequences in a block pool) runs on the paged "
                    "targets (paged-c, paged-c:PATH.so, paged-py:module:Class)") if paged else \
                f"{self.name} is a paged cache: it takes paged cases, not a ring case"
        if paged:  # what follows reads a ring case's structure; a paged target's own accepts decides
            return None
        if self.window_max is not None:
            widest = case.widest_window()
            if widest > self.window_max:
                return f"window {widest} exceeds {self.name}'s maximum {self.window_max}"
        if self.max_tokens is not None and case.tokens > self.max_tokens:
            return f"{case.tokens} tokens exceed {self.name}'s maximum {self.max_tokens} per case"
        if self.widths and self.width_multiple > 1:
            bad = [w for w in (case.instance_width(k) for k in range(case.instance_count))
                   if w is not None and w % self.width_multiple]
            if bad:
                return f"payload width {bad[0]} is not a multiple of {self.width_multiple}, as {self.name} needs"
        if case.instances and not self.instances:
            return (f"the case drives {case.instance_count} live instances; {self.name} is driven as one "
                    "(its streams are models or sessions, not caches a case builds twice)")
        extra = case.bad_kinds().difference(self.bad_kinds)
        if extra:
            takes = f"it takes {', '.join('bad:' + k for k in self.bad_kinds)}" if self.bad_kinds else \
                "it has no error contract (a py: class gets one by declaring validates_positions = True)"
            calls = "is not a call" if len(extra) == 1 else "are not calls"
            return f"{', '.join(sorted('bad:' + k for k in extra))} {calls} {self.name} can take; {takes}"
        return None

    def configured(self, config) -> "Target":
        """This target as ``config`` (a :class:`fuzz.config.CampaignConfig`) asks, e.g. with its payload
        width and dtype; targets with nothing to configure return themselves."""
        return self

    def known_hits(self, case: Case) -> set[str]:
        """The ids of the known findings (``docs/findings/``) ``case`` would hit on this target, decided from
        the case alone before it runs (:class:`fuzz.targets.known.KnownFindingsTarget`); empty: none."""
        return set()

    def finding_links(self) -> dict[str, dict[str, str]]:
        """Where the known findings that apply here are written up (:class:`fuzz.targets.known.KnownFindingsTarget`)."""
        return {}

    def tolerances(self) -> dict[str, dict[str, float]]:
        """The explicit tolerances a logits target compares with (empty: everything is exact)."""
        return {}

    def probe_crashes(self) -> list:
        """The deaths of this target's availability probes on the sliding window (they ran without it), each a
        :class:`fuzz.targets.probes.ProbeCrash`: outcomes of its campaign (DESIGN §4), never "unavailable"."""
        return []

    @abstractmethod
    def run(self, case: Case) -> RunStats:
        """Drive fresh streams through ``case``; raise :class:`Mismatch` at the first disagreement."""

    def versions(self) -> dict[str, str]:
        """Versions of third-party code this target exercises (for campaign reports)."""
        return {}
