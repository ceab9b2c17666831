"""Running a campaign over several targets, in this process or in N worker processes.

Every worker runs the whole target list with the same time budget and its own
derived Hypothesis seed; all of them share one example database (a directory,
or a Redis server via ``redis://`` so several machines pool what they find).
Workers stream progress snapshots to the parent, which merges them per target:
examples, tokens and phase counts add up, rates are totals over wall time, and
failures are de-duplicated by seed id (seed ids are content hashes, so two
workers that shrink to the same case save one file).

Ctrl-C: every process of the foreground group gets SIGINT; each worker ends its
current target cleanly (saving any failure found so far) and reports back, and
the parent waits for those final reports before it writes the summary.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue as queue_mod
import time
from pathlib import Path
from typing import Callable

from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from fuzz.campaign import fuzz_target
from fuzz.config import CampaignConfig
from fuzz.results import TargetResult, merge
from fuzz.targets.base import Target

DEFAULT_DB = ".hypothesis/kvwindow"


class DatabaseError(ValueError):
    """A ``--db`` value that cannot be opened (a usage error)."""


def open_database(spec: str | None) -> ExampleDatabase:
    """A directory path (created if missing) or a ``redis://`` URL."""
    spec = spec or DEFAULT_DB
    if spec.startswith(("redis://", "rediss://", "unix://")):
        try:
            import redis
            from hypothesis.extra.redis import RedisExampleDatabase
        except ModuleNotFoundError as e:
            raise DatabaseError(f"--db {spec}: the redis client is not installed (pip install 'kvwindow[dev]')") from e
        client = redis.Redis.from_url(spec, socket_connect_timeout=3)
        try:
            client.ping()
        except Exception as e:  # noqa: BLE001
            raise DatabaseError(f"--db {spec}: cannot reach Redis: {e}") from e
        return RedisExampleDatabase(client)
    if "://" in spec:
        raise DatabaseError(f"--db {spec}: expected a directory or a redis:// URL")
    path = Path(spec)
    if path.exists() and not path.is_dir():
        raise DatabaseError(f"--db {spec}: exists and is not a directory")
    return DirectoryBasedExampleDatabase(str(path))


def worker_seed(campaign_seed: int | None, index: int) -> int | None:
    return None if campaign_seed is None else campaign_seed + 7919 * index


def _run_targets(config: CampaignConfig, get_target: Callable[[str], Target], *, database: ExampleDatabase | None,
                 stop: Callable[[], bool], publish: Callable[[TargetResult], None]) -> list[TargetResult]:
    """Run ``config.targets`` one after another, each for an equal share of ``config.seconds``."""
    results: list[TargetResult] = []
    specs = config.targets
    start = time.monotonic()
    for i, spec in enumerate(specs):
        if stop():
            break
        target = get_target(spec)  # building a model target can take seconds: share the time after it
        # Share what is left equally among the targets not yet run (a fast finish donates its time);
        # every target gets a short floor so none is listed with zero examples.
        left = config.seconds - (time.monotonic() - start)
        per = max(min(1.0, config.seconds / len(specs)), left / (len(specs) - i))
        r = fuzz_target(target, config, seconds=per, database=database, on_progress=publish, stop=stop)
        publish(r)
        results.append(r)
        if r.interrupted:
            break
    return results


def run_in_process(config: CampaignConfig, targets: list[Target], *, database: ExampleDatabase | None = None,
                   on_update: Callable[[TargetResult], None] | None = None) -> tuple[list[TargetResult], bool]:
    """The single-process campaign over ``targets`` (resolved from ``config.targets`` by the caller);
    returns ``(results, interrupted)``."""
    by_spec = dict(zip(config.targets, targets))
    interrupted = {"v": False}
    last_pub = {"t": 0.0}

    def publish(r: TargetResult) -> None:
        now = time.monotonic()
        if on_update is not None and (r.done or now - last_pub["t"] >= 0.1):
            last_pub["t"] = now
            on_update(r)

    try:
        results = _run_targets(config, by_spec.__getitem__, database=database, stop=lambda: interrupted["v"],
                               publish=publish)
    except KeyboardInterrupt:  # between targets; fuzz_target handles its own
        return [], True
    return results, any(r.interrupted for r in results)


# ---------------------------------------------------------------------------
# Worker processes


def _worker_main(index: int, config: CampaignConfig, q, stop_event) -> None:
    from fuzz.targets import registry  # each process resolves the targets it runs from their --target values

    pid = os.getpid()
    last = {"t": 0.0}

    def publish(r: TargetResult) -> None:
        now = time.monotonic()
        if r.done or now - last["t"] >= 0.2:
            last["t"] = now
            q.put(("progress", index, pid, r.to_json()))

    try:
        database = open_database(config.db) if config.db is not None else None
        results = _run_targets(config, registry.resolve, database=database, stop=stop_event.is_set,
                               publish=publish)
        q.put(("done", index, pid, [r.to_json() for r in results]))
    except KeyboardInterrupt:
        q.put(("done", index, pid, []))
    except BaseException as e:  # noqa: BLE001 - report anything to the parent
        q.put(("error", index, pid, f"{type(e).__name__}: {e}"))


def run_workers(config: CampaignConfig, *, on_update: Callable[[TargetResult], None] | None = None,
                grace: float = 60.0) -> tuple[list[TargetResult], bool, list[int]]:
    """Run the campaign in ``config.workers`` processes; returns ``(merged results, interrupted, worker pids)``."""
    workers = config.workers
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    stop_event = ctx.Event()
    per_worker_max = None if config.max_examples is None else max(1, -(-config.max_examples // workers))
    procs = []
    for i in range(workers):
        mine = config.replace(max_examples=per_worker_max, campaign_seed=worker_seed(config.campaign_seed, i))
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

    while len(finished) < workers:
        try:
            try:
                msg = q.get(timeout=0.5)
            except queue_mod.Empty:
                dead = [i for i, p in enumerate(procs) if not p.is_alive() and i not in finished]
                for i in dead:  # died without reporting (killed, crashed interpreter)
                    finished.add(i)
                    errors.append(f"worker {i} exited with code {procs[i].exitcode} without a report")
                if deadline is not None and time.monotonic() > deadline:
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
            else:
                finished.add(i)
                errors.append(f"worker {i}: {payload}")
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
    if errors and not merged:
        raise RuntimeError("; ".join(errors))
    interrupted = interrupted or any(r.interrupted for r in merged)
    return merged, interrupted, [pids[i] for i in sorted(pids)]
