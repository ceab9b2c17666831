"""``py-decoder:module.path:ClassName``: a user's own decoder through the decoder protocol (DESIGN §4).

The module resolves from the current directory first (as ``py:`` targets do,
:func:`fuzz.targets.cache.import_from_cwd`); the class must have the protocol's required methods and
is built once now with no arguments — one that cannot be is a usage error, before anything runs.
Its ``tolerance`` class attribute, if any, is the cached-vs-``full()`` tolerance
(:func:`fuzz.gate.protocol.parse_tolerance`). The same class is a fuzz target
(:mod:`fuzz.targets.py_decoder`).
"""

from __future__ import annotations

import os
from typing import Any

from fuzz.gate.protocol import Subject, check_class, parse_tolerance, ProtocolUsageError
from fuzz.targets.base import raised, subject_call
from fuzz.targets.cache import import_from_cwd

PREFIXES = ("py-decoder:",)
SYNTAX = ("py-decoder:module.path:ClassName (your own decoder, resolved from the current directory)",)


def load_class(spec: str) -> Any:
    """The class ``py-decoder:module:Class`` names, checked and built once; :class:`ProtocolUsageError` why not."""
    path = spec[len("py-decoder:"):]
    mod, sep, cls = path.rpartition(":")
    if not sep or not mod or not cls:
        raise ProtocolUsageError(f"{spec}: expected py-decoder:module.path:ClassName")
    try:
        module = subject_call(import_from_cwd, mod)
    except Exception as e:  # noqa: BLE001 - any import failure is the user's to see
        raise ProtocolUsageError(f"{spec}: cannot import {mod!r} (from {os.getcwd()} or sys.path): {raised(e)}") from e
    factory = getattr(module, cls, None)
    if factory is None:
        raise ProtocolUsageError(f"{spec}: module {mod!r} has no attribute {cls!r}")
    check_class(factory, spec)
    try:
        subject_call(factory)
    except Exception as e:  # noqa: BLE001 - the user's constructor: whatever it raises is the reason
        raise ProtocolUsageError(f"{spec}: {cls}() failed: {raised(e)} (a decoder class is built with "
                                 "no arguments; wrap it in a subclass whose __init__ supplies them)") from e
    return factory


def build(spec: str) -> Subject:
    cls = load_class(spec)
    tol = parse_tolerance(getattr(cls, "tolerance", None), spec)
    doc = (cls.__doc__ or "").strip().splitlines()
    return Subject(spec, cls, tol, f"{cls.__module__}.{cls.__qualname__}" + (f": {doc[0]}" if doc else ""))
