/* ringkv.h — a sliding-window KV cache as a ring buffer: the C ABI that `--target c:PATH.so` fuzzes.
 *
 * Semantics (DESIGN §1): a cache of window W >= 1 holds, after n tokens, the
 * entries of positions n - min(W, n) .. n-1 (Lean lastWindow); position p lives
 * in slot p % W; reads are in logical order, oldest first. The next position
 * is n, never the cache length.
 *
 * Contract for every implementation of this header:
 *   - every call returns a ringkv_status code; none aborts or exits;
 *   - a call that returns an error changes nothing (the ring is as before);
 *   - no global state: handles are independent.
 *
 * The region between the cffi markers is plain C declarations only, so the
 * Python bindings (impl/_ring_build.py, and cffi ABI mode for c:PATH.so) read
 * their declarations from this file and cannot drift from it.
 */
#ifndef RINGKV_H
#define RINGKV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cffi:begin */
typedef struct ringkv ringkv_t;

typedef enum {
  RINGKV_OK = 0,
  RINGKV_E_NULL = 1,     /* null handle, or a null pointer where data is needed */
  RINGKV_E_WINDOW = 2,   /* window < 1 */
  RINGKV_E_WIDTH = 3,    /* width < 1 */
  RINGKV_E_NOMEM = 4,    /* allocation failed, or an array would exceed PTRDIFF_MAX bytes */
  RINGKV_E_POSITION = 5, /* position is not the next expected one (gap or duplicate) */
  RINGKV_E_CAPACITY = 6, /* caller's buffer is smaller than the cache length */
  RINGKV_E_RANGE = 7     /* negative count, or positions would overflow int64 */
} ringkv_status;

/* Static text for a status code (never NULL; unknown codes get a generic text). */
const char *ringkv_strerror(int code);

/* New empty ring of `window` slots, each a position and a key and a value of
 * `width` float32. On success *out is the handle; on error *out is untouched. */
int ringkv_create(int64_t window, int64_t width, ringkv_t **out);

/* Free the ring. NULL is RINGKV_E_NULL (and harmless). */
int ringkv_destroy(ringkv_t *r);

/* Start a new stream (next position 0, empty cache) with a possibly different
 * window; the width stays. If the new window needs memory that cannot be
 * allocated, RINGKV_E_NOMEM and the old stream is intact. */
int ringkv_reset(ringkv_t *r, int64_t window);

/* Append one entry; `pos` must equal the next position. key/value: `width` floats. */
int ringkv_push(ringkv_t *r, int64_t pos, const float *key, const float *value);

/* Append n entries of positions first_pos .. first_pos+n-1 (a prefill chunk; n may
 * exceed the window: only the last min(n, W) survive). keys/values: n x width,
 * row-major. n == 0 is a no-op returning RINGKV_OK (keys/values may be NULL). */
int ringkv_push_chunk(ringkv_t *r, int64_t first_pos, int64_t n,
                      const float *keys, const float *values);

int ringkv_length(const ringkv_t *r, int64_t *out);   /* min(W, n) */
int ringkv_next_pos(const ringkv_t *r, int64_t *out); /* n */
int ringkv_window(const ringkv_t *r, int64_t *out);
int ringkv_width(const ringkv_t *r, int64_t *out);

/* Copy the cache in logical order (oldest first): positions[len], keys and
 * values[len x width]. Any of the three may be NULL to skip it. If capacity
 * (in entries) < length: RINGKV_E_CAPACITY, buffers untouched, and *out_len
 * is set to the length needed. On success *out_len = length. */
int ringkv_read(const ringkv_t *r, int64_t capacity, int64_t *positions,
                float *keys, float *values, int64_t *out_len);

/* Checksum of the cache's payloads, from the stored bytes:
 *   h(e)  = sum_j (2j+1) * (K1 * kbits_j + K2 * vbits_j)      (mod 2^64)
 *   sum   = sum_i (i+1) * h(entry_i), i = logical index       (mod 2^64)
 * kbits_j / vbits_j: the IEEE-754 bits of key[j] / value[j] as uint32;
 * K1 = 0x9E3779B97F4A7C15, K2 = 0xC2B2AE3D27D4EB4F. Empty cache: 0. */
int ringkv_checksum(const ringkv_t *r, uint64_t *out);

/* Throughput check: push n entries (positions next .. next+n-1, keys/values
 * n x width) and after the t-th push write the positions of the cache in
 * logical order to positions_out[t*W .. t*W+W-1] (padded with -1) and its
 * ringkv_checksum to checksums_out[t]. The checksum is kept incrementally:
 * each entry's stored bytes are hashed when it enters and again when it is
 * evicted, so a payload corrupted while cached shifts every later checksum.
 * n == 0 is a no-op. One FFI call checks a whole stream. */
int ringkv_trace(ringkv_t *r, int64_t n, const float *keys, const float *values,
                 int64_t *positions_out, uint64_t *checksums_out);
/* cffi:end */

#ifdef __cplusplus
}
#endif

#endif /* RINGKV_H */
