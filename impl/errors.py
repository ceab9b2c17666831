"""``Unavailable``: the one exception for "this cannot run on this machine".

A library that was not built, no GPU, no compiler, an optional package that is
not installed: each part of ``impl/`` raises this (or a subclass naming its
part) with a message that says what is missing and how to get it. The harness
catches it in one place (``fuzz.targets.registry.try_build``) and reports the
target as unavailable with that message instead of failing; it is never a
finding and never a usage error by itself.
"""

from __future__ import annotations


class Unavailable(RuntimeError):
    """Something cannot run on this machine; the message says what is missing and how to get it."""
