"""The ``threads`` phase: 2-4 independent instances of a target driven from as many threads at once, each thread its
own stream, checked after each of its ops (:meth:`fuzz.targets.cache.CacheTarget.run` of a case with ``threads``).

It applies where independence across threads is promised: every ``c:`` library (``ringkv.h``: handles are
independent), a ``py:`` class that declares ``thread_safe = True`` (DESIGN §4 promises nothing by default), and an
engine target whose engine documents concurrent calls on ONE engine object (``EngineTarget.thread_safe``, with the
citation in ``threads_doc``: ``ort:*``, ONNX Runtime's ``InferenceSession::Run``). There the threads share that one
object (the promise: one session, several callers) and each runs a stream of its own, checked as the single-thread
path checks it (``EngineTarget._run_threads``); an engine target without the promise gets "n/a" naming the document.
State shared between handles that one thread never shows — a static scratch buffer, a global staging slab — shows
only when two threads are inside the library at once, so the cases aim at long overlaps: every thread pushes long
chunks (up to ``W`` tokens, all written, at windows up to 1 024) of wide payloads (64-256 floats), so each call spends tens of
microseconds inside the library while the others run.

A race shows by chance, so it is found by repetition: the phase spends its budget share (:attr:`Threads.share`,
0.15 beside ``generated``'s 0.7 and ``instances``' 0.3: about 13 % of the repeating phases' time) on many such cases — each of ``2-4 threads x 4-12 ops``, so a 60 s
campaign sends thousands of concurrent ops (the phase record's ``examples`` and ``tokens`` say how many) — and
Hypothesis does not shrink them (a smaller case that passes once proves nothing about a race). The saved seed
records the thread count (``"threads": N``); ``kvwindow replay`` runs it threaded again, and a racy finding is
confirmed by replaying it until it fails (:func:`confirm`: ``CONFIRM_RUNS`` runs, the count that failed reported).
"""

from __future__ import annotations

from typing import Any, Optional

from hypothesis import strategies as st

from fuzz.ops import Case, Chunk, Instance, Push, at
from fuzz.phases.base import HypothesisPhase
from fuzz.phases.context import Campaign
from fuzz.phases.reduce import CONFIRM_RUNS, confirm  # noqa: F401 - where a race is confirmed (by repetition)
from fuzz.strategies import window_cap, windows

#: Payload widths a threaded case draws: wide ones keep each copy (and so each overlap) long.
THREAD_WIDTHS = (256, 128, 64, 4)


#: Windows a threaded case draws: a chunk writes at most W slots, so a large window keeps a thread inside the
#: library longest per call (1 024 at width 256: ~2 MB copied per op); the small ones keep the boundaries.
THREAD_WINDOWS = (1024, 257, 63, 5)


@st.composite
def thread_cases(draw, window_max: int, width: Optional[int] = None, drawn_width: bool = True,
                 max_tokens: Optional[int] = None, per_thread: bool = False) -> Case:
    """A case of 2-4 instances of one window and width, one thread each, each with 4-12 ops: chunks that are
    written whole (``W/2 .. W`` tokens) three times in four, longer ones (``W + 1 .. 3W + 3``: eviction inside
    the call) or a push otherwise. ``max_tokens`` bounds the whole case, or each thread's stream (``per_thread``:
    an engine target's bound is per stream, each thread's stream a case of its own)."""
    n = draw(st.integers(2, 4))
    pw = width if width is not None else draw(st.sampled_from(THREAD_WIDTHS)) if drawn_width else None
    cap = window_cap(window_max, pw)
    w = min(draw(st.sampled_from(THREAD_WINDOWS)), cap)
    ops = []
    tokens = 0
    for k in range(n):
        if per_thread:
            tokens = 0
        for _ in range(draw(st.integers(4, 12))):
            pick = draw(st.integers(0, 7))
            op = Push() if pick == 7 else Chunk(draw(st.integers(w + 1, 3 * w + 3))) if pick == 6 else \
                Chunk(draw(st.integers(max(1, w // 2), w)))
            if max_tokens is not None and tokens + op.tokens > max_tokens:
                break
            tokens += op.tokens
            ops.append(at(k, op))
    return Case(w, tuple(ops), pw, None, tuple(Instance(w) for _ in range(n - 1)), threads=True)


class Threads(HypothesisPhase):
    name = "threads"
    share = 0.15
    salt = 0x3_0000
    #: Hypothesis does not shrink a race (see the module docstring).
    shrinks = False

    def not_applicable(self, camp: Campaign) -> Optional[str]:
        if camp.config.tester == "uniform":
            return "the uniform tester drives one instance"
        if _engine(camp.target):
            if not camp.target.thread_safe:
                return f"one engine object is not driven from several threads at once: {camp.target.threads_doc}"
            return None
        if not camp.target.instances:
            return "it is driven as one model or session per stream (not a cache a case builds twice)"
        if not getattr(camp.target, "thread_safe", False):
            return ("no promise of independence across threads (a py: class declares thread_safe = True; "
                    "c: libraries promise it in ringkv.h)")
        return None

    def strategy(self, camp: Campaign) -> Any:
        t, cfg = camp.target, camp.config
        return thread_cases(camp.window_max, width=cfg.width if t.widths else None,
                            drawn_width=bool(t.widths) and cfg.width is None, max_tokens=t.max_tokens,
                            per_thread=_engine(t))


def _engine(target: Any) -> bool:
    """An engine target (:class:`fuzz.targets.engines.base.EngineTarget`): its threads share ONE engine object,
    each thread running a stream of its own, where the engine's documentation promises that."""
    return hasattr(target, "threads_doc")
