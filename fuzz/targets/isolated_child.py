"""The child side of :mod:`fuzz.targets.isolated`: a fork server and the runners it forks.

``python -m fuzz.targets.isolated_child CTRL_FD SLOT_FD OPTIONS_JSON`` starts the
*fork server*: it imports the harness once, builds the target once when that is safe
before a fork (the native C targets; torch and CUDA targets are built in each runner,
since neither survives a fork after use), then forks one *runner* per request of the
supervising process. A runner drives whole cases: it receives a :class:`~fuzz.ops.Case`,
runs it, and answers with the outcome, while the target writes the index of the op it
is running into the shared slot (:attr:`fuzz.targets.base.Target.op_slot`). When the
runner dies — a signal, an abort, a sanitizer report, a kill on timeout — the slot still
names the op, and the fork server tells the supervisor how the runner ended.

Forking from a warm server costs milliseconds where starting Python costs a tenth of a
second or more, so a crash found in the middle of a campaign is shrunk in fresh runners
at the speed of ordinary examples. Terminal signals do not reach these processes (the
supervisor starts them in a session of their own), and both die with their parent.
"""

from __future__ import annotations

import json
import mmap
import os
import signal
import socket
import sys
from typing import Any

from fuzz.targets.progress import DONE, IDLE, OP, POS, RUN, SEQ, SETUP, WINDOW, WORDS, running_op, trace_buffer

#: Largest control message (JSON) in bytes.
CTRL_MAX = 1 << 16


def send_msg(sock: socket.socket, obj: Any, fds: tuple[int, ...] = ()) -> None:
    """One JSON message on the control socket (a ``SOCK_SEQPACKET`` pair: one send, one message)."""
    data = json.dumps(obj).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def recv_msg(sock: socket.socket) -> tuple[Any, list[int]]:
    """``(message, fds)``; ``(None, [])`` when the peer has gone."""
    try:
        data, fds, _, _ = socket.recv_fds(sock, CTRL_MAX, 4)
    except (ConnectionError, OSError):
        return None, []
    if not data:
        return None, []
    return json.loads(data), fds


def die_with_parent(parent: int) -> None:
    """Ask the kernel to kill this process when its parent dies (Linux), and exit now if it already has."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)


def describe(e: BaseException) -> dict[str, str]:
    """An exception raised while building the target, as the supervisor reports it."""
    from fuzz.targets.base import TargetError

    kind = "target" if isinstance(e, TargetError) else "harness"
    return {"kind": kind, "message": str(e) if kind == "target" else f"{type(e).__name__}: {e}"}


def build(spec: str, opts: dict[str, Any]):
    """The target ``spec`` names; with ``sanitize``, ``ring-c`` is the ring compiled with ASan + UBSan."""
    from fuzz.targets import registry

    if opts.get("sanitize") and spec == "ring-c":
        from fuzz.targets.ring import make_c_library

        target = make_c_library(str(sanitized_ring_library()))
        target.name = "ring-c"
        return target
    return registry.resolve(spec)


def sanitized_ring_library():
    """``csrc/ringkv.c`` compiled with ASan + UBSan into the build cache, once per version of the sources."""
    import hashlib

    from impl import _ring_build as rb
    from impl.mutants.catalogue import cache_dir

    sources = sorted((n, (rb.CSRC / n).read_text()) for n in rb.SOURCES)
    digest = hashlib.sha256(repr((rb.CFLAGS, rb.SANITIZE_FLAGS, sources)).encode()).hexdigest()[:16]
    lib = cache_dir().parent / "sanitized" / f"libringkv-{digest}.so"
    return lib if lib.exists() else rb.compile_ring_library(lib, sanitize=True)


#: The attributes an isolated target copies from its child's target (those the target has): everything the
#: campaign, the strategies, replay, the kill table and the bench read from a target besides its methods.
FORWARDED = ("kind", "window_max", "max_tokens", "publishes_ops", "bad_kinds", "traced", "width", "dtype",
             "instances", "widths", "width_multiple", "dtypes", "knows_findings", "every_path_runs", "paged_ops",
             "max_rollback", "notes", "thread_safe")


def meta(target) -> dict[str, Any]:
    """What the supervisor needs to stand in for ``target``: its name, :data:`FORWARDED`, what its
    ``versions()``, ``tolerances()`` and ``probe_crashes()`` return, and whether it has an ``accepts`` of its own."""
    from fuzz.targets.base import Target

    return {"name": target.name, "attrs": {a: getattr(target, a) for a in FORWARDED if hasattr(target, a)},
            "versions": dict(target.versions()), "tolerances": dict(target.tolerances()),
            "finding_links": dict(target.finding_links()),
            "probe_crashes": list(target.probe_crashes()),  # the probes ran here, when the child built the target
            "custom_accepts": type(target).accepts is not Target.accepts}


def configure(target, config: dict[str, Any] | None):
    """``target.configured`` with the campaign configuration a fork request carries (``None``: as built)."""
    if config is None:
        return target
    from fuzz.config import CampaignConfig

    return target.configured(CampaignConfig(**config))


def limit_memory(megabytes: int | None) -> None:
    if not megabytes:
        return
    import resource

    limit = int(megabytes) << 20
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def run_one(target, case, slot, opts: dict[str, Any], custom_accepts: bool) -> tuple:
    """Run ``case``; the outcome as a plain tuple (the supervisor raises it under its view's name)."""
    from fuzz.targets.base import Crash, HarnessFault, Mismatch

    def op_at() -> tuple[int | None, Any]:
        if not target.publishes_ops:
            return None, None
        i = running_op(slot, target.trace_sums)
        return i, (case.ops[i] if 0 <= i < len(case.ops) else None)

    memory = f"broke the memory limit of the child ({opts.get('op_memory')} MiB, --op-memory)"
    try:
        if custom_accepts:
            why = target.accepts(case)
            if why is not None:
                return ("reject", why)
        stats = target.run(case)
        return ("ok", stats.tokens, stats.phases, stats.known, stats.efficiency, stats.efficiency_first, stats.calls,
                stats.call_seconds)
    except Mismatch as e:
        return ("mismatch", e.index, e.op, e.detail, getattr(e, "efficiency", False))
    except Crash as e:
        if isinstance(e.__cause__, MemoryError) and opts.get("op_memory"):
            return ("crash", e.index, e.op, memory, None)
        return ("crash", e.index, e.op, e.detail, e.signal)
    except HarnessFault as e:  # the limit is the child's: the oracle running out under it is the case's doing
        if isinstance(e.__cause__, MemoryError) and opts.get("op_memory"):
            return ("crash", *op_at(), memory, None)
        return ("harness", e.reason)
    except MemoryError:
        return ("crash", *op_at(), memory, None)
    except Exception as e:  # noqa: BLE001 - unclassified: the implementation raised (failure_kind's reading)
        return ("crash", *op_at(), f"raised {type(e).__name__}: {e}", None)


def bulk_one(target, msg: tuple, slot) -> tuple:
    """A bulk request: ``("bulk", seq, config, campaign_seed)`` runs the campaign's bulk streams
    (``target.bulk``, unreduced: the supervisor reduces a failure in fresh runners); ``("probe", seq, w, n)``
    runs one stream (``target.probe_trace``). The slot says which stream, segment and push is running."""
    from fuzz.targets.base import HarnessFault

    slot[POS], slot[WINDOW], slot[DONE] = 0, 0, 0
    try:
        if msg[0] == "bulk":
            return ("bulk", target.bulk(msg[2], msg[3]))
        return ("probe", target.probe_trace(msg[2], msg[3]))
    except HarnessFault as e:
        return ("harness", e.reason)
    except Exception as e:  # noqa: BLE001 - the streams catch the ring's own failures: this is the harness's
        return ("harness", f"{type(e).__name__} in the bulk phase: {e}")


def runner(fd: int, target, spec: str, opts: dict[str, Any], slot, config: dict[str, Any] | None = None) -> int:
    """A forked runner: build the target if the fork server has not, configure it with ``config`` (the
    campaign's, from the fork request), say hello (its metadata), then run cases until the supervisor hangs up."""
    from multiprocessing.connection import Connection

    die_with_parent(opts["zygote"])
    conn = Connection(fd)
    if opts.get("op_memory") and not opts.get("sanitize") and not spec.startswith("cuda-"):
        limit_memory(opts["op_memory"])
    try:
        target = configure(build(spec, opts) if target is None else target, config)
    except BaseException as e:  # noqa: BLE001
        conn.send(("error", describe(e)))
        return 0
    target.op_slot, target.trace_sums = slot, trace_buffer(slot)
    from fuzz.targets.progress import set_process_slot

    set_process_slot(slot)  # ``setting_up()`` in a py: cache marks its setup in this slot
    info = meta(target)
    custom_accepts = info["custom_accepts"]
    conn.send(("meta", info))
    while True:  # the runner sleeps between cases: spinning here would take the core the supervisor needs
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return 0
        if msg[0] in ("run", "bulk", "probe"):
            slot[SEQ], slot[OP], slot[RUN], slot[SETUP] = msg[1], -1, 0, 0
            reply = run_one(target, msg[2], slot, opts, custom_accepts) if msg[0] == "run" else \
                bulk_one(target, msg, slot)
            slot[OP] = IDLE
        elif msg[0] == "accepts":
            reply = ("accepts", target.accepts(msg[1]))
        elif msg[0] == "known":
            reply = ("known", sorted(target.known_hits(msg[1])))
        else:
            reply = ("harness", f"unknown request {msg[0]!r}")
        conn.send(reply)


def serve(ctrl: socket.socket, spec: str, opts: dict[str, Any], slot) -> int:
    """The fork server's loop: ``fork`` (with the runner's socket attached) and ``wait`` requests."""
    children: set[int] = set()
    target = None
    try:
        import numpy  # noqa: F401 - what every runner needs, imported once before the forks
        import fuzz.targets.cache  # noqa: F401
        from fuzz.targets import registry  # noqa: F401

        for name in opts.get("preimport", []):
            try:
                __import__(name)
            except ImportError:
                pass  # the runner's build says what is missing
        if opts.get("preresolve"):
            target = build(spec, opts)
    except BaseException as e:  # noqa: BLE001
        send_msg(ctrl, {"ready": False, "error": describe(e)})
        return 0
    send_msg(ctrl, {"ready": True})
    opts = dict(opts, zygote=os.getpid())
    while True:
        msg, fds = recv_msg(ctrl)
        if msg is None:
            break
        if msg.get("op") == "fork" and len(fds) == 1:
            try:
                pid = os.fork()
            except OSError as e:
                os.close(fds[0])
                send_msg(ctrl, {"error": f"fork failed: {e}"})
                continue
            if pid == 0:
                code = 1
                try:
                    ctrl.close()
                    code = runner(fds[0], target, spec, opts, slot, msg.get("config"))
                finally:
                    os._exit(code)
            os.close(fds[0])
            children.add(pid)
            send_msg(ctrl, {"pid": pid})
        elif msg.get("op") == "wait":
            pid = int(msg["pid"])
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:
                status = None
            children.discard(pid)
            send_msg(ctrl, {"status": status})
        else:
            for fd in fds:
                os.close(fd)
            send_msg(ctrl, {"error": f"unknown request {msg!r}"})
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
    return 0


def main(argv: list[str]) -> int:
    ctrl_fd, slot_fd, raw = int(argv[0]), int(argv[1]), argv[2]
    opts = json.loads(raw)
    die_with_parent(int(opts["parent"]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # interruption is the supervisor's to handle
    ctrl = socket.socket(fileno=ctrl_fd)
    slot = memoryview(mmap.mmap(slot_fd, WORDS * 8)).cast("q")
    return serve(ctrl, opts["spec"], opts, slot)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
