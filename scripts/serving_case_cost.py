#!/usr/bin/env python3
"""Cost per drawn paged case, by size class, for one paged target (docs/serving.md "At production sizes").

    .venv-serving/bin/python scripts/serving_case_cost.py vllm:swa [CASES]

Draws CASES (default 150) cases the way a campaign's paged-generated phase does (``build(_Seeded(k), ops,
window_max=65 537)`` with an op count up to ``LONG_OPS``, PRNG seed 7), runs each once through the target (its
checks included) and prints cases/s and nominal tokens/s per class: pages of 127 and more, pages of 17-65, more than
4 live sequences, the rest — and the slowest case. Cases the target leaves out (``accepts``) are counted apart.
"""

from __future__ import annotations

import collections
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz.paged.ops import Add, Admit, Fork, Free  # noqa: E402
from fuzz.paged.strategies import LONG_OPS, _Seeded, build  # noqa: E402
from fuzz.targets import registry  # noqa: E402


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    name, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 150
    t = registry.resolve(name)
    rng = random.Random(7)
    cls: dict[str, list] = collections.defaultdict(lambda: [0, 0.0, 0, 0.0])
    left_out, worst = 0, (0.0, "")
    for _ in range(n):
        c = build(_Seeded(rng.getrandbits(32)), t.paged_ops, window_max=65_537, n_ops=rng.randint(1, LONG_OPS))
        if t.accepts(c) is not None:
            left_out += 1
            continue
        live = peak = 0
        for o in c.ops:
            live += type(o) in (Add, Fork, Admit)
            live -= type(o) is Free
            peak = max(peak, live)
        k = ("pages >= 127" if c.block_size >= 127 else "pages 17-65" if c.block_size > 16 else
             "> 4 live" if peak > 4 else "pages <= 16, <= 4 live")
        t0 = time.perf_counter()
        t.run(c)
        dt = time.perf_counter() - t0
        for key in (k, "all"):
            row = cls[key]
            row[0] += 1
            row[1] += dt
            row[2] += c.tokens
            row[3] = max(row[3], dt)
        if dt > worst[0]:
            worst = (dt, f"W={c.window} B={c.block_size} N={c.num_blocks} ops={len(c.ops)} tokens={c.tokens} "
                         f"live={peak}")
    for k, (m, s, tok, mx) in sorted(cls.items()):
        print(f"{name} {k}: {m} cases, {m / s:.1f} cases/s, {tok / s:,.0f} tokens/s, slowest {mx:.2f} s")
    print(f"{name}: {left_out} left out (accepts); slowest case {worst[0]:.2f} s {worst[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
