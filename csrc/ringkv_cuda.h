/* ringkv_cuda.h — batched sliding-window ring KV cache in GPU memory, and a fused
 * decode-attention kernel that reads K/V straight from the ring slots.
 *
 * Contract: DESIGN.md §1. Per (sequence b, layer l) the cache is a ring of W slots;
 * the entry of position p lives in slot p % W (csrc/ringkv_index.h holds all index
 * math, shared with the CPU build so the CPU fuzzer checks the same arithmetic).
 *
 * Memory (owned by the caller; the handle only keeps the pointers):
 *   k_cache, v_cache : [B][L][Hkv][W][D] elements of the handle's dtype, device memory.
 *     The window of one (sequence, layer, KV head) is contiguous: W rows of D.
 * Inputs/outputs of the calls below (device memory, contiguous, same dtype):
 *   append chunk  k_new, v_new : [k][Hkv][D]     (token-major, as a QKV projection writes it)
 *   append step   k_new, v_new : [B][Hkv][D]     (one token for every sequence)
 *   gather        k_out, v_out : [count][Hkv][W][D], logical order (row 0 = oldest),
 *                                rows >= min(n, W) are zero-filled
 *   decode        q, out       : [B][Hq][D]; query head hq uses KV head hq / (Hq / Hkv)
 *
 * Every pointer must be 16-byte aligned and D * sizeof(element) a multiple of 16.
 * Decode attention supports D in {64, 128, 256}. Calls are asynchronous on the given
 * stream (NULL = legacy default stream). The handle keeps a host mirror of n (tokens
 * seen) per (sequence, layer) to validate positions without a device sync, and a device
 * copy that the kernels read and the append kernels advance, in stream order.
 *
 * Bad input (null/misaligned pointers, W < 1, unsupported dtype, positions out of
 * order, sequence or layer index out of range, bad dims) returns an error code: no
 * kernel is launched and nothing is written. The calls never abort.
 *
 * The block between CFFI-BEGIN and CFFI-END is plain C declarations only: impl/cuda_ring.py
 * feeds it to cffi's cdef verbatim.
 */
#ifndef RINGKV_CUDA_H
#define RINGKV_CUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CFFI-BEGIN */
typedef enum {
  RKVC_OK = 0,
  RKVC_E_NULL = -1,      /* a required pointer is NULL */
  RKVC_E_ALIGN = -2,     /* a pointer is not 16-byte aligned, or D * elem size % 16 != 0 */
  RKVC_E_WINDOW = -3,    /* W < 1 (or W > 2^30) */
  RKVC_E_DTYPE = -4,     /* dtype not supported by this build */
  RKVC_E_POSITION = -5,  /* positions out of order: not the next position of the stream */
  RKVC_E_SEQ = -6,       /* sequence index out of range [0, B) */
  RKVC_E_LAYER = -7,     /* layer index out of range [0, L) */
  RKVC_E_DIM = -8,       /* bad dimension: B, L, Hkv, D < 1, Hq % Hkv != 0, unsupported head dim */
  RKVC_E_ARG = -9,       /* other bad argument: negative chunk length, bad scale or split count */
  RKVC_E_CUDA = -10,     /* CUDA runtime error (see rkvc_cuda_detail) */
  RKVC_E_NOMEM = -11,    /* host or device allocation failed */
  RKVC_E_NOTDEVICE = -12 /* a cache pointer is not device memory */
} rkvc_status;

typedef enum {
  RKVC_F32 = 0,
  RKVC_F16 = 1,
  RKVC_BF16 = 2
} rkvc_dtype;

typedef struct rkvc_cache rkvc_cache;

/* Message for a status code; never NULL. */
const char *rkvc_strerror(int code);
/* Text of the last CUDA error seen by this library on this thread ("" if none). */
const char *rkvc_cuda_detail(void);
/* 1 iff this build supports the dtype. */
int rkvc_dtype_supported(int dtype);
/* Element size in bytes of a supported dtype, else 0. */
int rkvc_dtype_size(int dtype);

/* Create a handle over caller-owned caches [B][L][Hkv][W][D]; every stream starts empty
 * (n = 0). The cache memory is neither cleared nor read until written. */
int rkvc_open(rkvc_cache **out, int64_t batch, int64_t layers, int64_t kv_heads,
              int64_t window, int64_t head_dim, int dtype, void *k_cache, void *v_cache);
void rkvc_close(rkvc_cache *h);

/* Start a new stream for sequence seq in every layer: n = 0 (stale slots stay, unread). */
int rkvc_reset(rkvc_cache *h, int64_t seq, void *stream);
/* Tokens seen so far (the next position) for (layer, seq), from the host mirror. */
int rkvc_length(const rkvc_cache *h, int64_t layer, int64_t seq, int64_t *n_out);

/* Append a chunk of k >= 0 tokens at positions pos0 .. pos0+k-1 (pos0 must equal n)
 * to (layer, seq). Only the last min(k, W) are written, each to slot pos % W. */
int rkvc_append(rkvc_cache *h, int64_t layer, int64_t seq, int64_t pos0, int64_t k,
                const void *k_new, const void *v_new, void *stream);
/* Append one token to every sequence of a layer; positions[b] (host array of B) must
 * equal each sequence's n. */
int rkvc_append_step(rkvc_cache *h, int64_t layer, const int64_t *positions,
                     const void *k_new, const void *v_new, void *stream);

/* Write sequences seq0 .. seq0+count-1 of a layer in logical order (see layout above). */
int rkvc_gather(rkvc_cache *h, int64_t layer, int64_t seq0, int64_t count,
                void *k_out, void *v_out, void *stream);

/* One query token per sequence (the newest position t = n - 1) attending to its window,
 * read from the ring slots: out = softmax(q.K^T * scale) V over the min(n, W) filled slots,
 * online softmax in fp32. Sequences with n = 0 get zeros. num_splits = 0 picks split-K
 * automatically; >= 1 forces it (at most 256). scale must be finite and > 0. */
int rkvc_decode_attention(rkvc_cache *h, int64_t layer, int64_t q_heads, const void *q,
                          void *out, float scale, int num_splits, void *stream);
/* The split count num_splits = 0 would choose for q_heads (>= 1), or an error code < 0. */
int rkvc_decode_auto_splits(const rkvc_cache *h, int64_t q_heads);
/* Memory clock (kHz) and bus width (bits) of a device, for the peak-bandwidth estimate
 * 2 * clock * width / 8 bytes/s used by the benchmark. */
int rkvc_device_memory_info(int device, int *mem_clock_khz, int *bus_width_bits);
/* CFFI-END */

#ifdef __cplusplus
}
#endif

#endif /* RINGKV_CUDA_H */
