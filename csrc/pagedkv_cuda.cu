// pagedkv_cuda.cu — paged gather and windowed decode attention (see pagedkv_cuda.h).
//
// Every index — which live-table entry and slot the i-th needed position of a sequence is read
// from, where it lands in the dense buffer — comes from pagedkv_index.h (pkv_gather_row,
// pkv_dense_row, pkv_needed_len), the functions pagedkv.c and the CPU tests run, so the GPU's
// arithmetic is the arithmetic the CPU checks against pyspec/paged_index.py.
//
// Kernels:
//   gather_kernel  grid-stride over [seq][W-1][D]: one element per thread, zero past the needed rows.
//   decode_kernel  one thread block per sequence: tiles of kThreads keys (the needed ones, then the
//                  query's own), a score per thread, online softmax in fp32 across tiles, the
//                  weighted values accumulated per width element in shared memory.
#include "pagedkv_cuda.h"
#include "pagedkv_index.h"

#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>

namespace {

thread_local char g_detail[256];
constexpr int kThreads = 128;
constexpr int64_t kMaxDecodeWidth = 8192;

int cuda_fail(cudaError_t e, const char *what) {
  snprintf(g_detail, sizeof g_detail, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
  return PKVC_E_CUDA;
}

__global__ void gather_kernel(const float *__restrict__ kp, const float *__restrict__ vp,
                              float *__restrict__ ko, float *__restrict__ vo, const int64_t *__restrict__ n,
                              const int64_t *__restrict__ live, int64_t stride, int64_t B, int64_t D,
                              int64_t W, int64_t total) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total; idx += step) {
    const int64_t d = idx % D, r = idx / D, i = r % (W - 1), q = r / (W - 1);
    const int64_t row = pkv_gather_row(n[q], W, B, live + q * stride, i);
    const int64_t dst = pkv_dense_row(q, i, W) * D + d;
    ko[dst] = row < 0 ? 0.0f : kp[row * D + d];
    vo[dst] = row < 0 ? 0.0f : vp[row * D + d];
  }
}

__device__ float block_reduce(float v, float *red, bool is_max) {
  for (int o = 16; o > 0; o >>= 1) {
    const float u = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, u) : v + u;
  }
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < kThreads / 32; ++w) r = is_max ? fmaxf(r, red[w]) : r + red[w];
  __syncthreads();  // red is reused by the next reduction
  return r;
}

__global__ void decode_kernel(const float *__restrict__ kp, const float *__restrict__ vp,
                              const int64_t *__restrict__ n, const int64_t *__restrict__ live, int64_t stride,
                              int64_t B, int64_t D, int64_t W, const float *__restrict__ q,
                              const float *__restrict__ ks, const float *__restrict__ vs, float *__restrict__ out,
                              float scale) {
  extern __shared__ float acc[];  // [D]
  __shared__ float p_s[kThreads], red[kThreads / 32], m_s, l_s;
  __shared__ int64_t rows_s[kThreads];
  const int64_t s = blockIdx.x, nq = n[s], len = pkv_needed_len(nq, W), total = len + 1;
  const int tid = threadIdx.x;
  const float *qs = q + s * D;
  for (int64_t d = tid; d < D; d += kThreads) acc[d] = 0.0f;
  if (tid == 0) {
    m_s = -INFINITY;
    l_s = 0.0f;
  }
  __syncthreads();
  for (int64_t base = 0; base < total; base += kThreads) {
    const int64_t i = base + tid;
    float sc = -INFINITY;
    int64_t row = -1;  // -1: the query's own key and value
    if (i < total) {
      const float *kr = ks + s * D;
      if (i < len) {
        row = pkv_gather_row(nq, W, B, live + s * stride, i);
        kr = kp + row * D;
      }
      float dot = 0.0f;
      for (int64_t d = 0; d < D; ++d) dot += qs[d] * kr[d];
      sc = dot * scale;
    }
    rows_s[tid] = row;
    const float m_old = m_s;
    const float m_new = fmaxf(m_old, block_reduce(sc, red, true));
    const float p = i < total ? expf(sc - m_new) : 0.0f;
    p_s[tid] = p;
    const float tile_sum = block_reduce(p, red, false);
    const float alpha = expf(m_old - m_new);  // 0 on the first tile (m_old = -inf)
    if (tid == 0) {
      l_s = l_s * alpha + tile_sum;
      m_s = m_new;
    }
    const int64_t count = total - base < kThreads ? total - base : kThreads;
    for (int64_t d = tid; d < D; d += kThreads) {
      float a = acc[d] * alpha;
      for (int64_t t = 0; t < count; ++t) a += p_s[t] * (rows_s[t] >= 0 ? vp[rows_s[t] * D + d] : vs[s * D + d]);
      acc[d] = a;
    }
    __syncthreads();
  }
  for (int64_t d = tid; d < D; d += kThreads) out[s * D + d] = acc[d] / l_s;
}

bool on_device(const void *p) {
  cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) error
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

// Host validation shared by both calls: the shapes, then every live entry a needed position reads.
int validate(int64_t nb, int64_t b, int64_t d, int64_t w, int64_t seqs, const int64_t *n, const int64_t *live,
             int64_t stride) {
  if (nb < 1 || b < 1 || d < 1 || w < 1 || stride < 1 || seqs < 0) return PKVC_E_CONFIG;
  if (seqs == 0) return PKVC_OK;
  if (!n || !live) return PKVC_E_NULL;
  if (nb > INT64_MAX / b || nb * b > INT64_MAX / d || seqs > INT64_MAX / stride) return PKVC_E_NOMEM;
  for (int64_t q = 0; q < seqs; ++q) {
    if (n[q] < 0) return PKVC_E_TABLE;
    const int64_t len = pkv_needed_len(n[q], w);
    if (len == 0) continue;
    const int64_t last = pkv_gather_live(n[q], w, b, len - 1);  // the needed entries are 0 .. last
    if (last >= stride) return PKVC_E_TABLE;
    for (int64_t t = 0; t <= last; ++t)
      if (live[q * stride + t] < 0 || live[q * stride + t] >= nb) return PKVC_E_TABLE;
  }
  return PKVC_OK;
}

// Device copies of n and live, allocated and filled in stream order; freed by release().
int upload(int64_t seqs, const int64_t *n, const int64_t *live, int64_t stride, cudaStream_t st, int64_t **dn,
           int64_t **dl) {
  const size_t nbytes = (size_t)seqs * sizeof(int64_t), lbytes = (size_t)(seqs * stride) * sizeof(int64_t);
  cudaError_t e = cudaMallocAsync((void **)dn, nbytes, st);
  if (e != cudaSuccess) return e == cudaErrorMemoryAllocation ? PKVC_E_NOMEM : cuda_fail(e, "cudaMallocAsync");
  e = cudaMallocAsync((void **)dl, lbytes, st);
  if (e != cudaSuccess) {
    cudaFreeAsync(*dn, st);
    return e == cudaErrorMemoryAllocation ? PKVC_E_NOMEM : cuda_fail(e, "cudaMallocAsync");
  }
  e = cudaMemcpyAsync(*dn, n, nbytes, cudaMemcpyHostToDevice, st);
  if (e == cudaSuccess) e = cudaMemcpyAsync(*dl, live, lbytes, cudaMemcpyHostToDevice, st);
  if (e != cudaSuccess) {
    cudaFreeAsync(*dn, st);
    cudaFreeAsync(*dl, st);
    return cuda_fail(e, "cudaMemcpyAsync");
  }
  return PKVC_OK;
}

int launched(int64_t *dn, int64_t *dl, cudaStream_t st, const char *what) {
  cudaError_t e = cudaGetLastError();
  cudaFreeAsync(dn, st);
  cudaFreeAsync(dl, st);
  return e == cudaSuccess ? PKVC_OK : cuda_fail(e, what);
}

}  // namespace

extern "C" const char *pkvc_strerror(int code) {
  switch (code) {
    case PKVC_OK: return "ok";
    case PKVC_E_NULL: return "a pointer needed for a non-empty buffer is NULL";
    case PKVC_E_CONFIG: return "window, block_size, num_blocks, width and live_stride must be >= 1, num_seqs >= 0";
    case PKVC_E_NOMEM: return "device scratch allocation failed (or a size would overflow)";
    case PKVC_E_TABLE: return "n < 0, or a needed live-table entry is outside the stride or the pool";
    case PKVC_E_ARG: return "scale must be finite and > 0";
    case PKVC_E_CUDA: return "CUDA runtime error (see pkvc_cuda_detail)";
    case PKVC_E_NOTDEVICE: return "a pool, input or output pointer is not device memory";
    default: return "unknown pagedkv_cuda status";
  }
}

extern "C" const char *pkvc_cuda_detail(void) { return g_detail; }

extern "C" int pkvc_gather(const float *k_pool, const float *v_pool, int64_t num_blocks, int64_t block_size,
                           int64_t width, int64_t window, int64_t num_seqs, const int64_t *n, const int64_t *live,
                           int64_t live_stride, float *k_out, float *v_out, void *stream) {
  int rc = validate(num_blocks, block_size, width, window, num_seqs, n, live, live_stride);
  if (rc != PKVC_OK || num_seqs == 0 || window == 1) return rc;
  if (num_seqs > INT64_MAX / (window - 1) || num_seqs * (window - 1) > INT64_MAX / width) return PKVC_E_NOMEM;
  if (!k_pool || !v_pool || !k_out || !v_out) return PKVC_E_NULL;
  if (!on_device(k_pool) || !on_device(v_pool) || !on_device(k_out) || !on_device(v_out)) return PKVC_E_NOTDEVICE;
  cudaStream_t st = (cudaStream_t)stream;
  int64_t *dn, *dl;
  if ((rc = upload(num_seqs, n, live, live_stride, st, &dn, &dl)) != PKVC_OK) return rc;
  const int64_t total = num_seqs * (window - 1) * width;
  const int64_t want = (total + kThreads - 1) / kThreads;
  const unsigned grid = (unsigned)(want < 65535 ? want : 65535);
  gather_kernel<<<grid, kThreads, 0, st>>>(k_pool, v_pool, k_out, v_out, dn, dl, live_stride, block_size, width,
                                           window, total);
  return launched(dn, dl, st, "gather_kernel");
}

extern "C" int pkvc_decode(const float *k_pool, const float *v_pool, int64_t num_blocks, int64_t block_size,
                           int64_t width, int64_t window, int64_t num_seqs, const int64_t *n, const int64_t *live,
                           int64_t live_stride, const float *q, const float *k_self, const float *v_self,
                           float *out, float scale, void *stream) {
  int rc = validate(num_blocks, block_size, width, window, num_seqs, n, live, live_stride);
  if (rc != PKVC_OK) return rc;
  if (width > kMaxDecodeWidth) return PKVC_E_CONFIG;
  if (!(scale > 0.0f) || !isfinite(scale)) return PKVC_E_ARG;
  if (num_seqs == 0) return PKVC_OK;
  if (num_seqs > INT64_MAX / width || num_seqs > 2147483647) return PKVC_E_NOMEM;
  if (!k_pool || !v_pool || !q || !k_self || !v_self || !out) return PKVC_E_NULL;
  if (!on_device(k_pool) || !on_device(v_pool) || !on_device(q) || !on_device(k_self) || !on_device(v_self) ||
      !on_device(out))
    return PKVC_E_NOTDEVICE;
  cudaStream_t st = (cudaStream_t)stream;
  int64_t *dn, *dl;
  if ((rc = upload(num_seqs, n, live, live_stride, st, &dn, &dl)) != PKVC_OK) return rc;
  decode_kernel<<<(unsigned)num_seqs, kThreads, (size_t)width * sizeof(float), st>>>(
      k_pool, v_pool, dn, dl, live_stride, block_size, width, window, q, k_self, v_self, out, scale);
  return launched(dn, dl, st, "decode_kernel");
}
