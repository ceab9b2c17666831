"""Running a campaign over several targets, in this process or in N worker processes.

Workers split the targets (:func:`fuzz.schedule.assign`: with at least as many targets as workers, each
target runs in one worker, the kinds dealt evenly; with fewer, each target runs in several), each with
the whole time budget and its own derived Hypothesis seed; all of them share one example database (a
directory, or a Redis server via ``redis://`` so several machines pool what they find).
Workers stream progress snapshots to the parent, which merges them per target:
examples, tokens and phase counts add up, rates are totals over wall time, and
findings are de-duplicated by signature (DESIGN §4, distinct findings: two workers
that found one bug report one finding; a second seed a worker saved for it in this
campaign is removed, so one bug leaves one seed).

Stopping (:class:`StopRequest`): the first Ctrl-C or SIGTERM asks every campaign to
stop at its next example — a failure being shrunk or reduced is cut short and its
smallest case so far saved — and the parent waits for the workers' final reports
before it writes the summary; a second Ctrl-C interrupts at once. A worker that dies
is reported with how it died; the target it was running is marked with that fault
(never "running", never clean), and the smallest failing case it had published is
saved by the parent. The example database degrades instead of failing the campaign
(:class:`FallbackDatabase`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue as queue_mod
import signal
import sys
import time
from pathlib import Path
from typing import Callable

from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase, InMemoryExampleDatabase

from fuzz.campaign import save_failure
from fuzz.config import CampaignConfig
from fuzz.results import TargetResult, merge
from fuzz.targets.base import HarnessInterrupt, Target

DEFAULT_DB = ".hypothesis/kvwindow"
#: Memory a worker process may take (with its isolated child): ``--workers`` is bounded by what is available.
WORKER_MEMORY = 256 << 20
#: Worker processes per usable core at most (they share the cores; more only adds switching).
WORKERS_PER_CORE = 4


class DatabaseError(ValueError):
    """A ``--db`` value that cannot be opened (a usage error)."""


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def auto_workers() -> int:
    """``--workers auto``: one worker per usable core, within :func:`max_workers`."""
    return max(1, min(usable_cores(), max_workers()))


def max_workers() -> int:
    """The largest ``--workers``: :data:`WORKERS_PER_CORE` per usable core, and one per
    :data:`WORKER_MEMORY` of available memory (at least 1)."""
    cores = usable_cores()
    available = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, AttributeError):
            available = WORKER_MEMORY * WORKERS_PER_CORE * cores
    return max(1, min(WORKERS_PER_CORE * cores, available // WORKER_MEMORY))


class FallbackDatabase(ExampleDatabase):
    """An example database that degrades instead of failing the campaign.

    The database is the harness's, not the target's: a Redis server that goes away
    mid-campaign must not turn into a failure of the target (or a seed). The first
    error of the backend switches this database to the local directory
    :data:`DEFAULT_DB` (or to memory, when the local directory was the backend) with a
    warning printed once and kept in :attr:`warnings` for the report.
    """

    def __init__(self, backend: ExampleDatabase, spec: str, local: str = DEFAULT_DB):
        super().__init__()
        self.backend, self.spec, self.local = backend, spec, local
        self.active = backend
        self.warnings: list[str] = []

    def _degrade(self, error: Exception) -> None:
        if isinstance(self.active, InMemoryExampleDatabase):
            raise error
        if self.active is self.backend and self.spec != self.local:
            nxt: ExampleDatabase = DirectoryBasedExampleDatabase(self.local)
            where = f"the local directory {self.local}"
        else:
            nxt, where = InMemoryExampleDatabase(), "an in-memory database"
        why = f"{type(error).__name__}: {error}".splitlines()[0][:300]
        msg = (f"the example database {self.spec if self.active is self.backend else self.local} failed ({why}); "
               f"continuing with {where} (examples found from now on are not shared)")
        self.warnings.append(msg)
        print(f"kvwindow: warning: {msg}", file=sys.stderr, flush=True)
        self.active = nxt

    def _call(self, fn: Callable[[ExampleDatabase], object]):
        while True:
            try:
                return fn(self.active)
            except Exception as e:  # noqa: BLE001 - any error of the backend
                self._degrade(e)

    def save(self, key: bytes, value: bytes) -> None:
        self._call(lambda db: db.save(key, value))

    def fetch(self, key: bytes):
        # fetch is a generator: materialise it so that its errors surface here
        yield from self._call(lambda db: list(db.fetch(key)))  # type: ignore[misc]

    def delete(self, key: bytes, value: bytes) -> None:
        self._call(lambda db: db.delete(key, value))

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self._call(lambda db: db.move(src, dest, value))


def open_database(spec: str | None) -> FallbackDatabase:
    """A directory path (created if missing) or a ``redis://`` URL, behind :class:`FallbackDatabase`."""
    spec = spec or DEFAULT_DB
    if spec.startswith(("redis://", "rediss://", "unix://")):
        try:
            import redis
            from hypothesis.extra.redis import RedisExampleDatabase
        except ModuleNotFoundError as e:
            raise DatabaseError(f"--db {spec}: the redis client is not installed (pip install 'kvwindow[dev]')") from e
        try:
            client = redis.Redis.from_url(spec, socket_connect_timeout=3, socket_timeout=10)
        except Exception as e:  # noqa: BLE001 - a URL redis cannot parse ('redis://[::1', a port of 99999)
            raise DatabaseError(f"--db {spec}: not a usable redis URL ({type(e).__name__}: {e}); expected "
                                "redis://host:port/n") from e
        try:
            client.ping()
        except Exception as e:  # noqa: BLE001
            raise DatabaseError(f"--db {spec}: cannot reach Redis: {e}") from e
        return FallbackDatabase(RedisExampleDatabase(client), spec)
    if "://" in spec:
        raise DatabaseError(f"--db {spec}: expected a directory or a redis:// URL")
    path = Path(spec)
    if path.exists() and not path.is_dir():
        raise DatabaseError(f"--db {spec}: exists and is not a directory")
    return FallbackDatabase(DirectoryBasedExampleDatabase(str(path)), spec)


class StopRequest:
    """SIGINT and SIGTERM as a request to stop: the first sets the flag (campaigns stop at their next
    example and keep what they found), a second SIGINT raises ``KeyboardInterrupt`` at once.

    Use as a context manager in the main thread; calling the object says whether a stop was requested."""

    def __init__(self, signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)):
        self.signals = signals
        self.signum: int | None = None
        self._old: dict[int, object] = {}

    def __call__(self) -> bool:
        return self.signum is not None

    def _handle(self, signum, frame) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            raise HarnessInterrupt(signum)  # the harness's own: code under test raising one is a crash
        self.signum = signum

    def __enter__(self) -> "StopRequest":
        for s in self.signals:
            self._old[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)  # type: ignore[arg-type]
        self._old.clear()


def worker_seed(campaign_seed: int | None, index: int) -> int | None:
    return None if campaign_seed is None else campaign_seed + 7919 * index


def _run_targets(config: CampaignConfig, get_target: Callable[[str], Target], *, database: ExampleDatabase | None,
                 stop: Callable[[], bool], publish: Callable[[TargetResult], None],
                 close_after: bool = False) -> list[TargetResult]:
    """Run ``config.targets`` within ``config.seconds`` as :mod:`fuzz.schedule` spends it (coverage first)."""
    from fuzz.schedule import run_targets

    return run_targets(config, get_target, database=database, stop=stop, publish=publish, close_after=close_after)


def run_in_process(config: CampaignConfig, targets: list[Target], *, database: ExampleDatabase | None = None,
                   on_update: Callable[[TargetResult], None] | None = None,
                   stop: Callable[[], bool] | None = None) -> tuple[list[TargetResult], bool]:
    """The single-process campaign over ``targets`` (resolved from ``config.targets`` by the caller);
    returns ``(results, interrupted)``. ``stop`` (e.g. a :class:`StopRequest`) ends it early."""
    by_spec = dict(zip(config.targets, targets))
    interrupted = {"v": False}
    last_pub: dict = {"t": 0.0}
    results: list[TargetResult] = []

    def publish(r: TargetResult) -> None:
        now = time.monotonic()
        if on_update is not None and (r.done or now - last_pub["t"] >= 0.1 or last_pub.get(r.name) != r.phase):
            last_pub["t"], last_pub[r.name] = now, r.phase
            on_update(r)

    def stopping() -> bool:
        return interrupted["v"] or (stop is not None and stop())

    try:
        results = _run_targets(config, by_spec.__getitem__, database=database, stop=stopping, publish=publish)
    except KeyboardInterrupt:  # between targets; fuzz_target handles its own
        return results, True
    return results, any(r.interrupted for r in results) or stopping()


# ---------------------------------------------------------------------------
# Worker processes


def _worker_main(index: int, config: CampaignConfig, q, stop_event) -> None:
    from fuzz.targets import isolated  # each process resolves the targets it runs from their --target values

    pid = os.getpid()
    last = {"t": 0.0}
    asked = StopRequest((signal.SIGINT,))

    def publish(r: TargetResult) -> None:
        now = time.monotonic()
        if r.done or r.pending is not None or now - last["t"] >= 0.2:
            last["t"] = now
            q.put(("progress", index, pid, r.to_json()))

    try:
        with asked:
            database = open_database(config.db) if config.db is not None else None
            results = _run_targets(config, lambda spec: isolated.resolve(spec, config), database=database,
                                   stop=lambda: stop_event.is_set() or asked(), publish=publish, close_after=True)
        q.put(("done", index, pid, [r.to_json() for r in results]))
    except KeyboardInterrupt:
        q.put(("done", index, pid, []))
    except BaseException as e:  # noqa: BLE001 - report anything to the parent
        q.put(("error", index, pid, f"{type(e).__name__}: {e}"))


def _death(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"died of {signal.Signals(-code).name}"
        except ValueError:
            return f"died of signal {-code}"
    return f"exited with code {code}"


def _drop_duplicate_seeds(r: TargetResult) -> None:
    """Remove the seeds workers saved in this campaign for a signature another worker saved first (:func:`merge`
    lists them; a seed that was already stored before the campaign is never in the list)."""
    kept = {f.seed_path for f in r.failures}
    for path in r.duplicate_seeds:
        if path in kept:
            continue
        try:
            os.unlink(path)
        except OSError as e:
            r.warnings.append(f"{r.name}: could not remove the duplicate seed {path}: {e.strerror or e}")
    r.duplicate_seeds = []


def run_workers(config: CampaignConfig, *, on_update: Callable[[TargetResult], None] | None = None,
                grace: float = 60.0, stop: Callable[[], bool] | None = None,
                ) -> tuple[list[TargetResult], bool, list[int], list[str]]:
    """Run the campaign in ``config.workers`` processes; returns ``(merged results, interrupted, worker pids,
    worker errors)``. Every worker that failed or died is one line of the errors, and the target it was
    running carries that line as a fault (its smallest failing case so far, if any, is saved here)."""
    workers = config.workers
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    stop_event = ctx.Event()
    from fuzz.schedule import assign

    plan = assign(config.targets, workers)
    procs = []
    for i in range(workers):
        specs, replicas = plan[i]
        per_worker_max = None if config.max_examples is None else max(1, -(-config.max_examples // replicas))
        mine = config.replace(targets=specs, max_examples=per_worker_max, replicas=replicas,
                              campaign_seed=worker_seed(config.campaign_seed, i))
        p = ctx.Process(target=_worker_main, args=(i, mine, q, stop_event),
                        name=f"kvwindow-worker-{i}", daemon=True)
        p.start()
        procs.append(p)
    latest: dict[tuple[int, str], TargetResult] = {}
    pids: dict[int, int] = {}
    finished: set[int] = set()
    errors: list[str] = []
    interrupted = False
    deadline = None

    def publish(name: str) -> None:
        if on_update is not None:
            on_update(merge(name, [r for (i, n), r in latest.items() if n == name]))

    def worker_failed(i: int, why: str) -> None:
        """Worker ``i`` ended without its final report: mark what it was running, keep what it had found."""
        running = [r for (w, _), r in latest.items() if w == i and not r.done]
        line = f"worker {i} {why}" + (f" while running {', '.join(r.name for r in running)}" if running else "")
        errors.append(line)
        for r in running:
            r.faults.append(line)
            if r.pending is not None:
                note = f"worker {i} stopped while shrinking it: the smallest failing case it had reported"
                r.failures.append(save_failure(r.pending, config, r.campaign_seed, note=note))
                r.pending = None
            r.done, r.phase = True, "done"
            publish(r.name)

    while len(finished) < workers:
        try:
            if stop is not None and stop() and deadline is None:
                interrupted = True
                stop_event.set()
                deadline = time.monotonic() + grace
            try:
                msg = q.get(timeout=0.5)
            except queue_mod.Empty:
                dead = [i for i, p in enumerate(procs) if not p.is_alive() and i not in finished]
                for i in dead:  # died without reporting (killed, crashed interpreter)
                    finished.add(i)
                    worker_failed(i, f"{_death(procs[i].exitcode)} without a report")
                if deadline is not None and time.monotonic() > deadline:
                    for i in range(workers):
                        if i not in finished:
                            worker_failed(i, f"did not stop within {grace:g} s of the stop request")
                    break
                continue
            kind, i, pid, payload = msg
            pids[i] = pid
            if kind == "progress":
                r = TargetResult.from_json(payload)
                latest[(i, r.name)] = r
                publish(r.name)
            elif kind == "done":
                finished.add(i)
                for d in payload:
                    r = TargetResult.from_json(d)
                    r.done = True
                    latest[(i, r.name)] = r
                    publish(r.name)
                for (w, n), r in list(latest.items()):  # interrupted between progress and the final report
                    if w == i and not r.done:
                        r.done, r.interrupted = True, True
                        publish(n)
            else:
                finished.add(i)
                worker_failed(i, f"failed: {payload}")
        except KeyboardInterrupt:
            interrupted = True
            stop_event.set()
            deadline = time.monotonic() + grace
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.terminate()
    names = list(dict.fromkeys(n for (_, n) in latest))
    merged = [merge(n, [r for (i, m), r in latest.items() if m == n]) for n in names]
    for r in merged:
        _drop_duplicate_seeds(r)
    interrupted = interrupted or any(r.interrupted for r in merged)
    return merged, interrupted, [pids[i] for i in sorted(pids)], errors
