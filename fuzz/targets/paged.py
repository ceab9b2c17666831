"""``PagedTarget``: any cache speaking the Python paged protocol (DESIGN §4), driven through a
:class:`~fuzz.paged.ops.PagedCase` and audited after every op (:mod:`fuzz.paged.checks`).

Targets (``--target``): ``paged-c`` (the C reference pool, :class:`impl.paged.PagedC`),
``paged-c:PATH.so`` (any library implementing ``csrc/pagedkv.h``; native, so isolated),
``paged-py:module:Class`` (a class of the user's, resolved from the current directory), and the
engine adapters of ``impl.serving.ADAPTERS`` (``vllm:swa``, ``vllm:hybrid``, ``sglang:swa``).

A class declares the optional ops it has by having them — ``fork``, ``admit``, ``rollback``,
``append_batch`` — or lists them in a class attribute ``paged_ops``; the strategies draw only those
and a case that needs another is refused with the reason (:meth:`PagedTarget.accepts`). A class with
``rollback`` declares ``max_rollback`` (the most tokens a rollback may withdraw below a sequence's
high-water mark, docs/paged.md "Rollback"); ``exhausted_error`` names the exception an append that
finds the pool empty raises (checked where the spec's rule had no room either); ``max_seq_tokens`` the most
tokens one sequence may reach (a case past it is left out with the reason, drawn ones included).

Outcomes (DESIGN §4): a read or an audit that disagrees is a :class:`~fuzz.targets.base.Mismatch`; an
exception the cache raises on a spec-valid op is a :class:`~fuzz.targets.base.Crash` — except an
append that finds the pool exhausted: where the spec's sequential rule had no free block either it is
the documented refusal (and must have changed nothing); where the spec had room it is the efficiency
observation ``exhausted_early`` (the case ends there) if it changed nothing, else a mismatch. A
sequence holding more blocks than the rule's bound is an :class:`~fuzz.paged.checks.OverBound`
finding (kind ``efficiency``). Anything the harness itself raises is a :class:`HarnessFault`.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

from fuzz.paged.checks import Checker
from fuzz.paged.ops import (OPTIONAL, Add, Admit, Batch, Chunk, Fork, Free, PagedCase, Preempt, Push, Spec,
                            is_paged)
from fuzz.paged.oracle import PagedSpec, clip
from fuzz.targets.base import Crash, HarnessFault, HarnessInterrupt, Mismatch, RunStats, Target, TargetError, \
    crash_from, escaped, guarded, raised, subject_call
from fuzz.targets.progress import OP
from impl.errors import Unavailable

#: What every paged cache has (DESIGN §4).
PAGED_METHODS = ("configure", "add", "append", "append_chunk", "free", "read", "table", "free_blocks")


class _End(Exception):
    """The case cannot go on (the cache ran out of blocks where the spec had room): stop, no finding."""


def declared_ops(obj: Any, where: str) -> tuple[str, ...]:
    """The optional ops ``obj`` takes: its ``paged_ops`` attribute, else the optional methods it has."""
    raw = getattr(obj, "paged_ops", None)
    if raw is None:
        return tuple(m for m in OPTIONAL if callable(getattr(obj, m, None)))
    if isinstance(raw, str) or not all(m in OPTIONAL for m in raw):
        raise TargetError(f"{where}: paged_ops must list some of {', '.join(OPTIONAL)}, got {raw!r}")
    missing = [m for m in raw if not callable(getattr(obj, m, None))]
    if missing:
        raise TargetError(f"{where}: paged_ops lists {', '.join(missing)} but the class has no such method")
    return tuple(m for m in OPTIONAL if m in raw)


class PagedTarget(Target):
    kind = "paged"
    publishes_ops = True

    def __init__(self, name: str, factory: Callable[[], Any], *, native: bool = False):
        self.name, self.factory = name, factory
        try:
            probe = factory()
        except Unavailable:
            raise
        except Exception as e:  # noqa: BLE001 - the constructor's failure is the reason
            raise TargetError(f"{name}: building the cache failed: {type(e).__name__}: {e}") from e
        missing = [m for m in PAGED_METHODS if not callable(getattr(probe, m, None))]
        if missing:
            raise TargetError(f"{name} does not implement the paged protocol: missing {', '.join(missing)} "
                              f"(needs {', '.join(PAGED_METHODS)}; optional: {', '.join(OPTIONAL)})")
        self.paged_ops = declared_ops(probe, name)
        self.max_rollback = 0
        #: Why an optional method the class has is not drawn (``kvwindow fuzz`` prints it as a warning).
        self.notes: list[str] = []
        if "rollback" in self.paged_ops:
            r = getattr(probe, "max_rollback", None)
            if r is None:  # without the bound the rule it frees by is unknown: its rollbacks are not drawn
                self.paged_ops = tuple(m for m in self.paged_ops if m != "rollback")
                self.notes.append(f"{name} has rollback but no max_rollback (the most tokens a rollback may "
                                  "withdraw, docs/paged.md): no speculative step is drawn")
            elif isinstance(r, bool) or not isinstance(r, int) or r < 1:
                raise TargetError(f"{name}: max_rollback must be an int >= 1 (the most tokens a rollback may "
                                  f"withdraw), got {r!r}")
            else:
                self.max_rollback = r
        #: The most tokens one sequence may reach (``max_seq_tokens``, e.g. an adapter's fixed row length): a
        #: case that goes further is left out with the reason, never run into the adapter's own limit.
        cap = getattr(probe, "max_seq_tokens", None)
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise TargetError(f"{name}: max_seq_tokens must be an int >= 1, got {cap!r}")
        self.max_seq_tokens = cap
        err = getattr(probe, "exhausted_error", None)
        self.exhausted_error = err if isinstance(err, type) and issubclass(err, BaseException) else None
        self.arrays = callable(getattr(probe, "read_arrays", None)) and callable(getattr(probe, "append_arrays", None))
        self.native = native
        #: Exceptions that mean the adapter (this project's code, not the cache under test) cannot drive the
        #: call: a harness fault, never a crash finding. Set for the serving adapters (:func:`_serving`).
        self.adapter_faults: tuple[type[BaseException], ...] = ()
        close = getattr(probe, "close", None)
        if callable(close):
            close()

    # -- what it takes ---------------------------------------------------------
    def accepts(self, case: Any) -> str | None:
        if not is_paged(case):
            return f"{self.name} is a paged cache: it takes paged cases (a ring case is for the ring targets)"
        missing = case.needs() - set(self.paged_ops)
        if missing:
            has = ", ".join(self.paged_ops) or "none of them"
            return (f"the case needs {', '.join(sorted(missing))}, which {self.name} does not have (its optional "
                    f"ops: {has})")
        if self.window_max is not None and case.window > self.window_max:
            return f"window {case.window} exceeds {self.name}'s maximum {self.window_max}"
        if self.max_seq_tokens is not None:
            why = self._lengths_fit(case)
            if why is not None:
                return why
        if "rollback" in case.needs():
            return self._rollbacks_fit(case)
        return None

    def _lengths_fit(self, case: PagedCase) -> str | None:
        """Why a sequence of ``case`` would grow past :attr:`max_seq_tokens`, or ``None``."""
        from fuzz.paged.strategies import _State

        S, cap = _State(case.window, case.block_size, self.max_rollback), self.max_seq_tokens
        for i, op in enumerate(case.ops):
            S.apply(op)
            if S.hw and max(S.hw.values()) > cap:
                return (f"op #{i} ({op.text}) takes a sequence to {max(S.hw.values()):,} tokens; {self.name} holds "
                        f"at most {cap:,} per sequence (max_seq_tokens)")
        return None

    def _rollbacks_fit(self, case: PagedCase) -> str | None:
        """Why a ``spec`` op of ``case`` would roll back further than this cache's ``max_rollback`` allows
        (below ``max(high-water mark - R, the longest hit an admit may have picked)``), or ``None``."""
        from fuzz.paged.strategies import _State

        S = _State(case.window, case.block_size, self.max_rollback)
        for i, op in enumerate(case.ops):
            if type(op) is Spec and op.r > S.max_rollback_after(op.seq, op.k):
                return (f"op #{i} ({op.text}) rolls back {op.r} tokens; {self.name} (max_rollback "
                        f"{self.max_rollback}) may withdraw at most {S.max_rollback_after(op.seq, op.k)} there")
            S.apply(op)
        return None

    # -- one case ------------------------------------------------------------------
    def run(self, case: PagedCase) -> RunStats:
        why = self.accepts(case)
        if why is not None:
            raise HarnessFault(self.name, f"cannot take this case: {why}")
        try:
            return Run(self, case).run()
        except (Mismatch, Crash, HarnessFault, HarnessInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - not raised by the cache: the harness failed
            raise HarnessFault(self.name, f"{type(e).__name__} in the harness: {e}") from e
        except BaseException as e:  # noqa: BLE001 - a SystemExit from what the pool returned (a generator)
            raise escaped(self.name, e) from e


class Run:
    """One case against one fresh cache: the op loop, the calls, the refusals."""

    def __init__(self, target: PagedTarget, case: PagedCase):
        self.t, self.case = target, case
        self.stats = RunStats()
        self.stats.efficiency = {}

    def crash(self, i: int, op: Any, e: BaseException) -> Crash | HarnessFault:
        if self.t.adapter_faults and isinstance(e, self.t.adapter_faults):
            return HarnessFault(self.t.name, f"at op #{i}: {e}")
        return crash_from(self.t.name, i, op, e)

    def call(self, i: int, op: Any, fn: Callable, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - the cache raised on a spec-valid op
            raise self.crash(i, op, e) from e

    def run(self) -> RunStats:
        t, case = self.t, self.case
        try:
            obj = t.factory()
        except Exception as e:  # noqa: BLE001
            raise HarnessFault(t.name, f"cannot build the cache: {type(e).__name__}: {e}") from e
        self.obj = obj
        slot = t.op_slot
        try:
            if slot is not None:
                slot[OP] = -1
            self.call(-1, None, obj.configure, case.window, case.block_size, case.num_blocks, case.width)
            # Payloads salted by the case: a replay sees the same ones, another case never does (state a pool
            # keeps from an earlier one cannot match by chance).
            self.spec = spec = PagedSpec(case.window, case.block_size, case.num_blocks, case.width, t.max_rollback,
                                         salt=int(case.id[:8], 16))
            self.chk = Checker(t.name, obj, spec, self.crash, has_arrays=t.arrays)
            self.chk.check(-1, None)
            last = -1
            try:
                for i, op in enumerate(case.ops):
                    if slot is not None:
                        slot[OP] = i
                    last = i
                    self.step(i, op)
            except _End:
                pass
            self.chk.sweep(last, case.ops[last] if last >= 0 else None)
        finally:
            close = getattr(obj, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:  # noqa: BLE001 - closing is not part of the protocol's checks
                    pass
        self.stats.efficiency = {k: v for k, v in self.chk.efficiency.items() if v}
        self.stats.efficiency_first = dict(self.chk.first)
        return self.stats

    # -- the ops -----------------------------------------------------------------
    def step(self, i: int, op: Any) -> None:
        ty, obj, spec, chk = type(op), self.obj, self.spec, self.chk
        if ty is Add:
            self.call(i, op, obj.add, op.seq)
            spec.add(op.seq)
            chk.check(i, op, (op.seq,))
        elif ty is Push or ty is Chunk:
            self.append(i, op, op.seq, 1 if ty is Push else op.n, chunk=ty is Chunk)
        elif ty is Batch:
            self.batch(i, op)
        elif ty is Fork:
            self.call(i, op, obj.fork, op.src, op.dst)
            spec.fork(op.src, op.dst)
            chk.check(i, op, (op.src, op.dst))
        elif ty is Free:
            self.call(i, op, obj.free, op.seq)
            spec.free(op.seq)
            chk.check(i, op, (op.seq,))
        elif ty is Admit:
            q = spec.seqs[op.src]
            m = min(op.length, q.n)  # shorter only where an earlier append was refused (pool exhausted)
            if m == 0:
                self.call(i, op, obj.add, op.dst)
                spec.add(op.dst)
                chk.check(i, op, (op.dst,))
            else:
                self.admit(i, op, op.dst, list(clip(q.segs, m)), m, op.identity)
        elif ty is Spec:
            if self.append(i, op, op.seq, op.k, chunk=True) and spec.rollback_ok(op.seq, op.r) is None:
                self.call(i, op, obj.rollback, op.seq, op.r)
                spec.rollback(op.seq, op.r)
                chk.check(i, op, (op.seq,))
        elif ty is Preempt:
            q = spec.seqs[op.seq]
            segs, n, ident = list(q.segs), q.n, q.identity
            self.call(i, op, obj.free, op.seq)
            spec.free(op.seq)
            chk.check(i, op, (op.seq,))
            if n == 0:
                self.call(i, op, obj.add, op.seq)
                spec.add(op.seq, 0)
                chk.check(i, op, (op.seq,))
            else:
                self.admit(i, op, op.seq, segs, n, ident if ident else None)
        else:
            raise TypeError(f"not a paged op: {op!r}")

    def append(self, i: int, op: Any, s: int, k: int, *, chunk: bool, segs: list | None = None,
               fits: bool | None = None, check: bool = True, flush: Any = None) -> bool:
        """Append ``k`` entries to ``s`` (its own lineage's next ones, or those of ``segs``): one ``append`` for a
        push, one chunk otherwise. Returns whether they were appended (not refused for exhaustion).
        ``check=False`` leaves the audit to the caller (a batch audits once, after its last append); ``fits``
        is then the caller's prediction, and ``flush()`` audits what it appended before a refusal is judged."""
        spec, chk, obj = self.spec, self.chk, self.obj
        q = spec.seqs[s]
        lo = q.n
        src = [(q.cur, lo, lo + k)] if segs is None else \
            [(ln, max(a, lo), min(b, lo + k)) for ln, a, b in segs if a < lo + k and b > lo]
        pos, keys, vals = spec.entries(src, lo, lo + k)
        if fits is None:
            fits = chk.fits([(s, k)])
        try:
            if not chunk:
                obj.append(s, lo, keys[0], vals[0])
            elif self.t.arrays:
                obj.append_arrays(s, pos, keys, vals)
            else:
                obj.append_chunk(s, [(lo + r, keys[r], vals[r]) for r in range(k)])
        except Exception as e:  # noqa: BLE001 - a refusal, or the cache's failure
            if flush is not None:
                flush()
            self.refused(i, op, e, fits)
            return False
        spec.extend(s, src)
        self.stats.tokens += k
        if check:
            chk.check(i, op, (s,), ((s, lo, lo + k),))
        return True

    def batch(self, i: int, op: Batch) -> None:
        spec, chk, obj = self.spec, self.chk, self.obj
        if "append_batch" not in self.t.paged_ops:  # one append each, audited once after the last
            touched: list = []
            wrote: list = []

            def flush() -> None:
                if touched:
                    chk.check(i, op, tuple(touched), tuple(wrote))
                    touched.clear()
                    wrote.clear()

            base, pre = 0, None
            for k, s in enumerate(op.seqs):
                if pre is None:  # every prefix's prediction from one audited state, before any of them runs
                    pre = [chk.fits([(t, 1) for t in op.seqs[base:j + 1]]) for j in range(base, len(op.seqs))]
                lo = spec.seqs[s].n
                if self.append(i, op, s, 1, chunk=False, fits=pre[k - base], check=False, flush=flush):
                    touched.append(s)
                    wrote.append((s, lo, lo + 1))
                else:
                    base, pre = k + 1, None  # the refusal was judged on a freshly audited pool
            flush()
            return
        items, wrote = [], []
        for s in op.seqs:
            q = spec.seqs[s]
            _, keys, vals = spec.entries([(q.cur, q.n, q.n + 1)], q.n, q.n + 1)
            items.append((s, q.n, keys[0], vals[0]))
            wrote.append((s, q.n, q.n + 1))
        fits = chk.fits([(s, 1) for s in op.seqs])
        try:
            obj.append_batch(items)
        except Exception as e:  # noqa: BLE001
            self.refused(i, op, e, fits)
            return
        for s in op.seqs:
            q = spec.seqs[s]
            spec.extend(s, [(q.cur, q.n, q.n + 1)])
        self.stats.tokens += len(op.seqs)
        chk.check(i, op, tuple(op.seqs), tuple(wrote))

    def admit(self, i: int, op: Any, dst: int, segs: list, m: int, identity: int | None) -> None:
        spec, chk, obj = self.spec, self.chk, self.obj
        pos, keys, vals = spec.entries(segs, 0, m)
        prompt = [(p, keys[p], vals[p]) for p in range(m)]
        ident = 0 if identity is None else identity
        hit = self.call(i, op, obj.admit, dst, prompt) if identity is None else \
            self.call(i, op, obj.admit, dst, prompt, identity)
        B = spec.B
        if isinstance(hit, bool) or not isinstance(hit, (int, np.integer)) or not 0 <= hit <= m - 1 or hit % B:
            chk.fail(i, op, f"admit(s{dst}, a prompt of {m}) returned hit {hit!r}: a hit is a multiple of B = {B} "
                            f"in 0 .. {m - 1}")
        hit = int(hit)
        best = spec.longest_valid_hit(segs, m, ident)
        if hit > best:
            chk.fail(i, op, f"admit(s{dst}) hit {hit} tokens, but the longest valid hit is {best}: no history of "
                            f"identity {ident} ever filled the blocks covering positions {max(0, hit - spec.W + 1)}.."
                            f"{hit - 1} of this prompt (a hit across another identity, or the window's first block "
                            "ignored)")
        if hit < best:
            chk.note("hits_missed", i)
        spec.admitted(dst, segs, hit, ident)
        chk.check(i, op, (dst,))
        self.append(i, op, dst, m - hit, chunk=True, segs=segs)

    def refused(self, i: int, op: Any, e: BaseException, fits: bool) -> None:
        """An append-like call raised: the documented refusal, an early exhaustion, or the cache's failure."""
        err = self.t.exhausted_error
        if not fits:
            if err is not None and not isinstance(e, err):
                raise Mismatch(self.t.name, i, op, f"the pool had no free block for this append (spec's rule), and "
                                                   f"it raised {type(e).__name__}: {e}, not the documented "
                                                   f"{err.__name__}")
            self.chk.unchanged(i, op, e)
            return
        if err is not None and isinstance(e, err):
            self.chk.unchanged(i, op, e)
            self.chk.note("exhausted_early", i)
            raise _End()
        raise self.crash(i, op, e) from e


# --------------------------------------------------------------------------- factories


def make_paged_c() -> PagedTarget:
    """``paged-c``: the C reference pool compiled at install (``impl._pagedkv``), through
    :class:`impl.paged.PagedC` (the checker's reads short-cut by :class:`fuzz.paged.fastc.CheckedPagedC`)."""
    from fuzz.paged.fastc import CheckedPagedC
    from impl.paged import api_backend

    api_backend()  # Unavailable (not built) before anything else
    return PagedTarget("paged-c", CheckedPagedC, native=True)


def make_paged_c_library(path: str) -> PagedTarget:
    """``paged-c:PATH.so``: any shared library implementing ``csrc/pagedkv.h`` (every symbol checked now)."""
    from fuzz.paged.fastc import CheckedPagedC
    from impl.paged import load_paged_library
    from impl.ring import LibraryError

    spec = "paged-c:" + path
    if not path:
        raise TargetError(f"{spec}: expected paged-c:PATH.so, the path of a library implementing csrc/pagedkv.h")
    if not os.path.exists(path):
        raise TargetError(f"{spec}: no such file {path!r}")
    try:
        backend = load_paged_library(path)
    except LibraryError as e:
        raise TargetError(f"{spec}: {e}") from e
    return PagedTarget(spec, lambda: CheckedPagedC(backend=backend), native=True)


def make_paged_py(path: str) -> PagedTarget:
    """``paged-py:module.path:ClassName``: the user's class, resolved from the current directory first,
    checked for the paged protocol and built once now (a class that needs arguments is a usage error)."""
    from fuzz.targets.cache import import_from_cwd

    spec = "paged-py:" + path
    mod, sep, cls = path.rpartition(":")
    if not sep or not mod or not cls:
        raise TargetError(f"{spec}: expected paged-py:module.path:ClassName")
    try:
        module = subject_call(import_from_cwd, mod)
    except Exception as e:  # noqa: BLE001 - any import failure is the user's to see
        raise TargetError(f"{spec}: cannot import {mod!r} (from {os.getcwd()} or sys.path): {raised(e)}") from e
    factory = getattr(module, cls, None)
    if factory is None:
        raise TargetError(f"{spec}: module {mod!r} has no attribute {cls!r}")
    if not callable(factory):
        raise TargetError(f"{spec}: {cls} is not a class")
    try:
        subject_call(factory)
    except Exception as e:  # noqa: BLE001 - the user's constructor: whatever it raises is the reason
        raise TargetError(f"{spec}: {cls}() failed: {raised(e)} (a paged target class is built with "
                          "no arguments; wrap it in a subclass whose __init__ supplies them)") from e
    return PagedTarget(spec, guarded(factory))  # every call into it is a boundary (fuzz.targets.base.Guarded)


def _serving(name: str) -> PagedTarget:
    """An engine adapter of ``impl.serving.ADAPTERS`` (``name`` -> a no-argument factory of a paged-protocol
    object, which raises :class:`impl.errors.Unavailable` when its engine is not installed)."""
    try:
        import impl.serving as serving
    except ModuleNotFoundError as e:
        if e.name not in ("impl.serving",):
            raise Unavailable(f"{name}: the serving adapters need {e.name}, which is not installed") from e
        raise Unavailable(f"{name}: the serving adapters (impl/serving/, branch serving) are not installed here") \
            from e
    adapters = getattr(serving, "ADAPTERS", {})
    if name not in adapters:
        raise TargetError(f"{name}: no such serving adapter; known: {', '.join(sorted(adapters)) or 'none'}")
    factory = adapters[name]
    if isinstance(factory, str):
        mod, _, cls = factory.partition(":")
        import importlib

        factory = getattr(importlib.import_module(mod), cls)
    # The adapters import their engine on configure: do it once here, so a venv without the engine says so
    # (EngineUnavailable, naming scripts/install_serving_cores.sh) before the campaign, not at its first case.
    probe = factory()
    probe.configure(4, 4, 8, 1)
    close = getattr(probe, "close", None)
    if callable(close):
        close()
    target = PagedTarget(name, factory)
    from impl.engines import EngineUnavailable

    # e.g. a pool past 2**31 distinct payloads (impl.serving._base.TokenIds): the adapter's limit, not the engine's
    target.adapter_faults = (EngineUnavailable,)
    return target


def make_vllm(rest: str) -> PagedTarget:
    """``vllm:KIND`` (``swa``, ``hybrid``): vLLM's paged sliding-window manager through impl.serving."""
    return _serving("vllm:" + rest)


def make_sglang(rest: str) -> PagedTarget:
    """``sglang:KIND`` (``swa``): SGLang's sliding-window pool through impl.serving."""
    return _serving("sglang:" + rest)


def _adapters(prefix: str) -> list[str]:
    import impl.serving as serving

    return sorted(n for n in serving.ADAPTERS if n.startswith(prefix))


def vllm_instances() -> list[str]:
    """Every ``vllm:`` target (``--list-targets``, the default campaign where vLLM is installed, the engine matrix)."""
    return _adapters("vllm:")


def sglang_instances() -> list[str]:
    """Every ``sglang:`` target."""
    return _adapters("sglang:")
