"""``CacheTarget``: the op loop and contents check for any cache, and the one adapter from the tuple
protocol of DESIGN §4 to the arrays the loop runs on.

The loop hands a cache arrays and reads arrays back: the oracle's entries are
slices of :class:`~fuzz.oracle.SpecStream`'s history (positions ``int64[n]``,
keys and values ``float32[n, width]``), a chunk is pushed with one
``push_arrays`` call, and the contents come back from ``read_arrays`` and are
compared with ``lastWindow W history`` by array equality — positions, then
payloads — after every op. The entry that differs is looked for only once a
difference is known.

A cache that speaks only the tuple protocol (``reset``/``push``/``push_chunk``/
``contents``: every ``py:`` class, ``pyring``, the Python mutants) is wrapped in
:class:`TupleCache` at this boundary; :class:`impl.ring.CRing` (``ring-c``, every
``c:`` library) speaks the array protocol itself.

Bad calls (``bad:KIND`` ops) go to the target's error contract
(:mod:`fuzz.targets.ring_errors`): the C header's for C targets, ``validates_positions``
for a Python class that declares it. The payload width and dtype come from the
campaign (``--width``, ``--dtype``: :meth:`CacheTarget.configured`).
"""

from __future__ import annotations

import copy
import importlib
import os
import sys
from typing import Any, Callable

import numpy as np

from fuzz.ops import Case, Chunk, Op, Push, Reset, target_of
from fuzz.oracle import PAYLOAD_WIDTH, SpecStream, check_dtype, describe_difference, payload_difference
from fuzz.targets.base import run_at_once, Crash, HarnessFault, HarnessInterrupt, Mismatch, RunStats, Target, TargetError, \
    crash_from, escaped, guarded, raised, subject_call
from fuzz.targets.progress import OP
from fuzz.targets.ring_errors import py_contract_for

PROTOCOL_METHODS = ("reset", "push", "push_chunk", "contents")
#: What a cache needs beyond ``reset``/``push`` to be driven with arrays directly.
ARRAY_METHODS = ("push_arrays", "read_arrays")

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


def check_protocol(obj: Any, where: str) -> None:
    """Fail with a message naming the missing method of the Python target protocol."""
    missing = [m for m in PROTOCOL_METHODS if not callable(getattr(obj, m, None))]
    if missing:
        raise TypeError(
            f"{where} does not implement the target protocol: missing {', '.join(missing)} "
            f"(needs reset(window), push(pos, key, value), push_chunk(entries), contents())"
        )


class UnreadableContents(ValueError):
    """``contents()`` returned something that is not a list of ``(pos, key, value)`` of the pushed width."""


class TupleCache:
    """A tuple-protocol cache (DESIGN §4) seen through the array protocol: the one adapter.

    Chunks become lists of ``(pos, key, value)`` with ``int`` positions and 1-D rows;
    ``contents()`` becomes positions ``int64[m]`` and payloads ``float64[m, width]``
    (float64, so a payload that is not exactly what was pushed cannot round onto it).
    Rows are handed over as float32 arrays, or float16 ones for a ``float16`` campaign
    (numpy has no bfloat16: a ``bfloat16`` campaign hands float32 rows holding bfloat16 values).
    """

    def __init__(self, cache: Any, width: int, dtype: str = "float32"):
        self.cache, self.width = cache, width
        self.wire = np.float16 if dtype == "float16" else None

    def reset(self, window: int) -> None:
        self.cache.reset(window)

    def push(self, pos: int, key: np.ndarray, value: np.ndarray) -> None:
        if self.wire is not None:
            key, value = key.astype(self.wire), value.astype(self.wire)
        self.cache.push(pos, key, value)

    def push_arrays(self, positions: np.ndarray, keys: np.ndarray, values: np.ndarray) -> None:
        if self.wire is not None:
            keys, values = keys.astype(self.wire), values.astype(self.wire)
        self.cache.push_chunk([(p, keys[i], values[i]) for i, p in enumerate(positions.tolist())])

    def read_arrays(self) -> Arrays:
        contents = self.cache.contents()
        try:
            entries = list(contents)
        except TypeError:
            raise UnreadableContents(f"contents() returned {type(contents).__name__}, "
                                     "not a list of (pos, key, value)") from None
        width = self.width
        pos = np.array([int(e[0]) for e in entries], dtype=np.int64)
        rows = []
        for label, idx in (("key", 1), ("value", 2)):
            out = np.empty((len(entries), width), dtype=np.float64)
            for i, e in enumerate(entries):
                x = e[idx]
                if hasattr(x, "detach"):  # a torch tensor, without importing torch here
                    x = x.detach().cpu().double().numpy()  # any float dtype, bfloat16 too, exactly
                row = np.asarray(x, dtype=np.float64).reshape(-1)
                if row.shape[0] != width:
                    raise UnreadableContents(f"{label} of position {int(e[0])} has {row.shape[0]} floats, "
                                             f"the pushed one had {width}")
                out[i] = row
            rows.append(out)
        return pos, rows[0], rows[1]


def array_cache(cache: Any, width: int, dtype: str = "float32") -> Any:
    """``cache`` itself when it speaks the array protocol, else wrapped in :class:`TupleCache`."""
    if all(callable(getattr(cache, m, None)) for m in ARRAY_METHODS):
        return cache
    return TupleCache(cache, width, dtype)


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    """Array equality: bit for bit when the dtypes agree, by value across dtypes (exact upcast)."""
    if got.shape != want.shape:
        return False
    if got.dtype == want.dtype:
        return got.tobytes() == want.tobytes()
    return bool(np.array_equal(got, want))


def compare_arrays(got: Arrays, want: Arrays) -> str | None:
    """``None`` when the contents ``got`` equal ``want`` (positions, then keys and values), else a
    one-line difference naming the first differing position."""
    gp, gk, gv = got
    wp, wk, wv = want
    if not _same(gp, wp):
        return describe_difference(gp.tolist(), wp.tolist())
    if _same(gk, wk) and _same(gv, wv):
        return None
    return payload_difference(wp, (("key", gk, wk), ("value", gv, wv)))


class CacheTarget(Target):
    """Fuzz any cache: every op is applied to it and to :class:`SpecStream`, and its contents
    must equal ``lastWindow W history`` after each one.

    The outcome boundary of DESIGN §4: an exception raised by a call into the cache
    (``reset``/``push``/``push_arrays``/``read_arrays``, and what a subclass reads of it) on a
    spec-valid op is a :class:`~fuzz.targets.base.Crash` naming the op; building the cache or
    anything the harness does itself (the oracle, the comparison, an error contract's own
    bookkeeping) that raises is a :class:`~fuzz.targets.base.HarnessFault`. The ``try`` blocks
    cost nothing until they catch.

    Payload width and dtype are dimensions of every case (DESIGN §1): a case's own ``width`` /
    ``dtype`` win, else the target's (the campaign's ``--width``/``--dtype``, :meth:`configured`);
    each instance of a case is a cache built for its own width. A case with several instances
    (:class:`~fuzz.ops.At` ops) builds them all first and keeps them live together; every op goes to
    one of them, and after every op *every* instance is read back against its own spec stream, so
    state one instance shares with another shows as soon as it leaks.

    ``errors`` is the error contract bad calls go to (:mod:`fuzz.targets.ring_errors`), or
    ``None``: the target takes no ``bad:`` op. A bad call's documented refusal (a status, or the
    exception ``validates_positions`` promises) is the expected outcome, checked by the contract:
    a wrong status or a changed state is a :class:`~fuzz.targets.base.Mismatch`. Subclasses with
    ``traced = True`` (the C ring) push a run of pushes through one trace call: :meth:`_push_run`.
    """

    publishes_ops = True
    instances = True
    #: A run of consecutive pushes goes through :meth:`_push_run` (after its first push).
    traced = False
    #: Whether independent instances may be driven from several threads at once (a case with ``threads``): the
    #: C header promises it for handles; a ``py:`` class promises it with a class attribute ``thread_safe = True``
    #: (by default nothing is promised, and no threaded case is sent).
    thread_safe = False

    def __init__(self, name: str, factory: Callable[[], Any], *, width: int = PAYLOAD_WIDTH,
                 window_max: int | None = None, dtype: str = "float32", errors: Any = None,
                 fixed_payload: bool = False, dtypes: tuple[str, ...] = ("float32",), width_multiple: int = 1):
        self.name, self.factory, self.width, self.dtype = name, factory, width, check_dtype(dtype)
        self.window_max = window_max
        self.errors = errors
        self.bad_kinds = tuple(errors.kinds) if errors is not None else ()
        #: The cache's payload layout is its own (``cuda-ring``: heads x head dim): widths and dtypes do not apply.
        self.fixed_payload = fixed_payload
        self.widths = not fixed_payload
        self.width_multiple = width_multiple
        self.dtypes = () if fixed_payload else tuple(check_dtype(d) for d in dtypes)

    def configured(self, config: Any) -> "CacheTarget":
        """This target with the campaign's pinned payload width and dtype (``--width``, ``--dtype``; a
        drawn dimension, ``None``, keeps the target's default for cases that do not name one)."""
        width = getattr(config, "width", None) or self.width
        dtype = getattr(config, "dtype", None) or self.dtype
        if self.fixed_payload or (width, dtype) == (self.width, self.dtype):
            return self
        other = copy.copy(self)
        other.width, other.dtype = width, check_dtype(dtype)
        return other

    def new_cache(self, width: int | None = None) -> Any:
        """A fresh cache under test (a Python class is built with no arguments: it takes the width of the
        first payload it is pushed)."""
        return self.factory()

    def run(self, case: Case) -> RunStats:
        try:
            return self._run(case)
        except (Mismatch, Crash, HarnessFault, HarnessInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - not raised by the cache: the harness failed
            raise HarnessFault(self.name, f"{type(e).__name__} in the harness: {e}") from e
        except BaseException as e:  # noqa: BLE001 - a SystemExit from what the cache returned (a generator)
            raise escaped(self.name, e) from e

    def _build(self, case: Case, k: int) -> tuple[Any, Any, SpecStream]:
        """Instance ``k`` of ``case``: the raw cache, its array view and its spec stream."""
        width = (None if self.fixed_payload else case.instance_width(k)) or self.width
        dtype = (None if self.fixed_payload else case.dtype) or self.dtype
        try:
            raw = self.new_cache(width)
        except Exception as e:  # noqa: BLE001
            raise HarnessFault(self.name, f"cannot build the cache: {type(e).__name__}: {e}") from e
        return raw, array_cache(raw, width, dtype), SpecStream(case.instance_window(k), width, dtype, k)

    def _run(self, case: Case) -> RunStats:
        if case.threads:
            return self._run_threads(case)
        if case.instances:
            return self._run_instances(case)
        raw, cache, spec = self._build(case, 0)
        stats = RunStats()
        phases = stats.phases
        slot = self.op_slot
        try:
            cache.reset(case.window)
        except Exception as e:  # noqa: BLE001 - the cache raised on a spec-valid op
            raise crash_from(self.name, -1, None, e) from e
        self._check(raw, cache, spec, -1, None)
        ops = case.ops
        traced, skip = self.traced, 0
        for i, op in enumerate(ops):
            if skip:  # pushed by the last run's trace
                skip -= 1
                continue
            if slot is not None:
                slot[OP] = i
            kind = type(op)
            self._apply(raw, cache, spec, i, op, op)
            phases |= spec.apply(op)
            stats.tokens += op.tokens
            self._check(raw, cache, spec, i, op)
            if traced and kind is Push:
                skip = self._push_run(raw, cache, spec, ops, i + 1, stats)
        return stats

    def _live(self, case: Case) -> list:
        """Every instance of ``case`` built and reset to its window, all checked empty: where a multi-instance
        case starts, threaded or not."""
        live = [self._build(case, k) for k in range(case.instance_count)]
        for k, (raw, cache, spec) in enumerate(live):
            try:
                cache.reset(spec.window)
            except Exception as e:  # noqa: BLE001 - the cache raised on a spec-valid op
                raise crash_from(self.name, -1, None, e, f"instance @{k}") from e
        self._check_all(live, -1, None)
        return live

    def _run_instances(self, case: Case) -> RunStats:
        """Every instance built and reset first, then the ops interleaved; all of them checked after each op."""
        live = self._live(case)
        stats = RunStats()
        slot = self.op_slot
        for i, op in enumerate(case.ops):
            if slot is not None:
                slot[OP] = i
            k, bare = target_of(op)
            raw, cache, spec = live[k]
            self._apply(raw, cache, spec, i, op, bare)
            stats.phases |= spec.apply(bare)
            stats.tokens += op.tokens
            self._check_all(live, i, op)
        return stats

    def _run_threads(self, case: Case) -> RunStats:
        """Every instance built and reset first, then each instance's ops in a thread of its own, all released at
        once by a barrier; each thread checks its own instance after each of its ops. The first failure (by
        op index) is raised; a thread stops at the first failure any thread saw. A race shows only by chance,
        so a threaded case is drawn many times (:mod:`fuzz.phases.threads`)."""
        import threading

        live = self._live(case)
        mine: list[list[tuple[int, Op, Op]]] = [[] for _ in live]
        for i, op in enumerate(case.ops):
            k, bare = target_of(op)
            mine[k].append((i, op, bare))
        stats = RunStats()
        errors: list[tuple[int, BaseException]] = []
        lock, gate, stop = threading.Lock(), threading.Barrier(len(live)), threading.Event()

        def drive(k: int) -> None:
            raw, cache, spec = live[k]
            try:
                gate.wait(timeout=60)
                for i, op, bare in mine[k]:
                    if stop.is_set():
                        return
                    self._apply(raw, cache, spec, i, op, bare)
                    phases = spec.apply(bare)
                    try:
                        self._check(raw, cache, spec, i, op)
                    except Mismatch as e:
                        raise Mismatch(self.name, i, op, f"instance @{k} (thread {k} of {len(live)}, all at "
                                                         f"once): {e.detail}") from None
                    with lock:
                        stats.phases |= phases
                        stats.tokens += op.tokens
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                with lock:
                    errors.append((getattr(e, "index", None) or 0, e))
                stop.set()

        run_at_once(drive, len(live), "kvwindow-instance")
        if errors:
            raise min(errors, key=lambda e: e[0])[1]
        return stats

    def _check_all(self, live: list, i: int, op: Op | None) -> None:
        for k, (raw, cache, spec) in enumerate(live):
            try:
                self._check(raw, cache, spec, i, op)
            except Mismatch as e:
                raise Mismatch(self.name, i, op, f"instance @{k}: {e.detail}") from None

    def _apply(self, raw: Any, cache: Any, spec: SpecStream, i: int, op: Op, bare: Op) -> None:
        """Send ``bare`` (op ``i`` of the case, ``op`` as written) to one cache and its spec stream's entries."""
        kind = type(bare)
        if kind is Push or kind is Chunk or kind is Reset:
            entry = None if kind is Reset else spec.next_entry() if kind is Push else spec.new_entries(bare.n)
            try:
                if kind is Push:
                    cache.push(*entry)
                elif kind is Chunk:
                    cache.push_arrays(*entry)
                else:
                    cache.reset(bare.window)
            except Exception as e:  # noqa: BLE001 - the cache raised on a spec-valid op
                raise crash_from(self.name, i, op, e) from e
        else:
            self._bad(raw, cache, spec, i, op, bare)

    def _push_run(self, raw: Any, cache: Any, spec: SpecStream, ops: tuple, a: int, stats: Any) -> int:
        """Push the run of pushes starting at op ``a`` another way; returns how many it pushed."""
        return 0

    def _bad(self, raw: Any, cache: Any, spec: SpecStream, i: int, op: Any, bare: Any = None) -> None:
        """Send bad call ``op`` (``bare``: without its instance address) through the error contract. Its
        refusal is the expected outcome; a wrong status or a changed state is a mismatch; what the
        contract's own code raises is the harness's."""
        bare = op if bare is None else bare
        if bare.kind not in self.bad_kinds:
            raise ValueError(f"{self.name} cannot take {op.text} (its error contract: "
                             f"{', '.join(self.bad_kinds) or 'none'}); Target.accepts says so before a run")
        try:
            problem = self.errors.check(raw, cache, spec, bare.kind)
        except Exception as e:  # noqa: BLE001 - a refusal is caught inside the contract; this is its own failure
            raise HarnessFault(self.name, f"the error contract of op #{i} ({op.text}) raised "
                                          f"{type(e).__name__}: {e}") from e
        if problem is not None:
            raise Mismatch(self.name, i, op, problem)

    def _read(self, cache: Any, i: int, op: Op | None) -> Arrays:
        """The cache's contents; raising on this spec-valid read is a crash, unreadable contents a mismatch."""
        try:
            return cache.read_arrays()
        except UnreadableContents as e:
            raise Mismatch(self.name, i, op, str(e)) from None
        except Exception as e:  # noqa: BLE001 - the cache raised on a spec-valid op
            raise crash_from(self.name, i, op, e) from e

    def _check(self, raw: Any, cache: Any, spec: SpecStream, i: int, op: Op | None) -> None:
        diff = compare_arrays(self._read(cache, i, op), spec.expected())
        if diff is not None:
            raise Mismatch(self.name, i, op, diff)


class AuditedCacheTarget(CacheTarget):
    """:class:`CacheTarget` plus ``cache.audit(spec)`` (a one-line problem or ``None``)."""

    def _check(self, raw: Any, cache: Any, spec: SpecStream, i: int, op: Op | None) -> None:
        super()._check(raw, cache, spec, i, op)
        try:
            problem = raw.audit(spec)
        except Exception as e:  # noqa: BLE001 - the audit reads the implementation's own state
            raise crash_from(self.name, i, op, e) from e
        if problem is not None:
            raise Mismatch(self.name, i, op, problem)


def import_from_cwd(module: str) -> Any:
    """Import ``module`` as ``python -m`` would: the current directory first on ``sys.path`` (the
    console script's ``sys.path[0]`` is the venv's ``bin/``, where no user module lives)."""
    cwd = os.getcwd()
    if not sys.path or os.path.abspath(sys.path[0] or ".") != cwd:
        if cwd in sys.path:
            sys.path.remove(cwd)
        sys.path.insert(0, cwd)
        importlib.invalidate_caches()
    return importlib.import_module(module)


def make_py_class(path: str) -> Target:
    """``--target py:module.path:ClassName``: the user's class, resolved from the current directory
    first, checked for the protocol's methods, and built once now (a class that cannot be built
    with no arguments is a usage error, before anything runs)."""
    spec = "py:" + path
    mod, sep, cls = path.rpartition(":")
    if not sep or not mod or not cls:
        raise TargetError(f"{spec}: expected py:module.path:ClassName")
    try:
        module = subject_call(import_from_cwd, mod)
    except Exception as e:  # noqa: BLE001 - any import failure is the user's to see
        raise TargetError(f"{spec}: cannot import {mod!r} (from {os.getcwd()} or sys.path): {raised(e)}") from e
    factory = getattr(module, cls, None)
    if factory is None:
        raise TargetError(f"{spec}: module {mod!r} has no attribute {cls!r}")
    try:
        check_protocol(factory, spec)
    except TypeError as e:
        raise TargetError(str(e)) from e
    try:
        subject_call(factory)
    except Exception as e:  # noqa: BLE001 - the user's constructor: whatever it raises is the reason
        raise TargetError(f"{spec}: {cls}() failed: {raised(e)} (a target class is built with no "
                          "arguments; wrap it in a subclass whose __init__ supplies them)") from e
    # every call into the instances is a boundary (fuzz.targets.base.Guarded): a SystemExit is a crash
    target = CacheTarget(spec, guarded(factory), errors=py_contract_for(factory), dtypes=declared_dtypes(factory, spec))
    target.thread_safe = getattr(factory, "thread_safe", False) is True  # DESIGN §4: promised only when declared
    return target


def declared_dtypes(factory: Any, spec: str) -> tuple[str, ...]:
    """The payload dtypes a ``py:`` class declares it stores exactly (class attribute ``dtypes``, e.g.
    ``("float32", "float16")``); campaigns draw among them. Undeclared: ``("float32",)`` only, since a
    cache may rightly refuse arrays of another dtype. A bad declaration is a usage error."""
    from fuzz.config import DTYPES

    raw = getattr(factory, "dtypes", ("float32",))
    if isinstance(raw, str) or not isinstance(raw, (tuple, list)) or not raw or any(d not in DTYPES for d in raw):
        raise TargetError(f"{spec}: its dtypes attribute must be a non-empty tuple of {', '.join(DTYPES)}, "
                          f"got {raw!r}")
    return tuple(raw)
