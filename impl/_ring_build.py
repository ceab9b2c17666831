"""How the C ring of ``csrc/`` is built: at install (cffi API mode, ``impl._ringkv``) and on demand
(a shared library from ``csrc/ringkv.c``, optionally with one line edited).

The declarations are read from ``csrc/ringkv.h`` (between its ``cffi:begin`` /
``cffi:end`` markers) rather than copied, so the binding cannot drift from the
header; ``impl.ring`` reuses :func:`cdef` for ABI mode (``--target c:PATH.so``).
:func:`compile_ring_library` is the one Makefile-free recipe for a shared
library (the mutants, the tests and users' deliberately broken copies use it);
``csrc/Makefile`` builds the C test drivers and the sanitizer libraries.

This file must import nothing beyond the stdlib and cffi: setup.py runs it in
pip's isolated build environment (every ``impl/_*_build.py`` is a build hook).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parent.parent
#: The C sources: ``impl/csrc/`` in an installed wheel, ``csrc/`` at the repository root.
CSRC = next((d for d in (Path(__file__).resolve().parent / "csrc", ROOT / "csrc") if (d / "ringkv.h").is_file()),
            ROOT / "csrc")
#: Compiler flags of every build of ringkv.c (the install-time module and compile_ring_library).
CFLAGS = ["-O2", "-std=c11"]
#: What a copy of the ring needs: the one translation unit and the headers it includes.
SOURCES = ("ringkv.c", "ringkv.h", "ringkv_index.h")
#: Extra flags of a sanitized build: ASan and UBSan, every UBSan report fatal (a finding, not a warning).
SANITIZE_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer",
                  "-g", "-O1"]
#: Set (to ``1``) in a process whose project-built libraries must be sanitized (``kvwindow fuzz --sanitize``
#: sets it in the isolated child, so a C mutant built there is built with :data:`SANITIZE_FLAGS`).
SANITIZE_ENV = "KVWINDOW_SANITIZE"


class CompileError(RuntimeError):
    """The C compiler rejected the (possibly edited) ring; the message holds its output."""


class NoCompiler(FileNotFoundError):
    """No C compiler on PATH (``$CC``, ``cc``, ``gcc`` or ``clang``)."""


def between_markers(header: Path, begin: str = "/* cffi:begin */", end: str = "/* cffi:end */") -> str:
    """The text of ``header`` between its two markers (what cffi is given to parse)."""
    text = header.read_text()
    a, b = text.find(begin), text.find(end)
    if a < 0 or b < a:
        raise RuntimeError(f"{header}: missing the {begin} ... {end} markers")
    return text[a + len(begin):b]


def cdef(header: Path = CSRC / "ringkv.h") -> str:
    """The plain C declarations of ``ringkv.h``."""
    return between_markers(header)


def replace_once(text: str, old: str, new: str, where: str) -> str:
    """``text`` with the one occurrence of ``old`` replaced by ``new``; ``ValueError`` when ``old`` is
    missing or ambiguous, so a drifted source fails loudly instead of yielding an unedited copy."""
    count = text.count(old)
    if count != 1:
        raise ValueError(f"{where}: expected exactly one occurrence of {old.strip()!r}, found {count}")
    return text.replace(old, new)


def compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise NoCompiler("no C compiler ($CC, cc, gcc or clang) on PATH")
    return cc


def asan_runtime(cc: str | None = None) -> str | None:
    """The path of the compiler's ASan runtime (what a process must preload to load a sanitized
    library), or ``None`` when the toolchain has none."""
    try:
        cc = cc or compiler()
        out = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    path = out.stdout.strip()
    return path if out.returncode == 0 and os.path.isabs(path) and os.path.exists(path) else None


def compile_ring_library(dest: str | Path, *, replace: tuple[str, str] | None = None,
                         file: str = "ringkv.c", sanitize: bool | None = None) -> Path:
    """Compile ``csrc/ringkv.c`` into the shared library ``dest`` (written atomically).

    ``replace=(old, new)`` edits ``file`` (``ringkv.c`` or one of its headers) first — how tests,
    mutants and users build a deliberately broken copy the campaign must catch; ``old`` must occur
    exactly once. The copy is compiled in a temporary directory, so nothing but ``dest`` is written.
    ``sanitize`` adds :data:`SANITIZE_FLAGS` (default: whether :data:`SANITIZE_ENV` is set); such a
    library loads only into a process with the ASan runtime preloaded (``kvwindow fuzz --sanitize``).
    Raises :class:`NoCompiler`, ``ValueError`` (a stale edit) or :class:`CompileError`.
    """
    if file not in SOURCES:
        raise ValueError(f"file must be one of {', '.join(SOURCES)}, got {file!r}")
    if sanitize is None:
        sanitize = bool(os.environ.get(SANITIZE_ENV))
    cc = compiler()
    flags = [*CFLAGS, *SANITIZE_FLAGS] if sanitize else CFLAGS
    dest = Path(dest)
    with tempfile.TemporaryDirectory(prefix="kvwindow-ring-") as tmp:
        work = Path(tmp)
        for name in SOURCES:
            text = (CSRC / name).read_text()
            if replace is not None and name == file:
                text = replace_once(text, *replace, where=str(CSRC / name))
            (work / name).write_text(text)
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        proc = subprocess.run([cc, *flags, "-fPIC", "-shared", f"-I{work}", str(work / "ringkv.c"),
                               "-o", str(part)], capture_output=True, text=True)
        if proc.returncode != 0:
            part.unlink(missing_ok=True)
            edited = f" (with {file} edited)" if replace is not None else ""
            raise CompileError(f"{cc} failed on ringkv.c{edited}:\n{proc.stderr.strip()[:2000]}")
        os.replace(part, dest)
    return dest


ffibuilder = FFI()
ffibuilder.cdef(cdef())
ffibuilder.set_source(
    "impl._ringkv",
    '#include "ringkv.h"',
    # Relative paths: setuptools runs this from the project root and rejects absolute sources.
    sources=["csrc/ringkv.c"],
    include_dirs=["csrc"],
    extra_compile_args=CFLAGS,
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
