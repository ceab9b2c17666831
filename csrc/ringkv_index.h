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

/* Slot of absolute position pos. */
RKV_HD int64_t rkv_slot(int64_t pos, int64_t w) { return pos % w; }

/* Number of filled slots after n tokens: min(n, w) (Lean lastWindow_length). */
RKV_HD int64_t rkv_len(int64_t n, int64_t w) { return n < w ? n : w; }

/* Position of the oldest cached entry after n tokens: n - min(n, w). */
RKV_HD int64_t rkv_oldest(int64_t n, int64_t w) { return n - rkv_len(n, w); }

/* Slot holding logical index i (0 = oldest) after n tokens; i < rkv_len(n, w). */
RKV_HD int64_t rkv_logical_slot(int64_t n, int64_t w, int64_t i) {
  return rkv_slot(rkv_oldest(n, w) + i, w);
}

/* Appending a chunk of k tokens after n: index of the first chunk entry that
 * survives (the last min(k, w) do). Writing only those makes the scatter race-free. */
RKV_HD int64_t rkv_chunk_first_kept(int64_t k, int64_t w) { return k > w ? k - w : 0; }

/* Nonzero iff the query at position t sees key position p: p <= t < p + w (Lean inWindow). */
RKV_HD int rkv_in_window(int64_t w, int64_t t, int64_t p) { return p <= t && t < p + w; }

#endif /* RINGKV_INDEX_H */
