"""cffi API-mode build of ``impl._pagedindex``: the paged pool's index math, compiled for the CPU.

``csrc/pagedkv_index.h`` is the one definition of logical block / slot / needed range / freeing
rule / live-table ring / gather rows; ``csrc/pagedkv.c`` and the kernels of
``csrc/pagedkv_cuda.cu`` call those functions, and this module compiles the same header with the
host C compiler, so ``tests/test_paged_c_index.py`` checks that arithmetic exhaustively against
``pyspec/paged_index.py`` on every machine (no GPU, no nvcc needed).

Besides the header's functions, ``pkvh_gather_plan`` is the gather kernel's index loop written
sequentially: what all its threads compute, enumerated by one loop calling the same header
function. Declarations are read between the header's ``cffi:begin`` / ``cffi:end`` markers, as
``impl/_cudaindex_build.py`` does for ``ringkv_index.h``. Run by ``pip install`` through setup.py
(name ``_*_build.py``); imports nothing beyond the stdlib and cffi.
"""

import importlib.util
import re
from pathlib import Path

from cffi import FFI


def _ring_build():
    """The sibling build hook ``impl/_ring_build.py``, loaded by path (pip runs build hooks as files)."""
    path = Path(__file__).resolve().with_name("_ring_build.py")
    spec = importlib.util.spec_from_file_location("_kvwindow_ring_build", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def header_declarations(header: Path | None = None) -> str:
    """A prototype for every ``PKV_HD`` function ``csrc/pagedkv_index.h`` defines between its
    markers (``PKV_HD int64_t pkv_table_len(...) { ... }`` becomes ``int64_t pkv_table_len(...);``)."""
    rb = _ring_build()
    text = rb.between_markers(header if header is not None else rb.CSRC / "pagedkv_index.h")
    sigs = [" ".join(m.split()) + ";" for m in re.findall(r"PKV_HD\s+([^{};]*?\))\s*\{", text, flags=re.S)]
    if not sigs:
        raise RuntimeError("csrc/pagedkv_index.h: no PKV_HD function between the cffi markers")
    return "\n".join(sigs) + "\n"


#: The gather kernel's index loop, defined in SOURCE below.
PLAN_DECLARATIONS = """
int64_t pkvh_gather_plan(int64_t seqs, const int64_t *n, int64_t w, int64_t b, const int64_t *live,
                         int64_t stride, int64_t *rows);
"""

SOURCE = r"""
#include "pagedkv_index.h"

/* gather_kernel: dense row pkv_dense_row(q, i, w) of sequence q (live table at live + q * stride)
 * reads pool row rows[...] (-1: zero-filled). Returns how many dense rows read a pool row. */
static int64_t pkvh_gather_plan(int64_t seqs, const int64_t *n, int64_t w, int64_t b, const int64_t *live,
                                int64_t stride, int64_t *rows) {
  int64_t filled = 0;
  for (int64_t q = 0; q < seqs; ++q)
    for (int64_t i = 0; i < w - 1; ++i) {
      int64_t r = pkv_gather_row(n[q], w, b, live + q * stride, i);
      rows[pkv_dense_row(q, i, w)] = r;
      filled += r >= 0;
    }
  return filled;
}
"""

ffibuilder = FFI()
ffibuilder.cdef(header_declarations() + PLAN_DECLARATIONS)
ffibuilder.set_source(
    "impl._pagedindex",
    SOURCE,
    # Relative path: setuptools runs this from the project root.
    include_dirs=["csrc"],
    extra_compile_args=["-O2", "-std=c11", "-Wall"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
