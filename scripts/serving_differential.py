"""A long differential run of one serving adapter against the C reference (issue 22, impl/serving).

    .venv-serving/bin/python scripts/serving_differential.py vllm:swa --streams 20000 --out bench-out/vllm-swa.json

Runs ``tests/support/serving_diff.run_diff`` over seeds ``start .. start+streams-1`` and writes a JSON
summary (atomically): correctness divergences (every one), reference disagreements, efficiency
counts with one example each, op counts, seconds. Exit 1 when a correctness divergence was found.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from impl.serving import ADAPTERS  # noqa: E402
from tests.support.serving_diff import Divergences, run_diff  # noqa: E402


def write(a, tot: Divergences, t0: float, end: int, final: bool) -> None:
    """The summary so far (``complete`` says whether every stream ran), written atomically."""
    summary = {"target": a.target, "seeds": [a.start, end - 1], "streams": end - a.start, "complete": final,
               "ops_per_stream": a.ops, "seconds": round(time.perf_counter() - t0, 1),
               "correctness": tot.correctness, "reference": tot.reference, "efficiency": dict(tot.efficiency),
               "examples": tot.examples, "counts": dict(tot.counts)}
    text = json.dumps(summary, indent=1, sort_keys=True)
    if final:
        print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=a.out.parent, prefix=a.out.name, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, a.out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target", choices=sorted(ADAPTERS))
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--ops", type=int, default=60)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    mod, cls = ADAPTERS[a.target].split(":")
    Adapter = getattr(importlib.import_module(mod), cls)
    hybrid = 4 if a.target == "vllm:hybrid" else 1
    tot, t0 = Divergences(), time.perf_counter()
    for seed in range(a.start, a.start + a.streams):
        d = run_diff(Adapter(), seed, ops=a.ops, hybrid_factor=hybrid)
        for c in d.correctness:
            print("CORRECTNESS", c, flush=True)
        tot.merge(d)
        if (seed - a.start + 1) % 250 == 0:
            write(a, tot, t0, seed + 1, final=False)
            print(f"progress: {seed - a.start + 1} streams, {len(tot.correctness)} correctness, "
                  f"{dict(tot.efficiency)}, {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    write(a, tot, t0, a.start + a.streams, final=True)
    return 1 if tot.correctness else 0


if __name__ == "__main__":
    sys.exit(main())
