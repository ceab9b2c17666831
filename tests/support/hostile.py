"""Hostile code under test (tests/test_hostile_*.py): caches, pools and decoders that end the process, raise
what is not an error, crash natively, hang, or answer outside the protocol. Which misbehaviour, and when, is
read from the environment (``KVW_HOSTILE``: ``exit``, ``kbd``, ``abort``, ``segv``, ``sleep``, ``os_exit``;
``KVW_HOSTILE_AT``: the call count it starts at), so one class serves every probe and a child process built
from the spec alone behaves as the parent's would."""

from __future__ import annotations

import ctypes
import os
import sys
import time

import numpy as np



def misbehave(calls: int) -> None:
    what = os.environ.get("KVW_HOSTILE", "exit")
    if calls < int(os.environ.get("KVW_HOSTILE_AT", "3")):
        return
    if what == "exit":
        sys.exit(0)
    if what == "kbd":
        raise KeyboardInterrupt
    if what == "gen":
        raise GeneratorExit
    if what == "abort":
        os.abort()
    if what == "segv":
        ctypes.string_at(0)
    if what == "os_exit":
        os._exit(0)
    if what == "sleep":
        time.sleep(3600)


class HostileCache:
    """A correct list-backed ring cache that misbehaves from its ``KVW_HOSTILE_AT``-th push on."""

    def __init__(self):
        self.calls = 0
        self.entries: list = []
        self.w = 1

    def reset(self, window):
        self.w, self.entries = window, []

    def push(self, pos, key, value):
        self.calls += 1
        misbehave(self.calls)
        self.entries = (self.entries + [(pos, key, value)])[-self.w:]

    def push_chunk(self, entries):
        for e in entries:
            self.push(*e)

    def contents(self):
        return list(self.entries)
