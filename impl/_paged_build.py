"""How the C paged pool of ``csrc/`` is built: at install (cffi API mode, ``impl._pagedkv``) and on
demand (a shared library from ``csrc/pagedkv.c``, optionally with one line edited, optionally sanitized).

The declarations are read from ``csrc/pagedkv.h`` between its ``cffi:begin`` / ``cffi:end`` markers,
so the binding cannot drift from the header; ``impl.paged`` reuses :func:`cdef` for ABI mode
(``--target paged-c:PATH.so``). :func:`compile_paged_library` follows the ring's recipe
(``impl/_ring_build.py``: same compiler lookup, flags, sanitizer flags and ``KVWINDOW_SANITIZE``),
so a sanitized run builds both the same way.

This file must import nothing beyond the stdlib and cffi: setup.py runs it in pip's isolated build
environment, as a file, with no package on ``sys.path`` — hence the sibling is loaded by path there.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import tempfile
from pathlib import Path

from cffi import FFI


def _ring_build():
    """``impl._ring_build``: imported as the package module when ``impl`` is importable (so its
    exception classes are the ones callers catch), else loaded by path (the pip build hook)."""
    try:
        from impl import _ring_build as rb

        return rb
    except ImportError:
        path = Path(__file__).resolve().with_name("_ring_build.py")
        spec = importlib.util.spec_from_file_location("_kvwindow_ring_build", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


rb = _ring_build()
CSRC = rb.CSRC
CFLAGS = rb.CFLAGS
SANITIZE_FLAGS = rb.SANITIZE_FLAGS
SANITIZE_ENV = rb.SANITIZE_ENV
CompileError, NoCompiler = rb.CompileError, rb.NoCompiler
#: What a copy of the pool needs: the one translation unit and the headers it includes.
SOURCES = ("pagedkv.c", "pagedkv.h", "pagedkv_index.h")


def cdef(header: Path | None = None) -> str:
    """The plain C declarations of ``pagedkv.h``."""
    return rb.between_markers(header if header is not None else CSRC / "pagedkv.h")


def compile_paged_library(dest: str | Path, *, replace: tuple[str, str] | None = None,
                          file: str = "pagedkv.c", sanitize: bool | None = None) -> Path:
    """Compile ``csrc/pagedkv.c`` into the shared library ``dest`` (written atomically).

    ``replace=(old, new)`` edits ``file`` (``pagedkv.c`` or one of its headers) first — a
    deliberately broken copy for negative controls; ``old`` must occur exactly once. The copy is
    compiled in a temporary directory, so nothing but ``dest`` is written. ``sanitize`` adds the
    ring's ASan+UBSan flags (default: whether ``KVWINDOW_SANITIZE`` is set); such a library loads
    only into a process with the ASan runtime preloaded. Raises ``NoCompiler``, ``ValueError``
    (a stale edit) or ``CompileError``.
    """
    if file not in SOURCES:
        raise ValueError(f"file must be one of {', '.join(SOURCES)}, got {file!r}")
    if sanitize is None:
        sanitize = bool(os.environ.get(SANITIZE_ENV))
    cc = rb.compiler()
    flags = [*CFLAGS, *SANITIZE_FLAGS] if sanitize else CFLAGS
    dest = Path(dest)
    with tempfile.TemporaryDirectory(prefix="kvwindow-paged-") as tmp:
        work = Path(tmp)
        for name in SOURCES:
            text = (CSRC / name).read_text()
            if replace is not None and name == file:
                text = rb.replace_once(text, *replace, where=str(CSRC / name))
            (work / name).write_text(text)
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        proc = subprocess.run([cc, *flags, "-fPIC", "-shared", f"-I{work}", str(work / "pagedkv.c"),
                               "-o", str(part)], capture_output=True, text=True)
        if proc.returncode != 0:
            part.unlink(missing_ok=True)
            edited = f" (with {file} edited)" if replace is not None else ""
            raise CompileError(f"{cc} failed on pagedkv.c{edited}:\n{proc.stderr.strip()[:2000]}")
        os.replace(part, dest)
    return dest


ffibuilder = FFI()
ffibuilder.cdef(cdef())
ffibuilder.set_source(
    "impl._pagedkv",
    '#include "pagedkv.h"',
    # Relative paths: setuptools runs this from the project root and rejects absolute sources.
    sources=["csrc/pagedkv.c"],
    include_dirs=["csrc"],
    extra_compile_args=CFLAGS,
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
