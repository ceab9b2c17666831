"""cffi API-mode build of the C ring (``impl._ringkv``), run by ``pip install`` via setup.py.

The declarations are read from ``csrc/ringkv.h`` (between its ``cffi:begin`` /
``cffi:end`` markers) rather than copied, so the binding cannot drift from the
header; ``impl.ring`` reuses :func:`cdef` for ABI mode (``--target c:PATH.so``).
This file must import nothing beyond the stdlib and cffi: it runs in pip's
isolated build environment.
"""

from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"


def cdef(header: Path = CSRC / "ringkv.h") -> str:
    """The plain C declarations of ``ringkv.h``."""
    text = header.read_text()
    begin, end = text.find("/* cffi:begin */"), text.find("/* cffi:end */")
    if begin < 0 or end < begin:
        raise RuntimeError(f"{header}: missing the /* cffi:begin */ ... /* cffi:end */ markers")
    return text[begin + len("/* cffi:begin */"):end]


ffibuilder = FFI()
ffibuilder.cdef(cdef())
ffibuilder.set_source(
    "impl._ringkv",
    '#include "ringkv.h"',
    # Relative paths: setuptools runs this from the project root and rejects absolute sources.
    sources=["csrc/ringkv.c"],
    include_dirs=["csrc"],
    extra_compile_args=["-O2", "-std=c11"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
