"""The C ring as fuzz targets: ``ring-c`` (compiled at install) and ``c:PATH.so`` (bring your own).

Both are :class:`~fuzz.targets.cache.CacheTarget` over :class:`impl.ring.CRing`, so
they run the same op loop and the same contents check as every other cache;
``c:PATH.so`` only swaps the backend for a library loaded in cffi ABI mode.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from fuzz.oracle import PAYLOAD_WIDTH
from fuzz.targets.base import Target, TargetError
from fuzz.targets.cache import CacheTarget


def make_ring_c() -> Target:
    """Target ``ring-c``: the library built from ``csrc/ringkv.c`` by ``pip install``."""
    from impl.ring import CRing, api_backend

    api_backend()
    return CacheTarget("ring-c", functools.partial(CRing, PAYLOAD_WIDTH), width=PAYLOAD_WIDTH)


def make_c_library(path: str) -> Target:
    """Target ``c:PATH``: any shared library implementing ``csrc/ringkv.h``.

    Raises :class:`~fuzz.targets.base.TargetError` (a usage error) naming the path and,
    when a function is missing, the symbol."""
    from impl.ring import CRing, LibraryError, load_library

    if not path:
        raise TargetError("c:PATH: give the path of a shared library, e.g. c:csrc/build/libringkv.so")
    p = Path(path)
    if not p.exists():
        raise TargetError(f"c:{path}: no such file")
    if not p.is_file():
        raise TargetError(f"c:{path}: not a file")
    # dlopen searches the library path for a name without a slash (and Path drops a leading "./"):
    # the absolute path loads exactly the file that was named.
    where = os.path.abspath(path)
    try:
        backend = load_library(where)
    except LibraryError as e:
        raise TargetError(f"c:{path}: {e}") from e
    return CacheTarget(f"c:{path}", functools.partial(CRing, PAYLOAD_WIDTH, backend=backend), width=PAYLOAD_WIDTH)
