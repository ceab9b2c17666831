"""The C ring as fuzz targets: ``ring-c`` (compiled at install) and ``c:PATH.so`` (bring your own).

Both are :class:`fuzz.targets.CacheTarget` over :class:`impl.ring.CRing`, so
they run the same op loop and the same contents check as every other cache;
``c:PATH.so`` only swaps the backend for a library loaded in cffi ABI mode.
"""

from __future__ import annotations

import functools
from pathlib import Path

from fuzz.ops import PAYLOAD_WIDTH
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
    # dlopen treats a bare name as a search-path lookup; a path with a slash loads exactly that file.
    where = str(p if p.is_absolute() or "/" in path else Path(".") / p)
    try:
        backend = load_library(where)
    except LibraryError as e:
        raise TargetError(f"c:{path}: {e}") from e
    return CacheTarget(f"c:{path}", functools.partial(CRing, PAYLOAD_WIDTH, backend=backend), width=PAYLOAD_WIDTH)


CSRC = Path(__file__).resolve().parents[2] / "csrc"


def compile_ring_library(dest: str | Path, *, replace: tuple[str, str] | None = None,
                         cc: str | None = None, source: str | Path | None = None) -> Path:
    """Compile ``csrc/ringkv.c`` (or ``source``) into the shared library ``dest``.

    ``replace=(old, new)`` edits one line first — how tests and users build a
    deliberately broken copy the campaign must catch; it must match exactly once,
    so a drifted source fails loudly instead of yielding an unbroken "mutant".
    Raises ``RuntimeError`` with the compiler's output, ``FileNotFoundError`` without a compiler.
    """
    import shutil
    import subprocess

    cc = cc or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise FileNotFoundError("no C compiler (cc, gcc or clang) on PATH")
    dest = Path(dest)
    src = Path(source) if source is not None else CSRC / "ringkv.c"
    text = src.read_text()
    if replace is not None:
        old, new = replace
        if text.count(old) != 1:
            raise ValueError(f"{src}: {old!r} occurs {text.count(old)} times, expected exactly once")
        text = text.replace(old, new)
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = dest.parent / (dest.stem + "_src.c")
    work.write_text(text)
    proc = subprocess.run([cc, "-O2", "-std=c11", "-fPIC", "-shared", f"-I{CSRC}", str(work), "-o", str(dest)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{cc} failed on {work}:\n{proc.stderr}")
    return dest
