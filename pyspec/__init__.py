"""pyspec — the oracle: a line-by-line Python mirror of the Lean spec in ``lean/KVWindow``.

Every public function names its Lean twin in its docstring. Nothing here
imports from ``impl`` or ``fuzz``: data flows spec → oracle → harness.
"""

from pyspec.spec import (
    last_window,
    step,
    run,
    push_chunk,
    valid,
    position_invariant,
    positions_last_window,
    in_window,
    sink_window,
    sink_step,
    sink_run,
    pos_of,
)
from pyspec.ring import Ring, slot_of

__all__ = [
    "last_window",
    "step",
    "run",
    "push_chunk",
    "valid",
    "position_invariant",
    "positions_last_window",
    "in_window",
    "sink_window",
    "sink_step",
    "sink_run",
    "pos_of",
    "Ring",
    "slot_of",
]
