"""Kernel calls per second of the kernel targets (docs/kernels.md): runs the campaign's window tours
(fuzz.strategies.window_tours, at the target's max_tokens) on each target named and prints cases, kernel launches,
seconds and launches/s. A launch under Triton's interpreter costs 0.2-10 s, so this is what a campaign's budget buys.

Usage: python scripts/kernel_rate.py triton:vllm-unified [flex:eager ...]   (exit 2 on a target that does not resolve)
"""

from __future__ import annotations

import sys
import time

from fuzz.strategies import window_tours
from fuzz.targets import registry
from fuzz.targets.base import TargetError


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    for name in argv:
        try:
            target = registry.resolve(name)
        except TargetError as e:
            print(f"kernel_rate: {e}", file=sys.stderr)
            return 2
        tours = window_tours(target.window_max or 16, target.max_tokens)
        t0 = time.perf_counter()
        for case in tours:
            target.run(case)
        dt = time.perf_counter() - t0
        print(f"{name}: {len(tours)} tours, {target.launches} kernel calls in {dt:.1f} s: "
              f"{target.launches / dt:.2f} calls/s ({sum(c.tokens for c in tours)} tokens)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
