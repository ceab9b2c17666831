/* pagedkv_index.h — the paged pool's index math, shared by the C pool and the CUDA gather kernel.
 *
 * One definition of "which block, which slot, which blocks the freeing rule releases, which
 * positions the next query needs", compiled for the host (pagedkv.c, and impl._pagedindex,
 * which the tests check exhaustively against pyspec/paged_index.py) and for the device
 * (pagedkv_cuda.cu), so the arithmetic the GPU runs is the arithmetic the CPU checks.
 *
 * Model (DESIGN §1 "Paged caches", docs/paged.md): window w >= 1 (keys a query
 * attends to, itself included), block size b >= 1 (positions per block). After n tokens the next
 * query (position n) needs positions max(0, n-w+1) .. n-1 (lastWindow (w-1) of the history);
 * logical block j holds positions j*b .. j*b+b-1. Freeing rule: logical block j is released
 * once (j+1)*b <= n-w+1, i.e. exactly the blocks j < pkv_first_kept_block(n, w, b).
 *
 * Every function is total and overflow-free on its documented domain: n, pos, j, i >= 0,
 * w, b, cap >= 1 (w may be as large as INT64_MAX: no expression forms n+w or (j+1)*b).
 * Callers validate before calling. Each function has a Python twin of the same name in
 * pyspec/paged_index.py.
 */
#ifndef PAGEDKV_INDEX_H
#define PAGEDKV_INDEX_H

#include <stdint.h>

#if defined(__CUDACC__)
#define PKV_HD __host__ __device__ __forceinline__
#else
#define PKV_HD static inline
#endif

/* cffi:begin */

/* Logical block of absolute position pos: pos div b. */
PKV_HD int64_t pkv_logical_block(int64_t pos, int64_t b) { return pos / b; }

/* Slot of position pos inside its block: pos mod b. */
PKV_HD int64_t pkv_block_slot(int64_t pos, int64_t b) { return pos % b; }

/* Length of a sequence's block table after n tokens: ceil(n / b). */
PKV_HD int64_t pkv_table_len(int64_t n, int64_t b) { return n / b + (n % b != 0); }

/* Oldest position the next query needs after n tokens: max(0, n - (w-1)). */
PKV_HD int64_t pkv_first_needed(int64_t n, int64_t w) { return n > w - 1 ? n - (w - 1) : 0; }

/* How many positions the next query needs besides itself: min(n, w-1) (what read returns). */
PKV_HD int64_t pkv_needed_len(int64_t n, int64_t w) { return n - pkv_first_needed(n, w); }

/* First logical block the freeing rule keeps after n tokens: every block j below it has
 * (j+1)*b <= n-w+1 (all its positions precede the first needed one) and is released (none);
 * every block from it on holds a needed position or one not yet written. */
PKV_HD int64_t pkv_first_kept_block(int64_t n, int64_t w, int64_t b) {
  return pkv_first_needed(n, w) / b;
}

/* Nonzero iff the freeing rule has released logical block j after n tokens. */
PKV_HD int pkv_block_released(int64_t n, int64_t w, int64_t b, int64_t j) {
  return j < pkv_first_kept_block(n, w, b);
}

/* Blocks a sequence may hold at once, the efficiency bound ceil((w-1)/b) + 1. It is also the
 * most table entries [first kept, table len) can span, the moment an append takes a block too
 * (before that append's freeing step), so it sizes the per-sequence live table. */
PKV_HD int64_t pkv_max_blocks(int64_t w, int64_t b) { return (w - 1) / b + ((w - 1) % b != 0) + 1; }

/* Entries of the per-sequence live-table ring of a pool of num_blocks blocks: a sequence never
 * holds more than min(pkv_max_blocks(w, b), num_blocks) distinct blocks. */
PKV_HD int64_t pkv_table_cap(int64_t w, int64_t b, int64_t num_blocks) {
  int64_t m = pkv_max_blocks(w, b);
  return m < num_blocks ? m : num_blocks;
}

/* Where logical block j's entry lives in a live-table ring of cap entries. The live blocks
 * [first kept, table len) are at most cap consecutive j, so their ring indices are distinct. */
PKV_HD int64_t pkv_ring_index(int64_t j, int64_t cap) { return j % cap; }

/* Nonzero iff the append at position n (= tokens seen) starts a new logical block, which then
 * needs a free block (otherwise it writes into block n div b, copying it first if shared). */
PKV_HD int pkv_starts_block(int64_t n, int64_t b) { return n % b == 0; }

/* Gather of the i-th needed entry (0 <= i < pkv_needed_len(n, w), 0 = oldest) of a sequence
 * with n tokens, through its compact live table (entry t = physical block of logical block
 * pkv_first_kept_block(n, w, b) + t) ... the live-table entry it reads: */
PKV_HD int64_t pkv_gather_live(int64_t n, int64_t w, int64_t b, int64_t i) {
  return pkv_logical_block(pkv_first_needed(n, w) + i, b) - pkv_first_kept_block(n, w, b);
}

/* ... and the slot inside that physical block. */
PKV_HD int64_t pkv_gather_slot(int64_t n, int64_t w, int64_t b, int64_t i) {
  return pkv_block_slot(pkv_first_needed(n, w) + i, b);
}

/* Row (in units of width floats) of slot s of physical block p in a pool laid out [N][b][D]. */
PKV_HD int64_t pkv_pool_row(int64_t p, int64_t s, int64_t b) { return p * b + s; }

/* Row of needed entry i of sequence q in a dense gather buffer laid out [S][w-1][D]. */
PKV_HD int64_t pkv_dense_row(int64_t q, int64_t i, int64_t w) { return q * (w - 1) + i; }

/* The pool row dense row i (0 <= i < w-1) of a sequence with n tokens and compact live table
 * `live` reads, or -1 when i >= pkv_needed_len(n, w) (the row is zero-filled): the gather
 * kernel's whole index computation, one call per row. */
PKV_HD int64_t pkv_gather_row(int64_t n, int64_t w, int64_t b, const int64_t *live, int64_t i) {
  if (i >= pkv_needed_len(n, w)) return -1;
  return pkv_pool_row(live[pkv_gather_live(n, w, b, i)], pkv_gather_slot(n, w, b, i), b);
}

/* cffi:end */

#endif /* PAGEDKV_INDEX_H */
