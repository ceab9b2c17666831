/* ringkv_index.h — the ring buffer's index math, shared by the C ring and the CUDA kernels.
 *
 * One definition of "which slot, which order, how full", compiled for the host
 * (ringkv.c, and the CPU fuzz targets through impl/ring.py) and for the device
 * (ringkv_cuda.cu), so the arithmetic the GPU runs is the arithmetic the CPU
 * fuzzer checks against pyspec.
 *
 * Model (DESIGN §1): after n tokens of a stream with window w >= 1, the cache
 * holds positions n - min(w, n) .. n-1; position p lives in slot p % w
 * (Lean slot_eq_pos_mod); logical index i (0 = oldest) is slot (oldest + i) % w.
 * All arguments are non-negative; callers validate before calling.
 */
#ifndef RINGKV_INDEX_H
#define RINGKV_INDEX_H

#include <stdint.h>

#if defined(__CUDACC__)
#define RKV_HD __host__ __device__ __forceinline__
#else
#define RKV_HD static inline
#endif

/* cffi:begin */

/* Lean: KVWindow.rkv_slot_lt, KVWindow.index_slot_eq_pos_mod (lean/KVWindow/IndexRing.lean). */
/* Slot of absolute position pos. */
RKV_HD int64_t rkv_slot(int64_t pos, int64_t w) { return pos % w; }

/* Lean: KVWindow.rkv_len_eq_min, KVWindow.index_read_lastWindow (lean/KVWindow/IndexRing.lean). */
/* Number of filled slots after n tokens: min(n, w) (Lean lastWindow_length). */
RKV_HD int64_t rkv_len(int64_t n, int64_t w) { return n < w ? n : w; }

/* Lean: KVWindow.rkv_oldest_add_len (lean/KVWindow/IndexRing.lean). */
/* Position of the oldest cached entry after n tokens: n - min(n, w). */
RKV_HD int64_t rkv_oldest(int64_t n, int64_t w) { return n - rkv_len(n, w); }

/* Lean: KVWindow.rkv_logical_slot_lt, KVWindow.rkv_slot_pos_logical_slot, KVWindow.index_read_lastWindow (lean/KVWindow/IndexRing.lean). */
/* Slot holding logical index i (0 = oldest) after n tokens; i < rkv_len(n, w). */
RKV_HD int64_t rkv_logical_slot(int64_t n, int64_t w, int64_t i) {
  return rkv_slot(rkv_oldest(n, w) + i, w);
}

/* Lean: KVWindow.rkv_chunk_kept_eq, KVWindow.index_pushChunk_simulates (lean/KVWindow/IndexRing.lean). */
/* Appending a chunk of k tokens after n: index of the first chunk entry that
 * survives (the last min(k, w) do). Writing only those makes the scatter race-free. */
RKV_HD int64_t rkv_chunk_first_kept(int64_t k, int64_t w) { return k > w ? k - w : 0; }

/* Lean: KVWindow.rkv_in_window_iff, KVWindow.chunk_attention_eq (lean/KVWindow/IndexRing.lean). */
/* Nonzero iff the query at position t sees key position p: p <= t < p + w (Lean inWindow). */
RKV_HD int rkv_in_window(int64_t w, int64_t t, int64_t p) { return p <= t && t < p + w; }

/* ---- Additions for the CUDA kernels (ringkv_cuda.cu); the CPU fuzz target cuda-index
 * calls these same functions through impl._cudaindex. Existing definitions above are unchanged. */

/* Lean: KVWindow.rkv_chunk_kept_eq (lean/KVWindow/IndexRing.lean). */
/* Number of chunk entries an append of k tokens writes: the last min(k, w). */
RKV_HD int64_t rkv_chunk_kept(int64_t k, int64_t w) { return rkv_len(k, w); }

/* Lean: KVWindow.rkv_chunk_src_range (lean/KVWindow/IndexRing.lean). */
/* The i-th write (0 <= i < rkv_chunk_kept(k, w)) of appending a k-token chunk:
 * which chunk entry it copies ... */
RKV_HD int64_t rkv_chunk_src(int64_t k, int64_t w, int64_t i) { return rkv_chunk_first_kept(k, w) + i; }

/* Lean: KVWindow.rkv_chunk_dst_inj (lean/KVWindow/IndexRing.lean). */
/* ... and into which slot, when the chunk starts at position pos0 (= tokens seen before it).
 * The kept entries have min(k, w) consecutive positions, so their slots are distinct. */
RKV_HD int64_t rkv_chunk_dst(int64_t pos0, int64_t k, int64_t w, int64_t i) {
  return rkv_slot(pos0 + rkv_chunk_src(k, w, i), w);
}

/* Lean: KVWindow.rkv_slot_valid_iff (lean/KVWindow/IndexRing.lean). */
/* Nonzero iff slot s (0 <= s < w) holds a cached entry after n tokens: the first
 * min(n, w) slots fill first (the stream starts at position 0), the rest are unfilled. */
RKV_HD int rkv_slot_valid(int64_t n, int64_t w, int64_t s) { return s < rkv_len(n, w); }

/* Lean: KVWindow.rkv_slot_pos_inverse, KVWindow.rkv_slot_pos_slot, KVWindow.index_slot_pos_correct (lean/KVWindow/IndexRing.lean). */
/* Position held by a valid slot s after n tokens: the unique cached position p with p % w == s. */
RKV_HD int64_t rkv_slot_pos(int64_t n, int64_t w, int64_t s) {
  int64_t o = rkv_oldest(n, w);
  return o + (s - rkv_slot(o, w) + w) % w;
}

/* Lean: KVWindow.rkv_split_range_partition (lean/KVWindow/IndexRing.lean). */
/* Split-K: the slots [*lo, *hi) that split j of nsplit (j < nsplit) reads out of the
 * len valid slots [0, len). The splits partition [0, len); trailing ones may be empty. */
RKV_HD void rkv_split_range(int64_t len, int64_t nsplit, int64_t j, int64_t *lo, int64_t *hi) {
  int64_t per = (len + nsplit - 1) / nsplit;
  int64_t a = j * per, b = a + per;
  *lo = a < len ? a : len;
  *hi = b < len ? b : len;
}

/* Lean: KVWindow.rkv_cache_row_next (lean/KVWindow/IndexRing.lean). */
/* Row (in units of head_dim elements) of slot s of KV head h, layer l, sequence b in a
 * cache laid out [B][L][Hkv][W][D]: the window of one (sequence, layer, head) is contiguous. */
RKV_HD int64_t rkv_cache_row(int64_t b, int64_t l, int64_t h, int64_t s,
                             int64_t L, int64_t hkv, int64_t w) {
  return ((b * L + l) * hkv + h) * w + s;
}

/* cffi:end */

#endif /* RINGKV_INDEX_H */
