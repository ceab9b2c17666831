"""Hostile code under test (tests/test_hostile_*.py): caches, pools and decoders that end the process, raise
what is not an error, crash natively, hang, or answer outside the protocol. Which misbehaviour, and when, is
read from the environment (``KVW_HOSTILE``: ``exit``, ``kbd``, ``gen``, ``abort``, ``segv``, ``sleep``, ``os_exit``;
``KVW_HOSTILE_AT``: the call count it starts at; ``KVW_HOSTILE_ONCE``: a file path, to misbehave only once), so one class serves every probe and a child process built
from the spec alone behaves as the parent's would."""

from __future__ import annotations

import ctypes
import os
import sys
import time

import numpy as np



def misbehave(calls: int) -> None:
    what = os.environ.get("KVW_HOSTILE")
    if not what:  # well-behaved unless asked (the protocol-answer subjects below misbehave otherwise)
        return
    if calls < int(os.environ.get("KVW_HOSTILE_AT", "3")):
        return
    once = os.environ.get("KVW_HOSTILE_ONCE")  # a file: misbehave once in all processes, then behave
    if once:
        try:
            os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
    act(what)


def act(what: str) -> None:
    """Do the misbehaviour ``what`` names (the module docstring's list) now; an unknown name does nothing."""
    if what == "exit":
        sys.exit(os.environ.get("KVW_HOSTILE_MESSAGE", 0))
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


class HostileDecoder:
    """The project's decoder, misbehaving (``KVW_HOSTILE``) from its ``KVW_HOSTILE_AT``-th decode on — in every
    instance, so the gate meets it in the first step that decodes."""

    tolerance = 1e-10

    def __init__(self):
        from impl.subjects.decoder import DecoderSubject

        self._d = DecoderSubject()
        self.decodes = 0

    def reset(self):
        self._d.reset()

    def prefill(self, token_ids):
        return self._d.prefill(token_ids)

    def decode(self, token_id):
        self.decodes += 1
        misbehave(self.decodes)
        return self._d.decode(token_id)

    def full(self, token_ids):
        return self._d.full(token_ids)

    def identity(self):
        return self._d.identity()


class SlowDecoder(HostileDecoder):
    """Well-behaved, but every decode sleeps ``KVW_SLOW_S`` seconds: a gate to interrupt while it runs."""

    def decode(self, token_id):
        time.sleep(float(os.environ.get("KVW_SLOW_S", "0.05")))
        return self._d.decode(token_id)


class WideLogits(HostileDecoder):
    """Its decode answers one logit too many (a wrong width, found at the protocol boundary)."""

    def decode(self, token_id):
        out = self._d.decode(token_id)
        return np.concatenate([np.asarray(out, dtype=np.float64).reshape(-1), [0.0]])


class NaNBytes(HostileDecoder):
    """``kv_bytes()`` answers NaN."""

    def kv_bytes(self):
        return float("nan")


class HugeWindow(HostileDecoder):
    """Its identity reports a window of 10**9 (the gate must refuse it before sizing a stream by it)."""

    def identity(self):
        return {**self._d.identity(), "window": [10 ** 9, None]}


class HostilePool:
    """A correct paged pool (:class:`tests.support.paged_caches.MinimalPool`) that misbehaves from its
    ``KVW_HOSTILE_AT``-th append on."""

    def __init__(self):
        from tests.support.paged_caches import MinimalPool

        self._p = MinimalPool()
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self._p, name)

    def configure(self, window, block_size, num_blocks, width):
        return self._p.configure(window, block_size, num_blocks, width)

    def add(self, seq):
        return self._p.add(seq)

    def append(self, seq, pos, key, value):
        self.calls += 1
        misbehave(self.calls)
        return self._p.append(seq, pos, key, value)

    def append_chunk(self, seq, entries):
        self.calls += 1
        misbehave(self.calls)
        return self._p.append_chunk(seq, entries)

    def free(self, seq):
        return self._p.free(seq)

    def read(self, seq):
        return self._p.read(seq)

    def table(self, seq):
        return self._p.table(seq)

    def free_blocks(self):
        return self._p.free_blocks()
