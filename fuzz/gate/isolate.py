"""Gate subjects run in a child process (the default; ``--no-isolate`` runs them in the gate's own process).

A subject is code under test: it may segfault in native code, call ``os._exit``, or never return. Run in the
gate's process, any of these ends the gate with no report (or hangs the CI step). :func:`isolated` returns a
:class:`~fuzz.gate.protocol.Subject` whose instances live in one child per subject (:func:`serve`, started
with ``spawn``, so the child resolves the subject from its spec alone): every call of the decoder protocol is a
request to the child answered within ``op_timeout`` seconds. A child that dies, or a call that runs past the
limit (the child is killed), is that call's outcome — :class:`SubjectDied`, an ``Exception`` the
:class:`~fuzz.gate.protocol.Handle` turns into the subject's :class:`~fuzz.gate.protocol.SubjectError`, so the
step that made the call fails with the cell named, and the gate goes on (a fresh child for the next instance).

The subject is resolved in the child too (:func:`spawn`): the gate's process never imports code under test, so
a module that segfaults, exits or hangs while it is imported is that subject's death, not the gate's. Only what
the report needs of it (tolerance, description, versions) crosses back; a spec that names nothing is still a
usage error, sent back as one.

Limits follow measured cost, as a campaign's do (DESIGN §4: a slow machine is never a finding): starting the
child and building an instance are setup (:data:`~fuzz.config.SETUP_TIMEOUT`); a call may run
:data:`~fuzz.config.OP_TIMEOUT_FACTOR` times the slowest call measured so far, at least
:data:`~fuzz.gate.config.GATE_OP_FLOOR` (``--op-timeout`` fixes it instead). A call past its limit is given
:data:`~fuzz.config.CONFIRM_FACTOR` times as long before its process is killed: one that answers then was slow
(noted in :attr:`SubjectProcess.slow`), not hung.

Values cross as pickles; logits and K/V (``LOGIT_METHODS``) are converted to numpy in the child. What does
not pickle — and every ``snapshot()`` state, which must come back to ``restore()`` as the object it was —
stays in the child and crosses as a :class:`Ref`. The time a call took is measured in the child
(:attr:`RemoteInstance.last_seconds`), so step 6 times the subject, not the pipe.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import signal
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

from fuzz.config import CONFIRM_FACTOR, OP_TIMEOUT_FACTOR, SETUP_TIMEOUT
from fuzz.gate.config import GATE_OP_FLOOR
from fuzz.gate.protocol import DEFAULT_TOLERANCE, OPTIONAL, REQUIRED, Subject
from impl.errors import Unavailable

#: Methods whose answers are logits or K/V rows: converted to float64 numpy in the child (torch tensors too).
LOGIT_METHODS = ("prefill", "decode", "full", "batch", "kv_layers", "full_kv")
#: Methods whose answers stay in the child (a state handed back to ``restore``).
REF_METHODS = ("snapshot",)
#: Seconds the child may take to start and resolve the subject (imports, a model built from its seed): setup.
STARTUP_TIMEOUT = SETUP_TIMEOUT


class SubjectDied(Exception):
    """The subject's process died (a signal, ``os._exit``) or was killed after a call ran past ``--op-timeout``."""


@dataclass(frozen=True)
class Ref:
    """A value that stays in the child (the parent holds its number)."""

    rid: int


class RemoteError(Exception):
    """What the subject raised in the child, under the name of its type (see :func:`_remote_error`)."""


def _remote_error(name: str, message: str) -> Exception:
    safe = "".join(c for c in name if c.isalnum() or c == "_") or "Exception"
    if safe[0].isdigit():
        safe = "E" + safe
    return type(safe, (RemoteError,), {})(message)


def _plain(value: Any) -> Any:
    """Tensors as float64 numpy arrays, in lists, tuples and dicts too (what the Handle reads anyway)."""
    if hasattr(value, "detach"):
        return value.detach().cpu().double().numpy()
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value) if isinstance(value, list) else tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "its process did not exit"
    if code < 0:
        try:
            return f"its process died of {signal.Signals(-code).name}"
        except ValueError:
            return f"its process died of signal {-code}"
    return f"its process exited with code {code}"


# ---------------------------------------------------------------------------
# the child


def serve(conn, spec: str, role: str, cwd: str) -> None:
    """The child: resolve ``spec``, then build instances and answer calls until the parent hangs up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the gate's to handle (it stops the child)
    try:
        from fuzz.targets.isolated_child import die_with_parent

        die_with_parent(os.getppid())
    except Exception:  # noqa: BLE001 - best effort: the parent also stops the child when it ends
        pass
    os.chdir(cwd)
    try:
        from fuzz.gate.subjects import SubjectUsageError, resolve

        try:
            subject = resolve(spec, role)
        except SubjectUsageError as e:  # a spec naming nothing usable: the gate's usage error, as in process
            conn.send(("usage", str(e)[:2000]))
            return
    except BaseException as e:  # noqa: BLE001 - anything: the parent reports it as the subject's
        conn.send(("raised", type(e).__name__, f"resolving {spec!r} in the subject's process: {e}"[:2000]))
        return
    conn.send(("ready", {"tolerance": tuple(subject.tolerance), "description": str(subject.description),
                         "versions": {str(k): str(v) for k, v in dict(subject.versions).items()}}))
    objs: dict[int, Any] = {}
    refs: dict[int, Any] = {}
    counter = [0]

    def keep(table: dict[int, Any], value: Any) -> int:
        counter[0] += 1
        table[counter[0]] = value
        return counter[0]

    def deref(v: Any) -> Any:
        return refs[v.rid] if isinstance(v, Ref) else v

    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        for oid in msg[-1]:  # instances the parent no longer holds
            objs.pop(oid, None)
        t0 = time.perf_counter()
        try:
            if msg[0] == "new":
                obj = subject.factory()
                methods = tuple(m for m in REQUIRED + OPTIONAL if callable(getattr(obj, m, None)))
                reply: tuple = ("ok", (keep(objs, obj), methods), time.perf_counter() - t0)
            else:
                _, oid, method, args, kw, _drops = msg
                out = getattr(objs[oid], method)(*[deref(a) for a in args], **{k: deref(v) for k, v in kw.items()})
                seconds = time.perf_counter() - t0
                if method in LOGIT_METHODS:
                    out = _plain(out)
                if method in REF_METHODS:
                    out = Ref(keep(refs, out))
                else:
                    try:
                        pickle.dumps(out)
                    except Exception:  # noqa: BLE001 - it stays here; the parent gets its number
                        out = Ref(keep(refs, out))
                reply = ("ok", out, seconds)
        except Unavailable as e:
            reply = ("unavailable", str(e)[:2000])
        except BaseException as e:  # noqa: BLE001 - SystemExit, KeyboardInterrupt of the subject's: its outcome
            what = str(e)[:2000]
            if not isinstance(e, Exception):
                what = f"{what} (a BaseException, not an error: code under test tried to end the process)"
            reply = ("raised", type(e).__name__, what)
        try:
            conn.send(reply)
        except Exception as e:  # noqa: BLE001 - an answer that does not pickle after all
            conn.send(("raised", type(e).__name__, f"its answer could not be sent back: {e}"[:2000]))


# ---------------------------------------------------------------------------
# the parent


class SubjectProcess:
    """The child process of one subject: started on the first instance, started again after it died."""

    def __init__(self, spec: str, role: str, op_timeout: float | None = None):
        #: ``--op-timeout`` (fixed) or ``None``: the limit follows the measured cost (:meth:`limit`)
        self.spec, self.role, self.op_timeout = spec, role, op_timeout
        self.proc = None
        self.conn = None
        self.generation = 0
        self.died: str | None = None
        self.drops: list[int] = []
        #: What the child said of the subject when it resolved it (tolerance, description, versions).
        self.meta: dict = {}
        #: Seconds of the slowest call measured in the child so far (instances built are setup, not counted).
        self.slowest = 0.0
        #: One line per call that ran past its limit and answered within the confirmation (slow, not hung).
        self.slow: list[str] = []

    def limit(self) -> float:
        """Seconds a call may run before it is given its confirmation time: ``--op-timeout`` when given, else
        :data:`~fuzz.config.OP_TIMEOUT_FACTOR` x the slowest call so far, at least :data:`GATE_OP_FLOOR`."""
        if self.op_timeout is not None:
            return self.op_timeout
        return max(GATE_OP_FLOOR, OP_TIMEOUT_FACTOR * self.slowest)

    def limit_text(self) -> str:
        return "--op-timeout" if self.op_timeout is not None else \
            f"{OP_TIMEOUT_FACTOR:g} x the slowest call so far, at least {GATE_OP_FLOOR:g} s; --op-timeout sets it"

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child, self.spec, self.role, os.getcwd()),
                                name=f"kvwindow-gate-{self.role}", daemon=True)
        self.proc.start()
        child.close()
        self.conn, self.generation, self.drops = parent, self.generation + 1, []
        reply = self._await("starting", STARTUP_TIMEOUT, setup=True)
        if reply[0] == "usage":
            self._stop()
            from fuzz.gate.subjects import SubjectUsageError

            raise SubjectUsageError(reply[1])
        if reply[0] != "ready":
            self._stop()
            raise _remote_error(reply[1], reply[2])
        self.meta = reply[1]

    def _stop(self) -> None:
        if self.proc is not None:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(timeout=5)
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None

    def close(self) -> None:
        self._stop()

    def _await(self, what: str, timeout: float, setup: bool = False) -> tuple:
        """The child's answer within ``timeout`` seconds, or within :data:`CONFIRM_FACTOR` times as long (then
        noted as slow): a busy machine slows a call without hanging it. Past that, or when the child dies, the
        call's outcome is :class:`SubjectDied`."""
        t0 = time.monotonic()
        in_time = self.conn.poll(timeout)
        if in_time or self.conn.poll(timeout * (CONFIRM_FACTOR - 1)):
            try:
                reply = self.conn.recv()
                took = time.monotonic() - t0
                if not in_time:
                    self.slow.append(f"{self.role} {what} answered after {took:.1f} s, past its {timeout:g} s limit "
                                     f"({'setup' if setup else self.limit_text()}): slow, not a hang")
                return reply
            except (EOFError, OSError):
                pass
            self.proc.join(timeout=5)
            why = f"{_describe_exit(self.proc.exitcode)} during {what}"
        else:
            self.proc.kill()
            kind = "setup limit" if setup else f"limit ({self.limit_text()})"
            why = (f"{what} ran past its {timeout:g} s {kind} and had not answered after {timeout * CONFIRM_FACTOR:g} s "
                   "(confirmed: not a slow machine); its process was killed")
        self._stop()
        self.died = why
        raise SubjectDied(why)

    def request(self, msg: tuple, what: str) -> tuple:
        self.conn.send((*msg, self.drops))
        self.drops = []
        setup = msg[0] == "new"  # an instance built (a model from its seed) is setup, timed apart
        reply = self._await(what, SETUP_TIMEOUT if setup else self.limit(), setup=setup)
        if reply[0] == "ok":
            if not setup and isinstance(reply[2], (int, float)):
                self.slowest = max(self.slowest, float(reply[2]))
            return reply
        if reply[0] == "unavailable":
            raise Unavailable(reply[1])
        raise _remote_error(reply[1], reply[2])

    def new(self) -> "RemoteInstance":
        if self.proc is None:
            self._start()
        _, (oid, methods), seconds = self.request(("new",), "__init__")
        return RemoteInstance(self, self.generation, oid, methods)


class RemoteInstance:
    """One instance in the child, seen from the gate: the protocol's methods it has, each a request."""

    #: What :class:`fuzz.gate.protocol.Handle` reads (on the type) to know the instance runs in a child.
    gate_remote = True

    def __init__(self, proc: SubjectProcess, generation: int, oid: int, methods: tuple[str, ...]):
        self._proc, self._generation, self._oid, self._methods = proc, generation, oid, methods
        self.last_seconds: float | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self.__dict__.get("_methods", ()):
            raise AttributeError(name)
        return partial(self._call, name)

    def _call(self, method: str, *args: Any, **kw: Any) -> Any:
        proc = self._proc
        if proc.generation != self._generation or proc.proc is None:
            raise SubjectDied(f"this instance's process is gone ({proc.died or 'stopped'})")
        _, out, seconds = proc.request(("call", self._oid, method, args, kw), f"{method}()")
        self.last_seconds = seconds
        return out

    def __del__(self) -> None:
        try:
            if self._proc.generation == self._generation:
                self._proc.drops.append(self._oid)
        except Exception:  # noqa: BLE001 - at interpreter exit
            pass


def spawn(spec: str, role: str, op_timeout: float | None = None) -> Subject:
    """The subject ``spec`` names, resolved in a child process started now, its instances living there;
    ``close()`` of the returned subject's ``process`` stops the child. Raises
    :class:`~fuzz.gate.subjects.SubjectUsageError` for a spec that names nothing usable, :class:`SubjectDied`
    when the child dies or hangs while it imports and resolves the subject, and the subject's own error (a
    :class:`RemoteError`) when resolving it raised."""
    proc = SubjectProcess(spec, role, op_timeout)
    proc._start()
    meta = proc.meta
    tol = meta.get("tolerance")
    out = Subject(spec, proc.new, tuple(tol) if tol else DEFAULT_TOLERANCE, meta.get("description", ""),
                  dict(meta.get("versions", {})))
    out.process = proc  # type: ignore[attr-defined]
    return out
