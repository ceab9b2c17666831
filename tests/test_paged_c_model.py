"""The C paged pool against the test suite's own model (tests/support/paged_model.py), op by op.

Seeded random streams of every op (add, append, chunk, fork, free, admit, reads of bad ids) on
random shapes, including the edges (W = 1, B = 1, N = 1, a window far larger than the pool);
after every op each table, read (bits of payloads), length, identity, refcount and the free count
must equal the model's, and so must every error. Negative controls: copies of pagedkv.c with one
known bug each are caught by the same streams.

The model is this suite's own, written from the semantics (docs/paged.md); it is not pyspec.
"""

from __future__ import annotations

import shutil

import pytest

from impl.paged import PagedC, load_paged_library
from tests.support.paged_model import run_stream

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler: cannot build broken copies of the pool")


def test_random_streams_match_the_model():
    seen = {"hits": 0, "errors": set(), "forks": 0}
    for seed in range(150):
        got = run_stream(PagedC(), seed)
        seen["hits"] += got["hits"]
        seen["forks"] += got["forks"]
        seen["errors"] |= got["errors"]
    # The streams are not vacuous: prefix hits, forks and every op-level error happened.
    assert seen["hits"] >= 50 and seen["forks"] >= 500, seen
    assert seen["errors"] == {4, 5, 6, 7, 9}, seen  # unknown, duplicate, position, exhausted, range


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (1, 3, 2, 2), (2, 1, 1, 1), (6, 1, 3, 1), (9, 4, 2, 3),
                                   (2**40, 2, 12, 1), (4, 64, 2, 1)],
                         ids=["W1-B1-N1", "W1", "one-block", "window-over-pool", "W>B*N", "huge-window", "big-block"])
def test_edge_shapes_match_the_model(shape):
    for seed in range(12):
        run_stream(PagedC(), 1000 + seed, ops=50, shape=shape)


# One known bug per copy; each is caught within a few streams (seeds fixed, so the catch is reproducible).
BROKEN = {
    "no-copy-on-write": (("  } else if (p->ref[*e] > 1) { /* copy on write",
                          "  } else if (p->ref[*e] > 1 && 0) { /* copy on write"), "pagedkv.c"),
    "release-one-token-late": (("  return pkv_first_needed(n, w) / b;",
                                "  return pkv_first_needed(n, w) > 0 ? (pkv_first_needed(n, w) - 1) / b : 0;"),
                               "pagedkv_index.h"),
    "chunk-not-atomic": (("  if (!chunk_fits(p, si, n)) return PAGEDKV_E_EXHAUSTED;\n  for (int64_t k = 0; k < n; k++) "
                          "append_one(",
                          "  for (int64_t k = 0; k < n; k++) if (!chunk_fits(p, si, 1)) return PAGEDKV_E_EXHAUSTED; "
                          "else append_one("), "pagedkv.c"),
    "most-recently-freed-first": (("  if (--p->ref[x] == 0) free_push_tail(p, x);",
                                   "  if (--p->ref[x] == 0) { free_push_tail(p, x); if (p->nfree > 1) { free_unlink(p, x);"
                                   " p->fnext[x] = p->fhead; p->fprev[x] = -1; p->fprev[p->fhead] = x; p->fhead = x;"
                                   " p->nfree++; } }"), "pagedkv.c"),
    "hit-one-block-short": (("for (int64_t c = cmax; c > 0 && hit == 0; c--)",
                             "for (int64_t c = cmax - 1; c > 0 && hit == 0; c--)"), "pagedkv.c"),
}


@needs_cc
@pytest.mark.parametrize("name", sorted(BROKEN))
def test_streams_catch_a_broken_pool(tmp_path, name):
    from impl._paged_build import compile_paged_library

    edit, file = BROKEN[name]
    backend = load_paged_library(compile_paged_library(tmp_path / "lib.so", replace=edit, file=file))
    for seed in range(40):
        try:
            run_stream(PagedC(backend=backend), seed)
        except AssertionError as e:
            assert f"seed {seed}" in str(e)
            return
    pytest.fail(f"{name}: 40 streams did not tell the broken copy from the model")
