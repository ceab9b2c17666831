"""Correct caches that are merely slow, and one that hangs: what the load-proofing tests drive
(``py:tests.support.stalls:NAME``; isolated children import them by that name).

A slow machine is never a finding (DESIGN §4): a push that stalls for seconds, or a first reset that sets
up for seconds, must yield no finding and no seed, isolated or not — the stalls are longer than the
5 s op limit every op once had. A push that never returns is still a hang, confirmed and reported as a crash.
Each stall happens once per process (the first time it is reached), as a one-time cost does: an isolated
campaign's runner pays it once, and so does a fresh runner that runs a timed-out case again.
"""

from __future__ import annotations

import time

from fuzz.targets.pyring import PyRing

#: Whether this process has stalled already (a module global: a new instance is built per case).
_stalled = {"push": False, "reset": False}


class StallsInPush(PyRing):
    """Correct; the first push of position :attr:`at` in the process sleeps :attr:`stall` seconds."""

    stall = 8.0
    at = 5

    def push(self, pos, key, value):
        if pos == self.at and not _stalled["push"]:
            _stalled["push"] = True
            time.sleep(self.stall)
        super().push(pos, key, value)


class StallsBriefly(StallsInPush):
    """Correct; one push stalls 3 s: past an ``--op-timeout`` of 1 s, within the 4 s its confirmation gets."""

    stall = 3.0


class SlowFirstReset(PyRing):
    """Correct; the first reset in the process takes :attr:`stall` seconds (a model loaded on first use)."""

    stall = 8.0

    def reset(self, window):
        if not _stalled["reset"]:
            _stalled["reset"] = True
            time.sleep(self.stall)
        super().reset(window)


class HangsInPush(PyRing):
    """Never returns from the push of position 5 into a window of 3: a real hang, whatever the limit."""

    def push(self, pos, key, value):
        if pos == 5 and self._ring is not None and self._ring.w == 3:
            while True:
                time.sleep(3600)
        super().push(pos, key, value)


class SetsUpInFirstReset(PyRing):
    """Correct; its first reset spends 3 s in setup it marks (``fuzz.targets.progress.setting_up``): setup is
    timed apart from the ops, so even an ``--op-timeout`` of 1 s does not cover it."""

    stall = 3.0

    def reset(self, window):
        if not _stalled["reset"]:
            from fuzz.targets.progress import setting_up

            _stalled["reset"] = True
            with setting_up():
                time.sleep(self.stall)
        super().reset(window)
