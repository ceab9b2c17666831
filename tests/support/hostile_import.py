"""A gate subject whose module misbehaves while it is imported (``KVW_HOSTILE_IMPORT``: ``segv``, ``sleep``,
``exit``) and whose ``identity()`` hangs when ``KVW_HOSTILE_PROBE`` is set: code under test the gate must meet
in its child, never in its own process (tests/test_hostile_gate.py)."""

from __future__ import annotations

import os
import time

from tests.support.gate_decoders import MinimalDecoder
from tests.support.hostile import act

act(os.environ.get("KVW_HOSTILE_IMPORT", ""))


class Decoder(MinimalDecoder):
    """The minimal decoder; with ``KVW_HOSTILE_PROBE`` set, its ``identity()`` never returns."""

    def identity(self):
        if os.environ.get("KVW_HOSTILE_PROBE"):
            time.sleep(3600)
        return super().identity()
