"""The mutant catalogue: DESIGN §5's bug classes as one-line bugs in copies of real implementations.

Each :class:`Mutant` names its bug class and a public reference — a bug
report or fix in a real project where the same mistake shipped — and builds
the buggy implementation (:meth:`Mutant.implementation`). Three kinds:

* ``py-ring``: the source of :class:`impl.mutants.slot_ring.SlotRing` (a
  preallocated slot ring as engines write it) with one line replaced; builds
  the mutated class;
* ``c-ring``: a copy of ``csrc/ringkv.c`` / ``csrc/ringkv_index.h`` with one
  line replaced, compiled with ``cc`` into a cache directory; builds the path
  of the shared library (it speaks the ``c:`` ABI);
* ``decoder``: the decoder mutants of :mod:`impl.mutants.decoder_mutants`
  (wrong RoPE position, W + 1 keys, mask diagonal); builds the
  :class:`~impl.mutants.decoder_mutants.DecoderMutant`;
* ``paged-c`` / ``py-paged``: the paged pool's bug classes (:mod:`impl.mutants.paged_mutants`): a copy of
  ``csrc/pagedkv.c`` compiled with one edit, or :class:`~impl.mutants.paged_pool.BlockPool` with one.

Wrapping each as a campaign target a campaign must kill, and running those
campaigns, is the harness's job: :mod:`fuzz.killtable` (DESIGN §2: nothing in
``impl/`` imports ``fuzz``).

Every edit is textual and exact: if the line a mutant replaces is not in the
current source (the implementation was refactored), building the mutant
fails loudly instead of silently fuzzing the unmodified code.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

from impl import _ring_build as ring_build


from impl.mutants.base import Mutant, MutantError, MutantUnavailable, apply_edit, cache_dir  # noqa: F401


# ---------------------------------------------------------------------------
# Python ring mutants: SlotRing with one line replaced

_PY_CACHE: dict[str, type] = {}


def _py_ring_class(name: str, old: str, new: str) -> type:
    if name not in _PY_CACHE:
        from impl.mutants import slot_ring

        src = apply_edit(inspect.getsource(slot_ring), old, new, f"mutant {name} (impl/mutants/slot_ring.py)")
        ns: dict = {"__name__": f"impl.mutants._mutant_{name.replace('-', '_')}"}
        exec(compile(src, f"<mutant {name} of impl/mutants/slot_ring.py>", "exec"), ns)  # noqa: S102
        _PY_CACHE[name] = ns["SlotRing"]
    return _PY_CACHE[name]


def py_ring_mutant(name: str, bug_class: str, reference: str, description: str, old: str, new: str) -> Mutant:
    def build() -> type:
        return _py_ring_class(name, old, new)

    return Mutant(name, bug_class, reference, description, "py-ring", build,
                  ("impl/mutants/slot_ring.py", old.strip(), new.strip()))


# ---------------------------------------------------------------------------
# C ring mutants: a copy of csrc/ with one line replaced, compiled into a cache dir


def build_c_mutant(name: str, file: str, old: str, new: str) -> Path:
    """``csrc/ringkv.c`` with the edit applied to ``file``, compiled by
    :func:`impl._ring_build.compile_ring_library` into a cache directory.

    The library's directory is named by the hash of the edit and of the sources it
    applies to, so an unchanged mutant is compiled once and a changed ring is recompiled.
    """
    if not (ring_build.CSRC / "ringkv.c").exists():
        raise MutantUnavailable(f"{ring_build.CSRC / 'ringkv.c'} is not present")
    if file not in ring_build.SOURCES:
        raise MutantError(f"mutant {name}: csrc/{file} is not a source of the C ring")
    sources = sorted((n, (ring_build.CSRC / n).read_text()) for n in ring_build.SOURCES)
    apply_edit(dict(sources)[file], old, new, f"mutant {name} (csrc/{file})")  # a stale edit fails here
    digest = hashlib.sha256(repr((file, old, new, sources)).encode()).hexdigest()[:16]
    lib = cache_dir() / f"{name}-{digest}" / "libringkv_mutant.so"
    if lib.exists():
        return lib
    try:
        return ring_build.compile_ring_library(lib, replace=(old, new), file=file)
    except ring_build.NoCompiler as e:
        raise MutantUnavailable(str(e)) from e
    except ring_build.CompileError as e:
        raise MutantError(f"mutant {name}: {e}") from e


def c_ring_mutant(name: str, bug_class: str, reference: str, description: str, file: str,
                  old: str, new: str) -> Mutant:
    def build() -> Path:
        return build_c_mutant(name, file, old, new)

    return Mutant(name, bug_class, reference, description, "c-ring", build, (f"csrc/{file}", old.strip(), new.strip()))


# ---------------------------------------------------------------------------
# The catalogue

FA_WINDOW = "https://github.com/huggingface/transformers/issues/39408"
REACHES_W = "https://github.com/huggingface/transformers/issues/37574"
WRAPAROUND = "https://github.com/huggingface/transformers/pull/47708"
RESET = "https://github.com/huggingface/transformers/pull/31917"
CHUNK = "https://github.com/ml-explore/mlx-lm/issues/1914"
CACHE_POS = "https://github.com/Sudharsanselvaraj/Token-Print/pull/268"
RING_STATE = "https://github.com/Blaizzy/mlx-vlm/issues/1715"
ONE_TOO_FEW = "https://github.com/lightseekorg/tokenspeed/pull/578"
SLICE = "https://github.com/EricLBuehler/mistral.rs/issues/246"
#: A prefill covering the whole window takes an overwrite branch that skips the normal logic.
FULL_WINDOW_PATH = "https://github.com/EricLBuehler/mistral.rs/pull/2333"
#: A capacity guard off by one misses the next-full condition and writes past the window.
OVERFLOW_BY_ONE = "https://github.com/toyaix/tritonllm/pull/34"
#: Writing exactly enough to fill a ring leaves head == tail: the ring reads as empty.
FULL_AS_EMPTY = "https://github.com/littlekernel/lk/pull/173"
#: Positions held in int16 overflow past 32 767 tokens and corrupt the sliding-window mask.
INT16_POSITIONS = "https://github.com/vllm-project/tpu-inference/pull/2756"
#: A cache that keeps its values in fp16 whatever the input dtype overflows on bf16 inputs.
FP16_STORE = "https://github.com/vllm-project/vllm/issues/53334"
#: A counter updated before the call that can fail, and not put back when it does.
ERROR_PATH_STATE = "https://github.com/varnish/Varnish-Cache/pull/80"
#: A KV cache that let one position be present more than once broke on it.
REPEATED_POSITION = "https://github.com/ggml-org/llama.cpp/pull/14339"
#: A cache sized for the wrong head dimension: the kernel wrote the new K/V past what it was given.
FIXED_HEAD_SIZE = "https://github.com/vllm-project/vllm/pull/2622"
#: A head size in the wrong units decomposed flat offsets wrongly: every access lands on the wrong stride.
WRONG_STRIDE = "https://github.com/LMCache/LMCache/pull/2826"
#: A counter kept in a type narrower than the range it must count: a file index generated from a 16-bit counter.
NARROW_INDEX = "https://github.com/slsdetectorgroup/slsDetectorPackage/issues/240"
#: A fast path for a large prefill that skips the normal slot logic (the full-window overwrite branch, above).
LONG_CHUNK_PATH = FULL_WINDOW_PATH
#: A buffer kept static is shared by every object using it: a thread-safety bug once two threads call at once.
STATIC_SCRATCH = "https://github.com/abstractj/kalium/issues/12"
#: A cache whose per-request allocation was never freed: valgrind "definitely lost", memory growing per request.
RESET_LEAK = "https://github.com/twitter/twemcache/issues/24"
#: An object cached on the class was shared by every instance of it.
SHARED_ON_CLASS = "https://github.com/chop-dbhi/avocado/issues/136"
#: A cache that hands one object to every holder with the same configuration: mutating it reaches the others.
SHARED_BY_CONFIG = "https://github.com/PriorLabs/TabPFN/pull/1219"

PY_RING = [
    py_ring_mutant(
        "ring-evict-before-append", "evict-before-append (head/tail order)", WRAPAROUND,
        "when full, advances head before overwriting, so the write lands on the second-oldest slot",
        "            self._write(self.head, p, key, value)\n            self.head = (self.head + 1) % self.w\n",
        "            self.head = (self.head + 1) % self.w\n            self._write(self.head, p, key, value)\n"),
    py_ring_mutant(
        "ring-keeps-W+1", "window edge off by one (W+1 keys)", FA_WINDOW,
        "allocates and keeps W+1 slots, like passing window_size=(W, 0) to FlashAttention",
        "        self.w = window\n", "        self.w = window + 1\n"),
    py_ring_mutant(
        "ring-full-at-W-1", "window edge off by one (W-1 keys)", ONE_TOO_FEW,
        "treats the ring as full one slot early, so it holds W-1 keys",
        "        if self.size < self.w:\n", "        if self.size < self.w - 1:\n"),
    py_ring_mutant(
        "ring-full-check-le", "boundary at length == W (strict vs non-strict)", REACHES_W,
        "'not full' test uses <=, so the W+1-th token is appended over the head instead of evicting",
        "        if self.size < self.w:\n", "        if self.size <= self.w:\n"),
    py_ring_mutant(
        "ring-garbage-before-full", "garbage read before the window is full", WRAPAROUND,
        "reads all W slots from head, returning zero-filled slots before the ring is full",
        "        for i in range(self.size):\n", "        for i in range(self.w):\n"),
    py_ring_mutant(
        "ring-reset-keeps-size", "reset leaves stale entries", RESET,
        "reset rewinds the position counter and head but not the fill count, so old entries stay readable",
        "        self.size = 0\n", "        self.size = self.size\n"),
    py_ring_mutant(
        "ring-reset-keeps-window", "reset leaves stale state (window)", RING_STATE,
        "reset reuses the old window once one is set, so a new stream with another window is cut wrongly",
        "        self.w = window\n", "        self.w = self.w or window\n"),
    py_ring_mutant(
        "ring-position-is-cache-length", "absolute position replaced by cache length", CACHE_POS,
        "stamps the new token with the cache length, which stops growing at W (RoPE at the wrong position)",
        "        p = self.n  # the absolute position of the new token, never the cache length\n",
        "        p = self.size  # the absolute position of the new token, never the cache length\n"),
    py_ring_mutant(
        "ring-position-is-slot", "absolute position replaced by slot index", CACHE_POS,
        "reports the slot index as the entry's position, right only until the first wrap",
        "            out.append((int(self.pos[slot]), self.k[slot], self.v[slot]))\n",
        "            out.append((slot, self.k[slot], self.v[slot]))\n"),
    py_ring_mutant(
        "ring-chunk-keeps-first-W", "prefill chunk longer than W", SLICE,
        "a chunk longer than the window keeps its first W entries instead of its last W",
        "        for e in entries[skip:]:\n", "        for e in entries[:self.w]:\n"),
    py_ring_mutant(
        "ring-chunk-loses-skipped", "prefill chunk longer than W (positions)", CHUNK,
        "the long-chunk fast path drops entries without counting them, so later positions shift",
        "        self.n += skip\n", "        self.n += 0\n"),
    # Boundary-only mutants: right on every stream except at one exact boundary, so a
    # tester that does not aim at the boundaries rarely reaches them (what --baseline measures).
    py_ring_mutant(
        "ring-chunk-overflow-by-one", "chunk overflowing the window by exactly one (eviction check off by one)",
        OVERFLOW_BY_ONE,
        "the no-eviction prefill path is taken while the chunk overflows the free slots by one, so exactly "
        "when fill + chunk == W + 1 the last entry overwrites the oldest without evicting it",
        "        if self.size + len(entries) <= self.w:  # the chunk fits in the free slots: nothing to evict\n",
        "        if self.size + len(entries) <= self.w + 1:  # the chunk fits in the free slots: nothing to evict\n"),
    py_ring_mutant(
        "ring-chunk-fill-reads-empty", "stream reaching exactly W (full read as empty)", FULL_AS_EMPTY,
        "the fill after a prefill is computed modulo W, as in a head/tail ring: a chunk that leaves the ring "
        "exactly full (fill + chunk == W) makes it read as empty",
        "            self.size += len(entries)\n",
        "            self.size = (self.size + len(entries)) % self.w\n"),
    # Beyond the happy path: long streams and payload dtypes.
    py_ring_mutant(
        "ring-int16-position-counter", "positions narrowed to 16 bits (long streams)", INT16_POSITIONS,
        "the position counter is an int16, as in a kernel's packed index: past position 32 767 it wraps "
        "to -32 768, so every later entry carries a wrong position",
        "        self.n = 0\n", "        self.n = np.int16(0)\n"),
    py_ring_mutant(
        "ring-fp16-store", "a store that loses bits of the payload (fp16 cache)", FP16_STORE,
        "keys are stored in float16 whatever dtype they come in, so a payload float16 cannot hold comes "
        "back rounded (or infinite)",
        "            self.k = np.zeros((len(self.pos), key.shape[0]), dtype=np.float32)\n",
        "            self.k = np.zeros((len(self.pos), key.shape[0]), dtype=np.float16)\n"),
    # Across payload widths and instances (issue 20): right for every stream a 4-float, one-instance campaign drives.
    py_ring_mutant(
        "ring-copies-4-floats", "a payload width baked in (copies 4 floats)", FIXED_HEAD_SIZE,
        "a slot write copies at most the first 4 floats of the key, as a kernel specialised for one head size "
        "does: a key wider than 4 floats keeps whatever its slot held past the fourth",
        "        self.k[slot] = key\n", "        self.k[slot, :4] = key[:4]\n"),
    # At production sizes (issue 28): right at every window up to 256.
    py_ring_mutant(
        "ring-head-uint8", "an index type too narrow for the window (8-bit head)", NARROW_INDEX,
        "the head slot is kept in one byte, as a packed ring header does: right while W <= 256, past that the head "
        "wraps to slot 0 at 256 and the ring reads and overwrites the wrong slots",
        "            self.head = (self.head + 1) % self.w\n        self.n += 1\n",
        "            self.head = ((self.head + 1) % self.w) & 0xFF  # the head packed into one byte\n        self.n += 1\n"),
    py_ring_mutant(
        "ring-reset-leaks", "memory not returned by reset (a snapshot kept per stream)", RESET_LEAK,
        "reset keeps a copy of the old stream's keys in a list on the class (a debugging snapshot nobody reads or "
        "drops): every stream's contents are right, and the process grows by W x width floats per reset",
        "    def reset(self, window):\n",
        "    def reset(self, window):\n"
        "        if self.k is not None:  # the old stream's keys, kept for a debug dump\n"
        "            SlotRing._snapshots = SlotRing.__dict__.get('_snapshots', []) + [self.k.copy()]\n"),
    py_ring_mutant(
        "ring-shared-position-buffer", "state shared between instances (a buffer on the class)", SHARED_ON_CLASS,
        "the position buffer of each window is allocated once and kept on the class, so two live rings of one "
        "window write their positions into the same array",
        "            self.pos = np.zeros(window, dtype=np.int64)  # reuse the buffers when the window is unchanged\n",
        "            if window not in SlotRing.__dict__.get('_pos_by_window', {}):  # one buffer per window, kept\n"
        "                SlotRing._pos_by_window = dict(SlotRing.__dict__.get('_pos_by_window', {}))\n"
        "                SlotRing._pos_by_window[window] = np.zeros(window, dtype=np.int64)\n"
        "            self.pos = SlotRing._pos_by_window[window]  # reuse the buffers when the window is unchanged\n"),
]

#: ``alloc_slots`` of csrc/ringkv.c, verbatim, and the slab that replaces it in ``c-shared-slab``: a slab per
#: (window, width) hands every handle of that configuration the arrays the first one allocated; ``free`` after
#: it skips slab memory, so the handles' destroy and reset leave it alone (one handle at a time behaves
#: exactly as before).
ALLOC_SLOTS = """static int alloc_slots(int64_t w, int64_t width, int64_t **pos, float **keys, float **values) {
  if ((uint64_t)w > PTRDIFF_MAX / sizeof(int64_t) || (uint64_t)width > PTRDIFF_MAX / sizeof(float))
    return RINGKV_E_NOMEM;
  size_t nw = (size_t)w, nwidth = (size_t)width;
  if (nw > PTRDIFF_MAX / sizeof(float) / nwidth) return RINGKV_E_NOMEM;
  size_t payload = nw * nwidth * sizeof(float);
  int64_t *p = malloc(nw * sizeof(int64_t));
  float *k = malloc(payload);
  float *v = malloc(payload);
  if (!p || !k || !v) {
    free(p);
    free(k);
    free(v);
    return RINGKV_E_NOMEM;
  }
  *pos = p;
  *keys = k;
  *values = v;
  return RINGKV_OK;
}
"""
SHARED_SLAB = """static struct { int64_t w, width; int64_t *pos; float *keys, *values; } slab[64];

static void slab_release(void *ptr) {
  for (int i = 0; i < 64; i++)
    if (ptr && (ptr == (void *)slab[i].pos || ptr == (void *)slab[i].keys || ptr == (void *)slab[i].values)) return;
  free(ptr);
}

static int alloc_slots(int64_t w, int64_t width, int64_t **pos, float **keys, float **values) {
  size_t i = (size_t)(((uint64_t)w * 31u + (uint64_t)width) % 64u); /* the slab of (window, width) */
  if (slab[i].pos && slab[i].w == w && slab[i].width == width) { /* reuse it */
    *pos = slab[i].pos;
    *keys = slab[i].keys;
    *values = slab[i].values;
    return RINGKV_OK;
  }
  if ((uint64_t)w > PTRDIFF_MAX / sizeof(int64_t) || (uint64_t)width > PTRDIFF_MAX / sizeof(float))
    return RINGKV_E_NOMEM;
  size_t nw = (size_t)w, nwidth = (size_t)width;
  if (nw > PTRDIFF_MAX / sizeof(float) / nwidth) return RINGKV_E_NOMEM;
  size_t payload = nw * nwidth * sizeof(float);
  int64_t *p = malloc(nw * sizeof(int64_t));
  float *k = malloc(payload);
  float *v = malloc(payload);
  if (!p || !k || !v) {
    free(p);
    free(k);
    free(v);
    return RINGKV_E_NOMEM;
  }
  if (!slab[i].pos) {
    slab[i].w = w;
    slab[i].width = width;
    slab[i].pos = p;
    slab[i].keys = k;
    slab[i].values = v;
  }
  *pos = p;
  *keys = k;
  *values = v;
  return RINGKV_OK;
}
#define free(ptr) slab_release(ptr)
"""

#: C mutants edit the shared index math or the ring itself; the snippet must exist verbatim.
C_RING = [
    c_ring_mutant(
        "c-chunk-keeps-one-too-few", "prefill chunk longer than W", CHUNK,
        "the first kept entry of a long chunk is k - w + 1: its slot keeps a stale entry",
        "ringkv_index.h",
        "{ return k > w ? k - w : 0; }", "{ return k > w ? k - w + 1 : 0; }"),
    c_ring_mutant(
        "c-len-W+1", "window edge off by one (W+1 keys)", FA_WINDOW,
        "the fill count saturates at w + 1 instead of w, so a read returns one key too many",
        "ringkv_index.h",
        "{ return n < w ? n : w; }", "{ return n <= w ? n : w + 1; }"),
    c_ring_mutant(
        "c-read-from-slot-0", "garbage read / wrong order after wrap", WRAPAROUND,
        "logical index i is read from slot i, ignoring where the oldest entry is",
        "ringkv_index.h",
        "return rkv_slot(rkv_oldest(n, w) + i, w);", "return rkv_slot(i, w);"),
    c_ring_mutant(
        "c-reset-keeps-n", "reset leaves stale entries", RESET,
        "reset swaps the buffers but never rewinds the token count",
        "ringkv.c",
        "  r->n = 0;\n  return RINGKV_OK;\n}\n\nstatic void write_slot",
        "  return RINGKV_OK;\n}\n\nstatic void write_slot"),
    c_ring_mutant(
        "c-position-is-cache-length", "absolute position replaced by cache length", CACHE_POS,
        "a slot is stamped with the cache length instead of the token's position",
        "ringkv.c",
        "  r->pos[s] = pos;\n", "  r->pos[s] = rkv_len(r->n, r->w);\n"),
    # Boundary-only C mutants (see the Python ones above).
    c_ring_mutant(
        "c-chunk-fills-window-fast-path", "prefill chunk of exactly W (full-window fast path)", FULL_WINDOW_PATH,
        "a chunk of exactly W tokens is memcpy'd to slots 0..W-1; right only when the stream position is a "
        "multiple of W, since position p belongs in slot p % W",
        "ringkv.c",
        "  for (int64_t k = rkv_chunk_first_kept(n, r->w); k < n; k++)\n",
        "  if (n == r->w) { /* the chunk replaces the whole window: one copy instead of the scatter */\n"
        "    memcpy(r->keys, keys, (size_t)n * wd * sizeof(float));\n"
        "    memcpy(r->values, values, (size_t)n * wd * sizeof(float));\n"
        "    for (int64_t k = 0; k < n; k++) r->pos[k] = first_pos + k;\n"
        "  } else\n"
        "  for (int64_t k = rkv_chunk_first_kept(n, r->w); k < n; k++)\n"),
    c_ring_mutant(
        "c-read-first-lap-le", "read right after the first eviction (n == W + 1; strict vs non-strict)", WRAPAROUND,
        "the read takes the not-yet-wrapped shortcut (oldest entry in slot 0) while the newest position "
        "n - 1 <= W instead of < W, so exactly at n == W + 1 the window is read rotated by one",
        "ringkv.c",
        "static void read_positions(const ringkv_t *r, int64_t *dst, int64_t len) {\n"
        "  if (len == 0) return;\n"
        "  int64_t first = rkv_logical_slot(r->n, r->w, 0);\n",
        "static void read_positions(const ringkv_t *r, int64_t *dst, int64_t len) {\n"
        "  if (len == 0) return;\n"
        "  int64_t first = r->n - 1 <= r->w ? 0 : rkv_logical_slot(r->n, r->w, 0); /* first lap: no modulo */\n"),
    # Beyond the happy path: the error contract, the rest of the ABI, long streams.
    c_ring_mutant(
        "c-error-path-moves-state", "an error path that changes state", ERROR_PATH_STATE,
        "reset rewinds the stream before it checks the new window, so a refused reset (window 0, negative, "
        "too big to allocate) still empties the cache while returning its error",
        "ringkv.c",
        "int ringkv_reset(ringkv_t *r, int64_t window) {\n  if (!r) return RINGKV_E_NULL;\n",
        "int ringkv_reset(ringkv_t *r, int64_t window) {\n  if (!r) return RINGKV_E_NULL;\n"
        "  r->n = 0; /* start the new stream, then make room for it */\n"),
    c_ring_mutant(
        "c-accepts-repeated-position", "a repeated position accepted", REPEATED_POSITION,
        "push refuses a gap or a negative position but takes a repeated one as a retry: it is accepted and "
        "rewinds the stream to it",
        "ringkv.c",
        "  if (pos != r->n) return RINGKV_E_POSITION;\n",
        "  if (pos > r->n || pos < 0) return RINGKV_E_POSITION; /* an earlier position: a retry */\n"),
    c_ring_mutant(
        "c-trace-int16-positions", "trace output that disagrees with the cache (positions narrowed to 16 bits)",
        INT16_POSITIONS,
        "ringkv_trace writes each row's positions through an int16, as a packed index would: past position "
        "32 767 the trace reports negative positions while the cache itself is right",
        "ringkv.c",
        "    read_positions(r, row, len);\n",
        "    read_positions(r, row, len);\n    for (int64_t j = 0; j < len; j++) row[j] = (int16_t)row[j];\n"),
    # Across payload widths and handles (issue 20).
    c_ring_mutant(
        "c-copies-4-floats", "a payload width baked in (copies 4 floats)", FIXED_HEAD_SIZE,
        "a slot's key is copied as 4 floats whatever the ring's width: a wider key keeps stale floats, a "
        "narrower one is read past its end",
        "ringkv.c",
        "  memcpy(r->keys + s * wd, key, wd * sizeof(float));\n",
        "  memcpy(r->keys + s * wd, key, 4 * sizeof(float));\n"),
    c_ring_mutant(
        "c-slot-stride-4", "a slot stride computed from a fixed width", WRONG_STRIDE,
        "keys are written at slot * 4 floats and read at slot * width: right only for width 4",
        "ringkv.c",
        "  memcpy(r->keys + s * wd, key, wd * sizeof(float));\n",
        "  memcpy(r->keys + s * 4, key, wd * sizeof(float));\n"),
    # At production sizes and across threads (issue 28).
    c_ring_mutant(
        "c-long-chunk-slot-from-chunk", "a fast path only large windows and long chunks take", LONG_CHUNK_PATH,
        "a chunk that keeps 1 024 entries or more is block-copied in two runs, but the first slot is computed from "
        "the chunk's own offset instead of the stream position: right when the chunk starts at a multiple of W "
        "(every prefill after a reset), wrong after any token before it; windows below 1 024 never take it",
        "ringkv.c",
        "  for (int64_t k = rkv_chunk_first_kept(n, r->w); k < n; k++)\n",
        "  int64_t k0 = rkv_chunk_first_kept(n, r->w);\n"
        "  if (n - k0 >= 1024) { /* a long prefill: block copies in at most two runs instead of the scatter */\n"
        "    int64_t m = n - k0, s0 = rkv_slot(k0, r->w);\n"
        "    int64_t run1 = r->w - s0 < m ? r->w - s0 : m;\n"
        "    for (int64_t i = 0; i < m; i++) r->pos[(s0 + i) % r->w] = first_pos + k0 + i;\n"
        "    memcpy(r->keys + (size_t)s0 * wd, keys + (size_t)k0 * wd, (size_t)run1 * wd * sizeof(float));\n"
        "    memcpy(r->keys, keys + (size_t)(k0 + run1) * wd, (size_t)(m - run1) * wd * sizeof(float));\n"
        "    memcpy(r->values + (size_t)s0 * wd, values + (size_t)k0 * wd, (size_t)run1 * wd * sizeof(float));\n"
        "    memcpy(r->values, values + (size_t)(k0 + run1) * wd, (size_t)(m - run1) * wd * sizeof(float));\n"
        "  } else\n"
        "  for (int64_t k = rkv_chunk_first_kept(n, r->w); k < n; k++)\n"),
    c_ring_mutant(
        "c-static-scratch", "a static scratch buffer shared by every handle (two threads at once)", STATIC_SCRATCH,
        "a slot write stages the key and value in one static buffer before copying them in: right for any number of "
        "handles driven from one thread, wrong when two threads push at once (one copies the other's payload)",
        "ringkv.c",
        "static void write_slot(ringkv_t *r, int64_t pos, const float *key, const float *value) {\n"
        "  size_t s = (size_t)rkv_slot(pos, r->w), wd = (size_t)r->width;\n"
        "  r->pos[s] = pos;\n"
        "  memcpy(r->keys + s * wd, key, wd * sizeof(float));\n"
        "  memcpy(r->values + s * wd, value, wd * sizeof(float));\n}\n",
        "static float scratch[2 * 4096]; /* staging for one slot's key and value, shared by every handle */\n\n"
        "static void write_slot(ringkv_t *r, int64_t pos, const float *key, const float *value) {\n"
        "  size_t s = (size_t)rkv_slot(pos, r->w), wd = (size_t)r->width;\n"
        "  r->pos[s] = pos;\n"
        "  if (wd > 4096) {\n"
        "    memcpy(r->keys + s * wd, key, wd * sizeof(float));\n"
        "    memcpy(r->values + s * wd, value, wd * sizeof(float));\n"
        "    return;\n"
        "  }\n"
        "  memcpy(scratch, key, wd * sizeof(float));\n"
        "  memcpy(scratch + wd, value, wd * sizeof(float));\n"
        "  memcpy(r->keys + s * wd, scratch, wd * sizeof(float));\n"
        "  memcpy(r->values + s * wd, scratch + wd, wd * sizeof(float));\n}\n"),
    c_ring_mutant(
        "c-reset-leaks", "memory not returned by reset (old slot arrays kept)", RESET_LEAK,
        "a reset to another window allocates the new slot arrays and never frees the old ones: every stream is "
        "right, and each reset that changes the window loses W x (8 + 8 x width) bytes",
        "ringkv.c",
        "    free(r->pos);\n    free(r->keys);\n    free(r->values);\n    r->pos = p;\n",
        "    r->pos = p;\n"),
    c_ring_mutant(
        "c-shared-slab", "state shared between handles (a slab per window)", SHARED_BY_CONFIG,
        "slot arrays come from a slab per (window, width) that every handle of that configuration reuses (and "
        "none gives back), so two live handles of one window and width read and write the same slots",
        "ringkv.c", ALLOC_SLOTS, SHARED_SLAB),
]


MASK_DIAG = "https://github.com/flashinfer-ai/flashinfer/pull/348"
WRONG_POS = "https://github.com/mybigday/llama.rn/issues/396"
EDGE_MASK = "https://github.com/zml/zml/pull/763"

#: Public references for the decoder mutants (impl/mutants/decoder_mutants.py names them).
DECODER_REFS = {
    "cache-length-position": CACHE_POS,
    "keeps-w-plus-1": FA_WINDOW,
    "rope-at-slot": WRONG_POS,
    "full-mask-diagonal": MASK_DIAG,
    "window-edge-mask": EDGE_MASK,
}


def _decoder_mutants() -> list[Mutant]:
    """The decoder mutants of :mod:`impl.mutants.decoder_mutants`; where it cannot import (no torch),
    one placeholder whose build raises :class:`MutantUnavailable` with the reason."""
    try:
        mod = importlib.import_module("impl.mutants.decoder_mutants")
    except ImportError as e:
        reason = f"{type(e).__name__}: {e}"

        def unavailable() -> Any:
            raise MutantUnavailable(f"decoder mutants unavailable ({reason})")

        return [Mutant("decoder-*", "decoder", "", reason, "decoder", unavailable)]
    out = []
    for name, dm in mod.DECODER_MUTANTS.items():
        def build(dm=dm) -> Any:
            return dm

        out.append(Mutant(f"decoder-{name}", dm.bug_class, DECODER_REFS.get(name, ""), dm.doc, "decoder", build))
    return out


def catalogue() -> list[Mutant]:
    """Every mutant, Python ring first, then C ring, then decoder, then paged (:mod:`impl.mutants.paged_mutants`)."""
    from impl.mutants.paged_mutants import paged_mutants

    return [*PY_RING, *C_RING, *_decoder_mutants(), *paged_mutants()]


def select(names: list[str] | None) -> list[Mutant]:
    """The mutants named (exact name, or a prefix such as ``ring-`` / ``c-``); all when ``names`` is empty."""
    allm = catalogue()
    if not names:
        return allm
    out = []
    for n in names:
        hit = [m for m in allm if m.name == n] or [m for m in allm if m.name.startswith(n)]
        if not hit:
            raise KeyError(f"unknown mutant {n!r}; known: {', '.join(m.name for m in allm)}")
        out.extend(m for m in hit if m not in out)
    return out


if __name__ == "__main__":  # pragma: no cover - a quick listing
    for m in catalogue():
        print(f"{m.name:32s} {m.kind:8s} {m.bug_class:45s} {m.reference}")
    sys.exit(0)
