"""Crash isolation: a target run in a supervised child process, so that a native death is a finding.

A segfault, an abort or an endless loop inside a C library would take the campaign
down with it — no seed, no report. :class:`IsolatedTarget` stands in for the target a
``--target`` value names and runs every case in a child (:mod:`fuzz.targets.isolated_child`:
a fork server that forks runners), one round trip per case. The child publishes the
index of the op it is running in shared memory, so when it dies the supervisor knows
where: a signal, an abort, a sanitizer report, a confirmed hang or a breach of the
``op_memory`` limit becomes a :class:`~fuzz.targets.base.Crash` naming the op
(``SIGSEGV at op #5 (push)``) — a finding, shrunk and saved like a mismatch. A hang is
confirmed: a case past its op limit (``--op-timeout``, or a multiple of the slowest op
measured; setup is timed apart) runs again alone with a longer limit, and one that ends
then is only slow (:meth:`IsolatedTarget.take_slow`: reported, never a seed). A dead
runner is replaced by a fresh fork; once a failure is being shrunk or reduced
(:attr:`IsolatedTarget.fresh`) every case gets a fresh runner, so a candidate never
inherits the state an earlier one left behind.

Native targets are isolated by default (:func:`is_native`: ``ring-c``, ``cuda-index``,
every ``c:`` library, the C mutants, the CUDA targets); ``--isolate`` isolates any target.
"""

from __future__ import annotations

import copy
from typing import Any

from fuzz.config import OP_MEMORY_MB, CampaignConfig
from fuzz.ops import Case
from fuzz.targets import registry
from fuzz.targets.base import Crash, HarnessFault, Mismatch, RunStats, Target
from fuzz.targets.supervisor import (  # noqa: F401 - re-exported: where tests and the bench look for them
    NATIVE_BUILTINS, Supervisor, describe_death, is_native, runner_key, sanitizer_environment, sanitizer_report,
)


#: Code a user names runs in a supervised child by default too: most Python caches call native code, and only a
#: supervising process outlives a segfault, an ``os._exit`` or a hang in it with the case in flight (a crash
#: finding with its seed, never a dead campaign); ``--no-isolate`` runs it in process.
USER_CODE = ("py:", "paged-py:", "py-decoder:")


def should_isolate(spec: str, config: CampaignConfig) -> bool:
    if config.isolate is None:
        return is_native(spec) or spec.startswith(USER_CODE) or config.sanitize
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


class IsolatedTarget(Target):
    """The target ``spec`` names, run case by case in a supervised child process.

    Stands in for the real target everywhere a :class:`Target` goes: its name, the attributes
    of :data:`~fuzz.targets.isolated_child.FORWARDED` (``kind``, ``window_max``, ``max_tokens``,
    ``bad_kinds``, ``traced``, ``width``, ``dtype``, ...), ``versions()``, ``tolerances()`` and
    ``accepts`` are the child's target's. :meth:`configured` returns another view of the same
    child whose runners run ``target.configured(config)`` (so ``--width``/``--dtype`` reach the
    implementation). Raises :class:`TargetError` at construction when the child cannot build the target.
    """

    def __init__(self, spec: str, *, op_timeout: float | None = None, op_memory: int | None = OP_MEMORY_MB,
                 sanitize: bool = False):
        self.spec = spec
        self.config: CampaignConfig | None = None
        self._child = Supervisor(spec, op_timeout=op_timeout, op_memory=op_memory, sanitize=sanitize)
        self._stand_in(self._child.hello(None))

    def _stand_in(self, meta: dict[str, Any]) -> None:
        self._meta = meta
        self.name = meta["name"]
        for attr, value in meta["attrs"].items():
            setattr(self, attr, value)

    @property
    def op_timeout(self) -> float:
        """Seconds one op may run now (``--op-timeout``, or what the measured cost gives)."""
        return self._child.op_timeout

    def take_slow(self) -> list[dict[str, Any]]:
        """The cases that timed out once and ended when run again alone since the last call: slow, not hung
        (a line each in the report, never a finding)."""
        return self._child.take_slow()

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
        if runner_key(config) == runner_key(self.config):
            if config == self.config:
                return self
            same = copy.copy(self)  # the same runner serves it: no fork, no hello
            same.config = config
            return same
        other = copy.copy(self)
        other.config = config
        other._stand_in(self._child.hello(config))
        return other

    def versions(self) -> dict[str, str]:
        return dict(self._meta.get("versions", {}))

    def tolerances(self) -> dict[str, dict[str, float]]:
        return {k: dict(v) for k, v in self._meta.get("tolerances", {}).items()}

    def finding_links(self) -> dict[str, dict[str, str]]:
        return {k: dict(v) for k, v in self._meta.get("finding_links", {}).items()}

    def probe_crashes(self) -> list:
        """The child's target's (its probes ran in the child, when it built the target)."""
        return list(self._meta.get("probe_crashes", []))

    def accepts(self, case: Case) -> str | None:
        why = super().accepts(case)
        if why is not None or not self._meta.get("custom_accepts"):
            return why
        reply = self._call(("accepts", case))
        if reply[0] != "accepts":
            raise HarnessFault(self.name, reply[1])
        return reply[1]

    def known_hits(self, case: Case) -> set[str]:
        if not getattr(self, "knows_findings", False):
            return set()
        reply = self._call(("known", case))
        if reply[0] != "known":
            raise HarnessFault(self.name, reply[1])
        return set(reply[1])

    def run(self, case: Case) -> RunStats:
        reply = self._call(("run", None, case))
        tag = reply[0]
        if tag == "ok":
            return RunStats(reply[1], set(reply[2]), dict(reply[3]), dict(reply[4]), dict(reply[5]), reply[6], reply[7])
        if tag == "mismatch":
            if reply[4]:  # a paged sequence past the rule's bound: an efficiency finding
                from fuzz.paged.checks import OverBound

                raise OverBound(self.name, reply[1], reply[2], reply[3])
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


