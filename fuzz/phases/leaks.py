"""The ``leaks`` phase: memory a reset or a destroy should have returned, growing with them, is a finding (kind
``leak``, DESIGN §4).

A probe drives one fresh cache of the target through many streams — each a reset (alternating two windows, so a
cache that reallocates on a new window does) and one chunk of ``2W + 3`` entries (a fill, the first eviction and
more) — and, separately, builds, fills and destroys many caches. It measures the process's live heap at three
points after a warm-up: glibc's ``mallinfo2`` (bytes in use, ``uordblks + hblkhd``) for native libraries, whose
``malloc`` it is; ``tracemalloc`` for Python caches. The same payload arrays are reused for every stream, so the
harness allocates nothing per round. A leak is growth between the second and third points of more than
:data:`LEAK_BYTES` that also grew between the first two: memory that grows with the resets or destroys, not a
one-time cache.

The probe runs in a child process (``python -m fuzz.phases.leaks SPEC WIDTH``) because the code under test is
hostile and the heap must be the library's alone; a child that dies or cannot build the target leaves the phase
``skipped`` with the reason (a native death is the other phases' finding). It applies to cache targets a case
builds afresh (``instances``): ``ring-c``, ``c:`` libraries, ``py:`` classes, ``pyring``, the ring mutants. Pools
(``paged-*``) are not probed here: the paged checker already fails a block that does not return to the free list
when no table references it (DESIGN §1, a mismatch).

The finding is saved as a seed whose ops are the probe's streams (``reset:W chunk:2W+3`` repeated); its
``found.kind`` is ``leak``. Replaying it checks contents only; ``kvwindow fuzz --target SPEC`` runs the probe again.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
from typing import Any, Optional

import numpy as np

from fuzz.ops import Case, Chunk, Reset
from fuzz.phases.base import Phase
from fuzz.phases.context import Campaign, Found
from fuzz.targets.base import Mismatch

#: Growth (bytes) between the probe's last two points that is a leak: 16 KiB over 100 streams is 160 bytes each;
#: the held-out C leak loses 320 bytes per reset, a leaked slot array of W = 64 at width 4 loses 2.5 KiB.
LEAK_BYTES = 16 * 1024
#: Streams (or create/destroy cycles) before each measuring point: a warm-up, then two equal spans.
POINTS = (20, 120, 220)
#: The two windows the streams alternate between.
WINDOWS = (64, 65)
#: The shortest campaign (``--time``) that runs the probe: its child takes 1-4 s (start-up, ~440 small streams).
MIN_BUDGET = 10.0
#: The share of the budget the probe's child may take (at least :data:`PROBE_FLOOR` seconds) before it is stopped
#: and the phase skipped with the reason (a cache slow enough for that is not leak-checked in this campaign).
PROBE_SHARE = 0.2
#: Seconds the probe's child always gets: its start-up alone took 1-8 s on a loaded 2-core machine.
PROBE_FLOOR = 30.0


#: The targets the probe applies to: the built-in rings, and every ``c:`` library, ``py:`` class and ring mutant.
PROBED = ("ring-c", "pyring")
PROBED_PREFIXES = ("c:", "py:", "mutant:ring-", "mutant:c-")


class Leak(Mismatch):
    """Memory that a reset or destroy should have returned grew with them."""

    leak = True


def _heap() -> Any:
    """A function returning the process's heap bytes in use (``mallinfo2``), or ``None`` without glibc."""
    try:
        libc = ctypes.CDLL(None)
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                   "fsmblks", "uordblks", "fordblks", "keepcost")]

    fn.restype = Mallinfo2

    def used() -> int:
        m = fn()
        return int(m.uordblks + m.hblkhd)

    return used


def probe(target: Any, width: int = 4) -> dict[str, Any]:
    """Run the reset and destroy probes on ``target`` in this process; returns what each measured."""
    import gc
    import tracemalloc

    from fuzz.targets.cache import array_cache

    native = bool(getattr(target, "traced", False))  # a ringkv.h library: its malloc is the process's
    heap = _heap() if native else None
    if heap is None:
        tracemalloc.start()

        def heap() -> int:  # noqa: F811 - the Python caches' measure
            return tracemalloc.get_traced_memory()[0]

    n = 2 * max(WINDOWS) + 3
    pos = np.arange(n, dtype=np.int64)
    keys = (np.arange(n * width, dtype=np.float32) % 4096).reshape(n, width)
    values = -keys - 1

    def stream(cache: Any, i: int) -> None:
        w = WINDOWS[i % 2]
        cache.reset(w)
        m = 2 * w + 3
        cache.push_arrays(pos[:m], keys[:m], values[:m])

    out: dict[str, Any] = {"measure": "mallinfo2" if native and _heap() else "tracemalloc", "probes": {}}
    raw = target.new_cache(width)
    cache = array_cache(raw, width)
    marks, i = [], 0
    for point in POINTS:
        while i < point:
            stream(cache, i)
            i += 1
        gc.collect()
        marks.append(heap())
    out["probes"]["reset"] = marks
    marks, i = [], 0
    for point in POINTS:
        while i < point:
            raw = target.new_cache(width)
            stream(array_cache(raw, width), i)
            close = getattr(raw, "close", None)
            if callable(close):
                close()
            del raw
            i += 1
        gc.collect()
        marks.append(heap())
    out["probes"]["destroy"] = marks
    return out


def verdict(result: dict[str, Any]) -> Optional[tuple[str, int]]:
    """``(probe, bytes grown per stream)`` of the first probe that leaked, or ``None``."""
    for name, (a, b, c) in result["probes"].items():
        if c - b > LEAK_BYTES and b > a:
            return name, (c - b) // (POINTS[2] - POINTS[1])
    return None


def leak_case(kind: str, width: int) -> Case:
    """The seed of a leak: the probe's streams as ops (``reset:W chunk:2W+3`` alternating), 200 of them."""
    ops = []
    for i in range(POINTS[2] - POINTS[1]):
        w = WINDOWS[i % 2]
        ops += [Reset(w), Chunk(2 * w + 3)]
    return Case(WINDOWS[1], tuple(ops), width)


class Leaks(Phase):
    name = "leaks"

    def not_applicable(self, camp: Campaign) -> Optional[str]:
        t = camp.target
        if camp.config.tester == "uniform":
            return "the uniform tester does not measure memory"
        if t.kind != "cache" or not t.instances or not (t.name in PROBED or t.name.startswith(PROBED_PREFIXES)):
            return ("not a ring cache of ringkv.h or the Python protocol (pools: the paged checker fails a block "
                    "never returned to the free list)")
        if getattr(t, "fixed_payload", False):
            return "its payload layout is its own (a device cache): no host-heap probe"
        if camp.seconds < MIN_BUDGET:
            return f"the probe's child takes seconds: it runs in campaigns of --time {MIN_BUDGET:g} or more"
        return None

    def run(self, camp: Campaign) -> None:
        if camp.done:
            return
        rec = camp.phase_record(self.name)
        width = camp.config.width or 4
        began = time.monotonic()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), env.get("PYTHONPATH", "")) if p)
        limit = max(PROBE_FLOOR, PROBE_SHARE * camp.seconds)
        try:
            proc = subprocess.run([sys.executable, "-m", "fuzz.phases.leaks", camp.target.name, str(width)],
                                  capture_output=True, text=True, timeout=limit, env=env)
        except subprocess.TimeoutExpired:
            camp.mark(self.name, "skipped", f"the probe took more than {limit:.0f} s ({PROBE_SHARE:.0%} of the "
                                            f"budget, at least {PROBE_FLOOR:g} s): give it more --time")
            return
        rec["seconds"] += time.monotonic() - began
        rec["examples"] += 1
        line = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        try:
            result = json.loads(line)
        except json.JSONDecodeError:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
            camp.mark(self.name, "skipped", f"the probe's child ended with status {proc.returncode}: {tail}")
            return
        camp.mark(self.name, "ran")
        rec["measure"] = result["measure"]
        rec["probes"] = result["probes"]
        found = verdict(result)
        if found is None:
            return
        kind, per = found
        a, b, c = result["probes"][kind]
        what = "reset (alternating W = 64 and 65)" if kind == "reset" else "create, fill and destroy"
        error = Leak(camp.target.name, -1, None,
                     f"leak: {result['measure']} heap grew {c - b:,} bytes over {POINTS[2] - POINTS[1]} x {what} "
                     f"after a warm-up (~{per:,} bytes each; {b - a:,} over the span before): memory a {kind} "
                     "should return is kept")
        res = camp.res
        if res.examples_to_fail is None:  # time to bug: the campaign's first finding
            res.examples_to_fail = res.examples + 1
            res.seconds_to_fail = round(camp.elapsed(), 4)
            res.tokens_to_fail = res.tokens + sum(2 * WINDOWS[i % 2] + 3 for i in range(2 * POINTS[2]))  # the probe's
        camp.bulk_found = Found(leak_case(kind, width), error)  # kept as found: a leak case is never reduced
        camp.settle(camp.bulk_found)  # saved now; the campaign explores on (--stop-on-first: it ends here)


def main(argv: list[str]) -> int:
    from fuzz.targets import registry

    spec, width = argv[0], int(argv[1])
    target = registry.resolve(spec)
    print(json.dumps(probe(target, width)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
