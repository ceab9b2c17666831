/* pagedkv_cuda.h — gather the needed K/V of several sequences out of a paged pool in GPU memory,
 * and a windowed decode attention over them: the device side of pagedkv.h's pool layout.
 *
 * Contract: DESIGN §1 "Paged caches". The pool is laid out like pagedkv.c's: k_pool, v_pool are
 * [num_blocks][block_size][width] float32 in device memory (slot s of physical block p is row
 * p * block_size + s). A sequence q is given by n[q] (tokens seen) and its compact live table
 * live[q * live_stride + t] = the physical block of logical block pkv_first_kept_block(n[q]) + t
 * (the entries pagedkv_table returns from the first non-none one on). Every index is computed
 * by csrc/pagedkv_index.h, the header the CPU pool and the CPU tests use.
 *
 * n and live are HOST arrays: every entry a needed position reads is validated on the host
 * (n >= 0, the live entry inside the stride and a block id in 0 .. num_blocks-1) before any
 * copy or launch; an error launches nothing and writes nothing. The calls never abort. They
 * are ordered on `stream` (NULL: the legacy default stream) and return once the work is queued.
 *
 *   gather  k_out, v_out : [num_seqs][window-1][width], row i of sequence q = the i-th position
 *                          it needs (oldest first, lastWindow (W-1)); rows past min(n, W-1) are 0.
 *   decode  q, k_self, v_self, out : [num_seqs][width]; out[q] = softmax(q . K^T * scale) V over
 *                          the sequence's needed keys and its own (k_self, v_self): the query at
 *                          position n attends to positions max(0, n-W+1) .. n. fp32 throughout.
 *
 * The region between the cffi markers is plain C declarations only (impl/cuda_paged.py reads it).
 */
#ifndef PAGEDKV_CUDA_H
#define PAGEDKV_CUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cffi:begin */
typedef enum {
  PKVC_OK = 0,
  PKVC_E_NULL = 1,      /* a pointer needed for a non-empty buffer is NULL */
  PKVC_E_CONFIG = 2,    /* window, block_size, num_blocks, width, live_stride < 1, num_seqs < 0,
                           or decode with width > 8192 */
  PKVC_E_NOMEM = 3,     /* device scratch allocation failed, or a size would overflow */
  PKVC_E_TABLE = 4,     /* n[q] < 0, or a needed live entry outside the stride or the pool */
  PKVC_E_ARG = 5,       /* decode scale not finite and > 0 */
  PKVC_E_CUDA = 6,      /* CUDA runtime error (see pkvc_cuda_detail) */
  PKVC_E_NOTDEVICE = 7  /* a pool, input or output pointer is not device memory */
} pkvc_status;

/* Static text for a status code (never NULL; unknown codes get a generic text). */
const char *pkvc_strerror(int code);
/* Text of the last CUDA error this library saw on this thread ("" if none). */
const char *pkvc_cuda_detail(void);

int pkvc_gather(const float *k_pool, const float *v_pool, int64_t num_blocks, int64_t block_size,
                int64_t width, int64_t window, int64_t num_seqs, const int64_t *n, const int64_t *live,
                int64_t live_stride, float *k_out, float *v_out, void *stream);

int pkvc_decode(const float *k_pool, const float *v_pool, int64_t num_blocks, int64_t block_size,
                int64_t width, int64_t window, int64_t num_seqs, const int64_t *n, const int64_t *live,
                int64_t live_stride, const float *q, const float *k_self, const float *v_self,
                float *out, float scale, void *stream);
/* cffi:end */

#ifdef __cplusplus
}
#endif

#endif /* PAGEDKV_CUDA_H */
