"""Crash isolation: a target run in a supervised child process, so that a native death is a finding.

A segfault, an abort or an endless loop inside a C library would take the campaign
down with it — no seed, no report. :class:`IsolatedTarget` stands in for the target a
``--target`` value names and runs every case in a child (:mod:`fuzz.targets.isolated_child`:
a fork server that forks runners), one round trip per case. The child publishes the
index of the op it is running in shared memory, so when it dies the supervisor knows
where: a signal, an abort, a sanitizer report, an op that runs past ``op_timeout`` or a
breach of the ``op_memory`` limit becomes a :class:`~fuzz.targets.base.Crash` naming the
op (``SIGSEGV at op #5 (push)``) — a finding, shrunk and saved like a mismatch. A dead
runner is replaced by a fresh fork; once a failure is being shrunk or reduced
(:attr:`IsolatedTarget.fresh`) every case gets a fresh runner, so a candidate never
inherits the state an earlier one left behind.

Native targets are isolated by default (:func:`is_native`: ``ring-c``, ``cuda-index``,
every ``c:`` library, the C mutants, the CUDA targets); ``--isolate`` isolates any target.
"""

from __future__ import annotations

import copy
import json
import mmap
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from fuzz.config import OP_MEMORY_MB, OP_TIMEOUT, CampaignConfig
from fuzz.ops import Case
from fuzz.targets import registry
from fuzz.targets.base import Crash, HarnessFault, Mismatch, RunStats, Target, TargetError
from fuzz.targets.isolated_child import recv_msg, send_msg
from fuzz.targets.progress import DONE, IDLE, OP, POS, SEQ, WINDOW, WORDS, running_op, running_push, trace_buffer

#: Built-in targets that run native code (C through cffi, CUDA kernels).
NATIVE_BUILTINS = ("ring-c", "cuda-index", "cuda-ring", "cuda-decoder")
#: Targets built on torch: their fork server imports torch once (importing it is safe before a fork; building
#: the target is not — CUDA cannot be used across a fork — so each runner builds its own).
TORCH_SPECS = ("cuda-", "decoder", "hf-", "mutant:decoder-")
#: Seconds a child may take to start and build its target (a CUDA build may compile kernels).
STARTUP_TIMEOUT = 600.0
#: How often the supervisor looks at the op slot while a case runs (it wakes at once on a reply).
POLL_S = 0.1
#: How long the supervisor polls for a reply before it sleeps (a case takes about 0.1 ms at W = 16; a
#: process that sleeps waits for the scheduler to wake it, which costs more than the case on a busy machine).
SPIN_S = 0.002
#: The control socket: message boundaries kept (``SOCK_SEQPACKET`` also reports a peer that went away).
CTRL_SOCKET = getattr(socket, "SOCK_SEQPACKET", socket.SOCK_DGRAM)
#: The requests that run the target (numbered: the slot says which one it is running).
SEQUENCED = ("run", "bulk", "probe")
#: The child's stderr is kept up to this size between cases (the sanitizer report of a death is read from it).
LOG_KEEP = 1 << 20


def is_native(spec: str) -> bool:
    """Whether ``spec`` names a target that runs native code (isolated unless ``--no-isolate``)."""
    if spec in NATIVE_BUILTINS or spec.startswith("c:"):
        return True
    if spec.startswith("mutant:"):
        from impl.mutants.catalogue import catalogue

        return any(m.name == spec[len("mutant:"):] and m.kind == "c-ring" for m in catalogue())
    return False


def should_isolate(spec: str, config: CampaignConfig) -> bool:
    if config.isolate is None:
        return is_native(spec) or config.sanitize
    return config.isolate


def resolve(spec: str, config: CampaignConfig | None = None) -> Target:
    """The target ``spec`` names, isolated as ``config`` says; :class:`TargetError` (exit 2) otherwise."""
    config = config or CampaignConfig()
    if should_isolate(spec, config):
        return IsolatedTarget(spec, op_timeout=config.op_timeout, op_memory=config.op_memory,
                              sanitize=config.sanitize)
    return registry.resolve(spec)


def close(target: Target) -> None:
    """Stop ``target``'s child processes, if it has any."""
    fn = getattr(target, "close", None)
    if fn is not None:
        fn()


def sanitizer_environment(op_memory: int | None) -> dict[str, str]:
    """What the child needs to load libraries built with ASan + UBSan: the runtime preloaded, reports fatal,
    project libraries built sanitized (into a cache of their own); :class:`TargetError` without ASan."""
    from impl._ring_build import SANITIZE_ENV, asan_runtime
    from impl.mutants.catalogue import cache_dir

    runtime = asan_runtime()
    if runtime is None:
        raise TargetError("--sanitize: the C compiler has no AddressSanitizer runtime (libasan.so); "
                          "install gcc's libasan or run without --sanitize")
    preload = os.environ.get("LD_PRELOAD")
    asan = "detect_leaks=0:halt_on_error=1:allocator_may_return_null=1"
    if op_memory:
        asan += f":hard_rss_limit_mb={int(op_memory)}"
    return {"LD_PRELOAD": runtime + (":" + preload if preload else ""), "ASAN_OPTIONS": asan,
            "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1", SANITIZE_ENV: "1",
            "KVWINDOW_CACHE": str(cache_dir().parent / "asan")}


def sanitizer_report(text: str, lines: int = 4) -> str | None:
    """The first lines of an ASan / UBSan report in ``text``, joined on one line, or ``None``."""
    rows = [r.strip() for r in text.splitlines()]
    for i, r in enumerate(rows):
        if "ERROR: AddressSanitizer" in r or "ERROR: LeakSanitizer" in r or "runtime error:" in r:
            return " | ".join(x for x in rows[i:i + lines] if x)
    return None


@dataclass
class _Runner:
    pid: int
    conn: Connection
    #: The configuration its target was configured with (``None``: as built).
    config: CampaignConfig | None = None
    used: bool = False
    poller: Any = None

    def __post_init__(self) -> None:
        self.poller = select.poll()
        self.poller.register(self.conn.fileno(), select.POLLIN)


class IsolatedTarget(Target):
    """The target ``spec`` names, run case by case in a supervised child process.

    Stands in for the real target everywhere a :class:`Target` goes: its name, the attributes
    of :data:`~fuzz.targets.isolated_child.FORWARDED` (``kind``, ``window_max``, ``max_tokens``,
    ``bad_kinds``, ``traced``, ``width``, ``dtype``, ...), ``versions()``, ``tolerances()`` and
    ``accepts`` are the child's target's. :meth:`configured` returns another view of the same
    child whose runners run ``target.configured(config)`` (so ``--width``/``--dtype`` reach the
    implementation). Raises :class:`TargetError` at construction when the child cannot build the target.
    """

    def __init__(self, spec: str, *, op_timeout: float = OP_TIMEOUT, op_memory: int | None = OP_MEMORY_MB,
                 sanitize: bool = False):
        self.spec = spec
        self.config: CampaignConfig | None = None
        self._child = _Child(spec, op_timeout=float(op_timeout), op_memory=op_memory, sanitize=sanitize)
        self._stand_in(self._child.hello(None))

    def _stand_in(self, meta: dict[str, Any]) -> None:
        self._meta = meta
        self.name = meta["name"]
        for attr, value in meta["attrs"].items():
            setattr(self, attr, value)

    @property
    def op_timeout(self) -> float:
        return self._child.op_timeout

    @property
    def fresh(self) -> bool:
        """A fresh runner per case (set by the campaign while it shrinks or reduces a failure)."""
        return self._child.fresh

    @fresh.setter
    def fresh(self, value: bool) -> None:
        self._child.fresh = value

    # -- the Target protocol ------------------------------------------------
    def configured(self, config: Any) -> "IsolatedTarget":
        """A view of the same child whose runners run ``target.configured(config)``; its attributes are
        that configured target's (a runner is forked now to read them)."""
        if config == self.config:
            return self
        other = copy.copy(self)
        other.config = config
        other._stand_in(self._child.hello(config))
        return other

    def versions(self) -> dict[str, str]:
        return dict(self._meta.get("versions", {}))

    def tolerances(self) -> dict[str, dict[str, float]]:
        return {k: dict(v) for k, v in self._meta.get("tolerances", {}).items()}

    def accepts(self, case: Case) -> str | None:
        why = super().accepts(case)
        if why is not None or not self._meta.get("custom_accepts"):
            return why
        reply = self._call(("accepts", case))
        if reply[0] != "accepts":
            raise HarnessFault(self.name, reply[1])
        return reply[1]

    def run(self, case: Case) -> RunStats:
        reply = self._call(("run", None, case))
        tag = reply[0]
        if tag == "ok":
            return RunStats(reply[1], set(reply[2]), dict(reply[3]))
        if tag == "mismatch":
            raise Mismatch(self.name, reply[1], reply[2], reply[3])
        if tag == "crash":
            raise Crash(self.name, reply[1], reply[2], reply[3], signal=reply[4])
        if tag == "reject":
            from hypothesis import reject
            from hypothesis.control import currently_in_test_context

            if currently_in_test_context():
                reject()
            raise ValueError(f"{self.name} does not take this case: {reply[1]}")
        raise HarnessFault(self.name, reply[1])

    def bulk(self, config: CampaignConfig, campaign_seed: int) -> Any:
        """The campaign's bulk streams (:func:`fuzz.targets.ring_bulk.run_bulk`) run in the child as one request,
        unreduced; a death or a hang in it is a :class:`~fuzz.targets.ring_bulk.BulkCrash` at the push the
        slot names, with the tokens checked before it."""
        from fuzz.targets.ring_bulk import BulkPhase

        reply = self._call(("bulk", None, config, campaign_seed))
        if reply[0] == "bulk":
            return reply[1]
        if reply[0] == "bulk-crash":
            error, done = self._bulk_crash(reply)
            return BulkPhase(tokens=done, error=error)
        return BulkPhase(error=HarnessFault(self.name, reply[1]))

    def probe_trace(self, w: int, n: int) -> BaseException | None:
        """One stream of ``n`` pushes at window ``w`` through a fresh ring in the child
        (:func:`fuzz.targets.ring_bulk.probe_trace`); a death is a :class:`~fuzz.targets.ring_bulk.BulkCrash`."""
        reply = self._call(("probe", None, w, n))
        if reply[0] == "probe":
            return reply[1]
        if reply[0] == "bulk-crash":
            return self._bulk_crash(reply)[0]
        return HarnessFault(self.name, reply[1])

    def _bulk_crash(self, reply: tuple) -> tuple[BaseException, int]:
        from fuzz.targets.ring_bulk import BulkCrash

        _, window, step, done, detail, sig = reply
        return BulkCrash(self.name, window, step, detail, signal=sig), done + step

    def close(self) -> None:
        """Stop the runner and the fork server (idempotent; every view of the child stops with it)."""
        self._child.close()

    def __enter__(self) -> "IsolatedTarget":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, msg: tuple) -> tuple:
        """One request to a runner configured as this view is; a failure of the supervision itself is a
        harness fault, never the target's."""
        try:
            return self._child.request(msg, self.config)
        except HarnessFault:
            raise
        except Exception as e:  # noqa: BLE001 - the supervision itself failed: never the target's fault
            raise HarnessFault(self.name, f"the isolation machinery failed: {type(e).__name__}: {e}") from e


class _Child:
    """One fork server, its current runner and the shared op slot: what every view of an isolated target
    shares. A runner is forked for one configuration (``None``: the target as built); a request for
    another configuration, or (``fresh``) any request after the runner ran one, gets a new runner."""

    def __init__(self, spec: str, *, op_timeout: float, op_memory: int | None, sanitize: bool):
        self.spec, self.op_timeout, self.op_memory, self.sanitize = spec, op_timeout, op_memory, sanitize
        self.name = spec
        self.fresh = False
        self.publishes_ops = False
        self._env = dict(os.environ)
        if sanitize:
            self._env.update(sanitizer_environment(op_memory))
        self._proc: subprocess.Popen | None = None
        self._ctrl: socket.socket | None = None
        self._runner: _Runner | None = None
        self._seq = 0
        self._slot_file = tempfile.TemporaryFile(prefix="kvwindow-slot-")
        self._slot_file.truncate(WORDS * 8)
        self._slot = memoryview(mmap.mmap(self._slot_file.fileno(), WORDS * 8)).cast("q")
        self._sums = trace_buffer(self._slot)
        self._log = _append_only_temp()
        try:
            self._start()
        except TargetError:
            self.close()
            raise
        except (OSError, HarnessFault) as e:
            self.close()
            raise TargetError(f"target {spec!r}: the isolated child could not start: {e}{self._log_tail()}") from e

    def hello(self, config: CampaignConfig | None) -> dict[str, Any]:
        """The metadata of the target as ``config`` configures it (a runner is forked for it now);
        :class:`TargetError` when the child cannot build or configure it."""
        self._drop_runner()
        try:
            hello = self._fork(config, STARTUP_TIMEOUT)
        except HarnessFault as e:
            hello = ("error", {"kind": "harness", "message": e.reason})
        if hello[0] == "error":
            if config is None:  # the target itself cannot be built: nothing is left running
                self.close()
            raise TargetError(self._error_text(hello[1]))
        meta = hello[1]
        self.name, self.publishes_ops = meta["name"], meta["attrs"].get("publishes_ops", False)
        return meta

    def close(self) -> None:
        """Stop the runner and the fork server (idempotent)."""
        self._drop_runner()
        if self._ctrl is not None:
            self._ctrl.close()
            self._ctrl = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        for f in ("_log", "_slot_file"):
            obj = getattr(self, f, None)
            if obj is not None:
                obj.close()
                setattr(self, f, None)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # -- the fork server --------------------------------------------------
    def _start(self) -> None:
        """Start the fork server and wait until it has imported the harness (and built a native target)."""
        from fuzz.targets.isolated_child import __name__ as child_module

        parent, child = socket.socketpair(socket.AF_UNIX, CTRL_SOCKET)
        opts = {"spec": self.spec, "parent": os.getpid(), "op_memory": self.op_memory, "sanitize": self.sanitize,
                "preresolve": is_native(self.spec) and not self.spec.startswith("cuda-"),
                "preimport": ["torch"] if self.spec.startswith(TORCH_SPECS) else []}
        env = dict(self._env)
        env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
        env.setdefault("OPENBLAS_NUM_THREADS", "1")  # no BLAS thread pool to carry across the forks
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", child_module, str(child.fileno()), str(self._slot_file.fileno()),
                 json.dumps(opts)],
                pass_fds=(child.fileno(), self._slot_file.fileno()), stdin=subprocess.DEVNULL,
                stdout=self._log, stderr=self._log, env=env, start_new_session=True)
        finally:
            child.close()
        self._ctrl = parent
        msg = self._ctrl_reply(STARTUP_TIMEOUT)
        if not msg.get("ready"):
            raise TargetError(self._error_text(msg.get("error") or {"kind": "harness", "message": "no reply"}))

    def _ctrl_reply(self, timeout: float) -> dict[str, Any]:
        assert self._ctrl is not None
        self._ctrl.settimeout(timeout)
        try:
            msg, fds = recv_msg(self._ctrl)
        finally:
            self._ctrl.settimeout(None)
        for fd in fds:
            os.close(fd)
        if msg is None:
            code = self._proc.poll() if self._proc is not None else None
            raise HarnessFault(self.name, f"the isolation fork server stopped (exit {code}){self._log_tail()}")
        return msg

    def _error_text(self, err: dict[str, str]) -> str:
        if err.get("kind") == "target":
            return err["message"]
        return f"target {self.spec!r}: building it in the isolated child failed: {err.get('message')}"

    def _fork(self, config: CampaignConfig | None, timeout: float = 60.0) -> tuple:
        """A fresh runner whose target is configured with ``config`` (the fork request carries it); returns
        its hello (``("meta", info)`` or ``("error", err)``)."""
        if self._ctrl is None or (self._proc is not None and self._proc.poll() is not None):
            self._restart()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            send_msg(self._ctrl, {"op": "fork", "config": None if config is None else config.to_json()},
                     (theirs.fileno(),))
        except OSError:
            mine.close()
            theirs.close()
            self._restart()
            return self._fork(config, timeout)
        theirs.close()
        msg = self._ctrl_reply(timeout)
        if "pid" not in msg:
            mine.close()
            raise HarnessFault(self.name, f"cannot start a child: {msg.get('error')}")
        conn = Connection(mine.detach())
        runner = _Runner(int(msg["pid"]), conn, config)
        if not conn.poll(timeout):
            self._kill(runner)
            raise HarnessFault(self.name, f"the child did not start within {timeout:g} s{self._log_tail()}")
        try:
            hello = conn.recv()
        except (EOFError, OSError):
            status = self._reap(runner)
            raise HarnessFault(self.name, f"the child died while building the target "
                                          f"({describe_status(status)}){self._log_tail()}") from None
        if hello[0] == "meta":
            self._runner = runner
        else:
            self._kill(runner)
        return hello

    def _restart(self) -> None:
        if self._ctrl is not None:
            self._ctrl.close()
            self._ctrl = None
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None
        self._start()

    def _reap(self, runner: _Runner) -> int | None:
        """The runner's wait status, from the fork server (``None`` when it cannot tell)."""
        runner.conn.close()
        if self._runner is runner:
            self._runner = None
        try:
            send_msg(self._ctrl, {"op": "wait", "pid": runner.pid})
            return self._ctrl_reply(30.0).get("status")
        except (OSError, HarnessFault, AttributeError):
            return None

    def _kill(self, runner: _Runner) -> int | None:
        try:
            os.kill(runner.pid, signal.SIGKILL)
        except OSError:
            pass
        return self._reap(runner)

    def _drop_runner(self) -> None:
        if self._runner is not None and self._ctrl is not None:
            self._kill(self._runner)
        self._runner = None

    # -- one request ------------------------------------------------------
    def _live_runner(self, config: CampaignConfig | None) -> _Runner:
        if self._runner is not None and ((self.fresh and self._runner.used) or self._runner.config != config):
            self._drop_runner()
        if self._runner is None:
            hello = self._fork(config)
            if hello[0] != "meta":
                raise HarnessFault(self.name, self._error_text(hello[1]))
        assert self._runner is not None
        return self._runner

    def request(self, msg: tuple, config: CampaignConfig | None, retry: bool = True) -> tuple:
        """Send ``msg`` to a runner configured with ``config`` and wait for its reply; a runner that dies or
        times out answering stands for a crash reply naming the op the slot shows."""
        runner = self._live_runner(config)
        if msg[0] in SEQUENCED:
            self._seq += 1
            msg = (msg[0], self._seq, *msg[2:])
        mark = self._log_mark()
        try:
            runner.conn.send(msg)
        except OSError:  # died between cases (nothing of this case ran): a fresh runner takes it
            self._reap(runner)
            runner = self._live_runner(config)
            runner.conn.send(msg)
        runner.used = True
        reply = self._await(runner, msg, mark)
        if reply[0] == "server-died":  # the runner died with the fork server, not of the case
            if not retry:
                return ("harness", f"the isolation fork server died twice{self._log_tail()}")
            return self.request(msg, config, retry=False)
        return reply

    def _await(self, runner: _Runner, msg: tuple, mark: int) -> tuple:
        seq = msg[1] if msg[0] in SEQUENCED else None
        slot, timeout = self._slot, self.op_timeout
        last, since = None, time.monotonic()
        if spin_until_readable(runner.poller, SPIN_S):
            try:
                return runner.conn.recv()
            except (EOFError, OSError):
                return self._crash_reply(msg, seq, self._reap(runner), mark)
        while True:
            if runner.poller.poll(POLL_S * 1000):
                try:
                    return runner.conn.recv()
                except (EOFError, OSError):
                    break
            now = time.monotonic()
            cur = (slot[SEQ], slot[OP], slot[POS])  # a bulk stream moves on segment by segment
            if cur != last:
                last, since = cur, now
            elif now - since > timeout:
                self._kill(runner)
                return self._crash_reply(msg, seq, None, mark, timed_out=True)
        status = self._reap(runner)
        return self._crash_reply(msg, seq, status, mark)

    def _crash_reply(self, msg: tuple, seq: int | None, status: int | None, mark: int, *,
                     timed_out: bool = False) -> tuple:
        """The reply a runner that died (or was killed on timeout) running ``msg`` stands for."""
        if not timed_out and (self._proc is None or self._proc.poll() is not None):
            return ("server-died",)
        slot = self._slot
        index: int | None = None
        op = None
        ours = seq is not None and slot[SEQ] == seq and slot[OP] != IDLE
        if msg[0] == "run" and ours and self.publishes_ops:
            index = running_op(slot, self._sums)
            ops = msg[2].ops
            op = ops[index] if 0 <= index < len(ops) else None
        log = self._log_since(mark)
        report = sanitizer_report(log)
        sig = None
        if timed_out:
            detail = f"timed out: the op ran longer than {self.op_timeout:g} s (--op-timeout); the child was killed"
        else:
            sig, detail = describe_death(status)
            if report is not None:
                detail = f"{report} ({detail})"
            elif log.strip() and (sig is None or sig == "SIGABRT"):
                detail += ": " + log.strip().splitlines()[-1][:300]
        if msg[0] in ("bulk", "probe"):  # the stream and the push the slot shows (the window: 0 before any)
            if not ours:
                return ("bulk-crash", None, 0, 0, detail, sig)
            step = running_push(slot, self._sums, int(slot[POS]))
            return ("bulk-crash", int(slot[WINDOW]) or None, step, int(slot[DONE]), detail, sig)
        if msg[0] != "run":
            return ("harness", f"the child died answering {msg[0]!r}: {detail}")
        return ("crash", index, op, detail, sig)

    # -- the child's stderr -------------------------------------------------
    def _log_mark(self) -> int:
        fd = self._log.fileno()
        size = os.fstat(fd).st_size
        if size > LOG_KEEP:
            os.ftruncate(fd, 0)  # the child appends (O_APPEND), so its next write starts at 0
            return 0
        return size

    def _log_since(self, mark: int) -> str:
        fd = self._log.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, min(size - mark, 64 << 10), mark) if size > mark else b""
        return data.decode(errors="replace")

    def _log_tail(self) -> str:
        try:
            text = self._log_since(max(0, os.fstat(self._log.fileno()).st_size - 2000)).strip()
        except (OSError, ValueError):
            return ""
        return f"; its last output: {text.splitlines()[-1][:300]}" if text else ""


def spin_until_readable(poller, seconds: float) -> bool:
    """Poll ``poller`` without sleeping for up to ``seconds``; whether its file became readable."""
    if poller.poll(0):
        return True
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        if poller.poll(0):
            return True
    return False


def _append_only_temp():
    """An unnamed temporary file opened for appending: the child's stdout and stderr. ``O_APPEND`` (shared
    with the child's copies) makes every write land at the end, also after the supervisor truncates it."""
    import fcntl

    f = tempfile.TemporaryFile(prefix="kvwindow-child-")
    fd = f.fileno()
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
    return f


def describe_status(status: int | None) -> str:
    sig, detail = describe_death(status)
    return detail


def describe_death(status: int | None) -> tuple[str | None, str]:
    """``(signal name or None, one line)`` for a wait status."""
    if status is None:
        return None, "the child process died (its exit status is unknown)"
    if os.WIFSIGNALED(status):
        n = os.WTERMSIG(status)
        try:
            name = signal.Signals(n).name
        except ValueError:
            name = f"signal {n}"
        return name, f"the child process died of {name}"
    if os.WIFEXITED(status):
        return None, f"the child process exited with code {os.WEXITSTATUS(status)} in the middle of the case"
    return None, f"the child process stopped (wait status {status})"
