"""cffi API-mode build of ``impl._cudaindex``: the CUDA kernels' index math, compiled for the CPU.

``csrc/ringkv_index.h`` is the one definition of slot / logical order / fill state /
chunk-append plan / split-K ranges / cache rows; ``csrc/ringkv_cuda.cu`` calls those
``__host__ __device__`` functions in its kernels, and this module compiles the same
header with the host C compiler so the CPU fuzz target ``cuda-index`` checks that
arithmetic against pyspec on every machine (no GPU, no nvcc needed).

Besides the header's functions, the ``rkvh_*_plan`` functions below are the kernels'
index loops written sequentially: what all threads of ``append_chunk_kernel``,
``gather_kernel`` and ``decode_kernel`` compute, enumerated by one loop calling the
same header functions. The header's declarations are read between its ``cffi:begin`` /
``cffi:end`` markers, as ``impl/_ring_build.py`` does for ``ringkv.h``. Run by ``pip install``
through setup.py (name ``_*_build.py``); imports nothing beyond the stdlib and cffi.
"""

import importlib.util
import re
from pathlib import Path

from cffi import FFI


def _ring_build():
    """The sibling build hook ``impl/_ring_build.py``, loaded by path (pip runs build hooks as files,
    with no package on ``sys.path``)."""
    path = Path(__file__).resolve().with_name("_ring_build.py")
    spec = importlib.util.spec_from_file_location("_kvwindow_ring_build", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def header_declarations(header: Path | None = None) -> str:
    """A prototype for every function ``csrc/ringkv_index.h`` defines between its
    ``cffi:begin`` / ``cffi:end`` markers (``RKV_HD int64_t rkv_len(...) { ... }`` becomes
    ``int64_t rkv_len(...);``), so the binding cannot drift from the header."""
    rb = _ring_build()
    text = rb.between_markers(header if header is not None else rb.CSRC / "ringkv_index.h")
    sigs = [" ".join(m.split()) + ";" for m in re.findall(r"RKV_HD\s+([^{};]*?\))\s*\{", text, flags=re.S)]
    if not sigs:
        raise RuntimeError("csrc/ringkv_index.h: no RKV_HD function between the cffi markers")
    return "\n".join(sigs) + "\n"


#: The kernels' index loops, defined in SOURCE below.
PLAN_DECLARATIONS = """
int64_t rkvh_append_plan(int64_t pos0, int64_t k, int64_t w, int64_t *src, int64_t *dst, int64_t cap);
int64_t rkvh_gather_plan(int64_t n, int64_t w, int64_t *slots);
int64_t rkvh_decode_plan(int64_t n, int64_t w, int64_t nsplit, int64_t *slots, int64_t cap);
"""

SOURCE = r"""
#include "ringkv_index.h"

/* append_chunk_kernel: write i (0 <= i < kept) copies chunk entry src[i] into slot dst[i].
 * Returns kept; fills at most cap entries. */
static int64_t rkvh_append_plan(int64_t pos0, int64_t k, int64_t w, int64_t *src, int64_t *dst,
                                int64_t cap) {
  int64_t kept = rkv_chunk_kept(k, w);
  for (int64_t i = 0; i < kept && i < cap; ++i) {
    src[i] = rkv_chunk_src(k, w, i);
    dst[i] = rkv_chunk_dst(pos0, k, w, i);
  }
  return kept;
}

/* gather_kernel: logical row i (0 <= i < w) reads slot slots[i], or is zero-filled (-1).
 * Returns the number of filled rows. */
static int64_t rkvh_gather_plan(int64_t n, int64_t w, int64_t *slots) {
  for (int64_t i = 0; i < w; ++i) slots[i] = i < rkv_len(n, w) ? rkv_logical_slot(n, w, i) : -1;
  return rkv_len(n, w);
}

/* decode_kernel: the slots all nsplit splits read, split by split, in reading order.
 * Returns how many slots are read in total (fills at most cap). */
static int64_t rkvh_decode_plan(int64_t n, int64_t w, int64_t nsplit, int64_t *slots, int64_t cap) {
  int64_t len = rkv_len(n, w), count = 0;
  for (int64_t j = 0; j < nsplit; ++j) {
    int64_t lo, hi;
    rkv_split_range(len, nsplit, j, &lo, &hi);
    for (int64_t s = lo; s < hi; ++s) {
      if (count < cap) slots[count] = s;
      ++count;
    }
  }
  return count;
}
"""

ffibuilder = FFI()
ffibuilder.cdef(header_declarations() + PLAN_DECLARATIONS)
ffibuilder.set_source(
    "impl._cudaindex",
    SOURCE,
    # Relative path: setuptools runs this from the project root.
    include_dirs=["csrc"],
    extra_compile_args=["-O2", "-std=c11", "-Wall"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
