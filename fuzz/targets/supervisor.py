"""The supervising side of crash isolation: the fork server a native target's cases run in, its runners,
one request at a time, and what a death or a hang means (:class:`Supervisor`).

:mod:`fuzz.targets.isolated` is the target the campaign sees (:class:`~fuzz.targets.isolated.IsolatedTarget`);
:mod:`fuzz.targets.isolated_child` is the code on the other side of the socket. A runner that dies
running a case — a signal, an abort, a sanitizer report, a confirmed hang, a breach of ``op_memory`` —
becomes a crash reply naming the op the shared slot shows; a fork server that dies is restarted; a runner is
forked per configuration, and per case while a failure is being shrunk (:attr:`Supervisor.fresh`).

A slow machine is never a finding (DESIGN §4). Time the target spends in one-time setup (a model built,
converted or compiled, marked with :meth:`fuzz.targets.base.Target.setting_up`) is timed apart under
:data:`~fuzz.config.SETUP_TIMEOUT` and never counted as an op; an op's limit is ``--op-timeout`` when given,
else :data:`~fuzz.config.OP_TIMEOUT_FACTOR` times the slowest op measured so far, at least
:data:`~fuzz.config.OP_TIMEOUT`. A request that runs past its limit is run again alone, in a fresh runner, with
:data:`~fuzz.config.CONFIRM_FACTOR` times the limit: only a second timeout is a hang (a crash reply); a case that
ends then was slow, and is kept in :attr:`Supervisor.slow` (reported, never a seed).
"""

from __future__ import annotations

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

from fuzz.config import CONFIRM_FACTOR, OP_TIMEOUT, OP_TIMEOUT_FACTOR, SETUP_TIMEOUT, CampaignConfig
from fuzz.targets.base import HarnessFault, TargetError
from fuzz.targets.isolated_child import recv_msg, send_msg
from fuzz.targets.progress import (
    DONE, IDLE, OP, POS, SEQ, SETUP, WINDOW, WORDS, running_op, running_push, trace_buffer,
)


NATIVE_BUILTINS = ("ring-c", "cuda-index", "cuda-ring", "cuda-decoder", "paged-c")
#: Families isolated by default: the C libraries a user names, and the engines whose native code has been seen
#: to corrupt the heap of the process that calls it (docs/findings/ct2-static-prompt-heap-overflow.md: a campaign
#: in process died of SIGABRT and lost everything it had found).
NATIVE_PREFIXES = ("c:", "paged-c:", "ct2:")
#: Targets built on torch: their fork server imports torch once (importing it is safe before a fork; building
#: the target is not — CUDA cannot be used across a fork — so each runner builds its own).
TORCH_SPECS = ("cuda-", "decoder", "hf-", "mutant:decoder-")
#: Seconds a child may take to start and build its target (a CUDA build may compile kernels): setup, never an op.
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
    if spec in NATIVE_BUILTINS or spec.startswith(NATIVE_PREFIXES):
        return True
    if spec.startswith("mutant:"):
        from impl.mutants.catalogue import catalogue

        return any(m.name == spec[len("mutant:"):] and m.kind in ("c-ring", "paged-c") for m in catalogue())
    return False


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


def runner_key(config: CampaignConfig | None) -> tuple:
    """What of a campaign's configuration a runner's target is configured with (``Target.configured`` reads
    only these): two configurations with the same key share a runner, so a new campaign seed does not fork one."""
    if config is None:  # the target as built: what a default configuration gives
        return (None, None, False)
    return (config.width, config.dtype, config.skip_known)


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


class Supervisor:
    """One fork server, its current runner and the shared op slot: what every view of an isolated target
    shares. A runner is forked for one configuration (``None``: the target as built); a request for
    another configuration, or (``fresh``) any request after the runner ran one, gets a new runner."""

    def __init__(self, spec: str, *, op_timeout: float | None, op_memory: int | None, sanitize: bool):
        #: ``--op-timeout`` as given (``None``: the limit follows the measured cost, :attr:`op_timeout`).
        self.explicit_timeout = None if op_timeout is None else float(op_timeout)
        self.spec, self.op_memory, self.sanitize = spec, op_memory, sanitize
        self.name = spec
        #: The longest stretch (seconds) one op — outside setup — has run in a request that answered.
        self.slowest = 0.0
        #: Requests that timed out once and ended when run again alone: slow, not hung (never a finding).
        self.slow: list[dict[str, Any]] = []
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

    @property
    def op_timeout(self) -> float:
        """Seconds one op may run now: ``--op-timeout`` when given, else :data:`OP_TIMEOUT_FACTOR` x the slowest
        op measured so far, at least :data:`OP_TIMEOUT`."""
        if self.explicit_timeout is not None:
            return self.explicit_timeout
        return max(OP_TIMEOUT, OP_TIMEOUT_FACTOR * self.slowest)

    def limit_text(self) -> str:
        """Where the op limit comes from, for a message."""
        if self.explicit_timeout is not None:
            return "--op-timeout"
        return f"{OP_TIMEOUT_FACTOR:g} x the slowest op so far, at least {OP_TIMEOUT:g} s; --op-timeout sets it"

    def take_slow(self) -> list[dict[str, Any]]:
        """The slow-but-not-hung requests noted since the last call (and forget them)."""
        out, self.slow = self.slow, []
        return out

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
        if self._runner is not None and ((self.fresh and self._runner.used)
                                         or runner_key(self._runner.config) != runner_key(config)):
            self._drop_runner()
        if self._runner is None:  # building the target in the runner is setup: the startup limit, not an op's
            hello = self._fork(config, STARTUP_TIMEOUT)
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
        if reply[0] == "timed-out":
            reply = self._confirm(msg, config, reply)
        if reply[0] == "server-died":  # the runner died with the fork server, not of the case
            if not retry:
                return ("harness", f"the isolation fork server died twice{self._log_tail()}")
            return self.request(msg, config, retry=False)
        return reply

    def _confirm(self, msg: tuple, config: CampaignConfig | None, first: tuple) -> tuple:
        """Run ``msg`` again alone — a fresh runner, nothing else in it — with :data:`CONFIRM_FACTOR` times the
        limit ``first`` (a ``"timed-out"`` answer of :meth:`_await`) ran past: a second timeout is a hang (the
        crash reply); an answer is the case's outcome, and the first timeout is noted in :attr:`slow`."""
        _, crash, what, limit = first
        self._drop_runner()
        runner = self._live_runner(config)
        if msg[0] in SEQUENCED:
            self._seq += 1
            msg = (msg[0], self._seq, *msg[2:])
        mark = self._log_mark()
        began = time.monotonic()
        try:
            runner.conn.send(msg)
        except OSError:
            self._reap(runner)
            return crash
        runner.used = True
        reply = self._await(runner, msg, mark, scale=CONFIRM_FACTOR)
        if reply[0] != "timed-out":
            where = ("in setup" if what == "setup" else
                     f"at op #{crash[1]} ({_op_text(crash[2])})" if crash[0] == "crash" and crash[1] is not None else
                     f"in the {msg[0]} request")
            self.slow.append({"target": self.name, "request": msg[0], "where": where, "limit": round(limit, 3),
                              "rerun_seconds": round(time.monotonic() - began, 3),
                              "case": str(msg[2]) if msg[0] == "run" else None})
            return reply
        again = reply[1]
        detail = (f"timed out: {'setup' if what == 'setup' else 'the op'} ran longer than {limit:g} s, and longer "
                  f"than {reply[3]:g} s when run again alone in a fresh child "
                  f"({'setup limit' if what == 'setup' else self.limit_text()}); the child was killed")
        if again[0] == "crash":
            return (*again[:3], detail, *again[4:])
        if again[0] == "bulk-crash":
            return (*again[:4], detail, *again[5:])
        return again

    def _await(self, runner: _Runner, msg: tuple, mark: int, scale: float = 1.0) -> tuple:
        """The runner's reply to ``msg``; the crash reply when it dies; ``("timed-out", crash reply, "op" |
        "setup", limit)`` when the slot stands still past the limit (the runner is killed): an op past
        :attr:`op_timeout` x ``scale``, a stretch of setup past :data:`SETUP_TIMEOUT` x ``scale``. The longest
        stretch of an op (setup left out) in a request that answered raises :attr:`slowest`."""
        seq = msg[1] if msg[0] in SEQUENCED else None
        slot = self._slot
        start = time.monotonic()
        if spin_until_readable(runner.poller, SPIN_S):
            try:
                return runner.conn.recv()
            except (EOFError, OSError):
                return self._crash_reply(msg, seq, self._reap(runner), mark)
        last, since, longest = None, start, 0.0
        while True:
            readable = runner.poller.poll(POLL_S * 1000)
            now = time.monotonic()
            cur = (slot[SEQ], slot[OP], slot[POS], slot[SETUP])  # a bulk stream moves on segment by segment
            if cur != last:
                if last is not None:
                    if not last[3] & 1:
                        longest = max(longest, now - since)
                    since = now
                last = cur
            if readable:
                try:
                    reply = runner.conn.recv()
                except (EOFError, OSError):
                    break
                if not cur[3] & 1:
                    longest = max(longest, now - since)
                self.slowest = max(self.slowest, longest)
                return reply
            setup = bool(cur[3] & 1)
            limit = (SETUP_TIMEOUT if setup else self.op_timeout) * scale
            if now - since > limit:
                self._kill(runner)
                return ("timed-out", self._crash_reply(msg, seq, None, mark, timed_out=limit),
                        "setup" if setup else "op", limit)
        status = self._reap(runner)
        return self._crash_reply(msg, seq, status, mark)

    def _crash_reply(self, msg: tuple, seq: int | None, status: int | None, mark: int, *,
                     timed_out: float | None = None) -> tuple:
        """The reply a runner that died (or was killed on timeout) running ``msg`` stands for."""
        if timed_out is None and (self._proc is None or self._proc.poll() is not None):
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
        if timed_out is not None:  # the first timeout: :meth:`_confirm` runs it again before it is a hang
            detail = f"timed out: the op ran longer than {timed_out:g} s; the child was killed"
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


def _op_text(op: Any) -> str:
    text = getattr(op, "text", None)
    return text if isinstance(text, str) else str(op)


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

