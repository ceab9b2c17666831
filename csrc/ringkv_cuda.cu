// ringkv_cuda.cu — batched ring KV cache kernels and fused sliding-window decode attention.
//
// See ringkv_cuda.h for the API and memory layout, and ringkv_index.h for every index
// computation (slot of a position, chunk-append plan, logical order, slot validity,
// split-K ranges, cache row): the kernels call those functions and nothing else for
// index math, and the CPU fuzz target cuda-index runs the very same functions.
//
// Kernels:
//   append_chunk_kernel  one sequence, one layer, a chunk of k tokens: thread i of the
//                        min(k, W) kept entries copies chunk entry rkv_chunk_src to slot
//                        rkv_chunk_dst. Kept positions are consecutive, so slots are
//                        distinct: no two threads write the same element (no race).
//   append_step_kernel   one token for each of B sequences (one block per sequence).
//   gather_kernel        logical index i of each sequence <- slot rkv_logical_slot(n, W, i).
//   decode_kernel        flash-decoding: grid (split, KV head x head chunk, sequence); a
//                        group of TPK threads owns one key row at a time (each thread one
//                        16-byte vector of it), dot products reduced with xor shuffles,
//                        online softmax per group in fp32 (log2 domain), groups merged in
//                        shared memory, splits merged by combine_kernel.
#include "ringkv_cuda.h"
#include "ringkv_index.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rkvc_cache {
  int64_t B, L, H, W, D;
  int dtype;
  int esize;
  char *k;          // device [B][L][H][W][D]
  char *v;
  int64_t *n_host;  // [B*L] tokens seen (host mirror)
  int64_t *n_dev;   // [B*L] tokens seen (device copy, advanced by the append kernels)
  float *ws;        // split-K workspace (device), grown on demand
  size_t ws_bytes;
  int sms;
};

namespace {

thread_local char g_detail[256];

int cuda_fail(cudaError_t e, const char *what) {
  snprintf(g_detail, sizeof g_detail, "%s: %s (%s)", what, cudaGetErrorString(e),
           cudaGetErrorName(e));
  return RKVC_E_CUDA;
}

// Check a launch; clears the (non-sticky) error state either way.
int launch_status(const char *what) {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? RKVC_OK : cuda_fail(e, what);
}

bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

constexpr int64_t kMaxWindow = int64_t(1) << 30;
constexpr int64_t kMaxDim = int64_t(1) << 20;
constexpr int kMaxSplits = 256;
constexpr float kLog2e = 1.4426950408889634f;

// ---------------------------------------------------------------------------
// Copy kernels: the data is moved as raw 16-byte vectors, so they are dtype-agnostic.

__global__ void append_chunk_kernel(int4 *__restrict__ kc, int4 *__restrict__ vc,
                                    const int4 *__restrict__ kn, const int4 *__restrict__ vn,
                                    int64_t *__restrict__ n_dev, int64_t b, int64_t l,
                                    int64_t L, int64_t H, int64_t W, int64_t vpr,
                                    int64_t pos0, int64_t k, int64_t total) {
  int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (idx == 0) n_dev[b * L + l] = pos0 + k;  // nobody reads n_dev in this kernel
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (; idx < total; idx += stride) {
    const int64_t vec = idx % vpr;
    const int64_t t = idx / vpr;
    const int64_t h = t % H;
    const int64_t i = t / H;  // i-th write, 0 <= i < rkv_chunk_kept(k, W)
    const int64_t src = (rkv_chunk_src(k, W, i) * H + h) * vpr + vec;
    const int64_t dst = rkv_cache_row(b, l, h, rkv_chunk_dst(pos0, k, W, i), L, H, W) * vpr + vec;
    kc[dst] = kn[src];
    vc[dst] = vn[src];
  }
}

__global__ void append_step_kernel(int4 *__restrict__ kc, int4 *__restrict__ vc,
                                   const int4 *__restrict__ kn, const int4 *__restrict__ vn,
                                   int64_t *__restrict__ n_dev, int64_t l, int64_t L, int64_t H,
                                   int64_t W, int64_t vpr) {
  const int64_t b = blockIdx.x;
  __shared__ int64_t pos_s;
  if (threadIdx.x == 0) pos_s = n_dev[b * L + l];
  __syncthreads();
  const int64_t pos = pos_s;
  const int64_t slot = rkv_chunk_dst(pos, 1, W, 0);
  for (int64_t j = threadIdx.x; j < H * vpr; j += blockDim.x) {
    const int64_t h = j / vpr, vec = j % vpr;
    const int64_t dst = rkv_cache_row(b, l, h, slot, L, H, W) * vpr + vec;
    const int64_t src = (b * H + h) * vpr + vec;
    kc[dst] = kn[src];
    vc[dst] = vn[src];
  }
  if (threadIdx.x == 0) n_dev[b * L + l] = pos + 1;  // only thread 0 touches n_dev
}

__global__ void gather_kernel(const int4 *__restrict__ kc, const int4 *__restrict__ vc,
                              int4 *__restrict__ ko, int4 *__restrict__ vo,
                              const int64_t *__restrict__ n_dev, int64_t seq0, int64_t l,
                              int64_t L, int64_t H, int64_t W, int64_t vpr, int64_t total) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total; idx += stride) {
    const int64_t vec = idx % vpr;
    int64_t t = idx / vpr;
    const int64_t i = t % W;  // logical index, 0 = oldest
    t /= W;
    const int64_t h = t % H;
    const int64_t b = seq0 + t / H;
    const int64_t n = n_dev[b * L + l];
    if (i < rkv_len(n, W)) {
      const int64_t src = rkv_cache_row(b, l, h, rkv_logical_slot(n, W, i), L, H, W) * vpr + vec;
      ko[idx] = kc[src];
      vo[idx] = vc[src];
    } else {
      const int4 z = make_int4(0, 0, 0, 0);
      ko[idx] = z;
      vo[idx] = z;
    }
  }
}

// ---------------------------------------------------------------------------
// Decode attention

template <typename T>
struct Vec;

template <>
struct Vec<float> {
  static constexpr int N = 4;  // elements per 16-byte vector
  __device__ __forceinline__ static void to_float(const int4 &r, float *f) {
    f[0] = __int_as_float(r.x);
    f[1] = __int_as_float(r.y);
    f[2] = __int_as_float(r.z);
    f[3] = __int_as_float(r.w);
  }
  __device__ __forceinline__ static float from_float(float x) { return x; }
};

template <>
struct Vec<__half> {
  static constexpr int N = 8;
  __device__ __forceinline__ static void to_float(const int4 &r, float *f) {
    const int w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      __half2 h2;
      memcpy(&h2, &w[i], sizeof h2);
      const float2 p = __half22float2(h2);
      f[2 * i] = p.x;
      f[2 * i + 1] = p.y;
    }
  }
  __device__ __forceinline__ static __half from_float(float x) { return __float2half_rn(x); }
};

template <>
struct Vec<__nv_bfloat16> {
  static constexpr int N = 8;
  __device__ __forceinline__ static void to_float(const int4 &r, float *f) {
    const int w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      __nv_bfloat162 h2;
      memcpy(&h2, &w[i], sizeof h2);
      const float2 p = __bfloat1622float2(h2);
      f[2 * i] = p.x;
      f[2 * i + 1] = p.y;
    }
  }
  __device__ __forceinline__ static __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
};

constexpr int kDecodeThreads = 128;

template <typename T, int D, int GMAX>
struct DecodeShape {
  static constexpr int N = Vec<T>::N;
  static constexpr int VPR = D / N;                // 16-byte vectors per key row
  static constexpr int TPK = VPR < 32 ? VPR : 32;  // threads per key row (a power of two)
  static constexpr int NV = VPR / TPK;             // vectors per thread
  static constexpr int E = NV * N;                 // elements per thread
  static constexpr int NG = kDecodeThreads / TPK;  // key groups per block
  static constexpr int U = GMAX >= 8 ? 2 : 4;      // keys per group per iteration
  static_assert(D % N == 0 && VPR % TPK == 0 && (TPK & (TPK - 1)) == 0, "unsupported head dim");
};

// grid: x = split, y = KV head * gchunks + head chunk, z = sequence. Query heads of KV head
// hk are hk*G .. hk*G+G-1; this block handles g0 .. g0+GMAX-1 of them (those < G).
template <typename T, int D, int GMAX>
__global__ void __launch_bounds__(kDecodeThreads)
decode_kernel(const T *__restrict__ kc, const T *__restrict__ vc, const int64_t *__restrict__ n_dev,
              const T *__restrict__ q, T *__restrict__ out, float *__restrict__ ws_acc,
              float *__restrict__ ws_ml, int64_t l, int64_t L, int64_t H, int64_t W, int Hq,
              int G, int gchunks, int S, float qscale) {
  using Sh = DecodeShape<T, D, GMAX>;
  constexpr int N = Sh::N, VPR = Sh::VPR, TPK = Sh::TPK, NV = Sh::NV, E = Sh::E, NG = Sh::NG,
                U = Sh::U;

  const int split = blockIdx.x;
  const int hk = blockIdx.y / gchunks;
  const int g0 = (blockIdx.y % gchunks) * GMAX;
  const int64_t b = blockIdx.z;
  const int grp = threadIdx.x / TPK;
  const int lane = threadIdx.x % TPK;

  // The filled slots are [0, len) (rkv_slot_valid); this split reads [lo, hi) of them.
  const int64_t n = n_dev[b * L + l];
  const int64_t len = rkv_len(n, W);
  int64_t lo, hi;
  rkv_split_range(len, S, split, &lo, &hi);

  // This thread's slice of a row: vectors lane + j*TPK, j < NV.
  float qf[GMAX][E];
#pragma unroll
  for (int g = 0; g < GMAX; ++g) {
    const bool live = g0 + g < G;
    const int4 *qrow = reinterpret_cast<const int4 *>(q + ((int64_t)b * Hq + hk * G + g0 + g) * D);
#pragma unroll
    for (int j = 0; j < NV; ++j) {
      const int4 r = live ? qrow[lane + j * TPK] : make_int4(0, 0, 0, 0);
      Vec<T>::to_float(r, &qf[g][j * N]);
    }
#pragma unroll
    for (int e = 0; e < E; ++e) qf[g][e] *= qscale;
  }

  float m[GMAX], lsum[GMAX], acc[GMAX][E];
#pragma unroll
  for (int g = 0; g < GMAX; ++g) {
    m[g] = -INFINITY;
    lsum[g] = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[g][e] = 0.f;
  }

  const int4 *kb = reinterpret_cast<const int4 *>(kc + rkv_cache_row(b, l, hk, 0, L, H, W) * D);
  const int4 *vb = reinterpret_cast<const int4 *>(vc + rkv_cache_row(b, l, hk, 0, L, H, W) * D);

  // lo/hi are block-uniform, so every thread runs the same iterations (the shuffles
  // below need all 32 lanes); keys at or past hi are masked (no load, score -inf).
  // Software pipelining without extra registers: the next step's K is loaded as soon as
  // this step's scores are computed, its V as soon as this step's V is accumulated.
  constexpr int STEP = NG * U;
  int4 kr[U][NV], vr[U][NV];
#define RKV_LOAD_ROWS(dst, rows, at)                                                   \
  _Pragma("unroll") for (int u = 0; u < U; ++u) {                                      \
    const int64_t key = (at) + u * NG + grp;                                           \
    _Pragma("unroll") for (int j = 0; j < NV; ++j) {                                   \
      dst[u][j] = key < hi ? __ldcs(rows + key * VPR + lane + j * TPK) : make_int4(0, 0, 0, 0); \
    }                                                                                  \
  }
  RKV_LOAD_ROWS(kr, kb, lo)
  RKV_LOAD_ROWS(vr, vb, lo)
  for (int64_t base = lo; base < hi; base += STEP) {
    float s[U][GMAX];  // scores (log2 domain), then probabilities
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const bool ok = base + u * NG + grp < hi;
      float kf[E];
#pragma unroll
      for (int j = 0; j < NV; ++j) Vec<T>::to_float(kr[u][j], &kf[j * N]);
#pragma unroll
      for (int g = 0; g < GMAX; ++g) {
        float dot = 0.f;
#pragma unroll
        for (int e = 0; e < E; ++e) dot = fmaf(qf[g][e], kf[e], dot);
#pragma unroll
        for (int off = TPK / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        s[u][g] = ok ? dot : -INFINITY;
      }
    }
    RKV_LOAD_ROWS(kr, kb, base + STEP)

#pragma unroll
    for (int g = 0; g < GMAX; ++g) {
      float mx = m[g];
#pragma unroll
      for (int u = 0; u < U; ++u) mx = fmaxf(mx, s[u][g]);
      if (mx == -INFINITY) {  // nothing seen yet and every key of this step masked
#pragma unroll
        for (int u = 0; u < U; ++u) s[u][g] = 0.f;
      } else {
        const float c = exp2f(m[g] - mx);  // 0 when m[g] = -inf
        lsum[g] *= c;
#pragma unroll
        for (int e = 0; e < E; ++e) acc[g][e] *= c;
        m[g] = mx;
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const float p = exp2f(s[u][g] - mx);  // 0 for masked keys
          lsum[g] += p;
          s[u][g] = p;
        }
      }
    }

#pragma unroll
    for (int u = 0; u < U; ++u) {
      float vf[E];
#pragma unroll
      for (int j = 0; j < NV; ++j) Vec<T>::to_float(vr[u][j], &vf[j * N]);
#pragma unroll
      for (int g = 0; g < GMAX; ++g) {
#pragma unroll
        for (int e = 0; e < E; ++e) acc[g][e] = fmaf(s[u][g], vf[e], acc[g][e]);
      }
    }
    RKV_LOAD_ROWS(vr, vb, base + STEP)
  }
#undef RKV_LOAD_ROWS

  // Merge the NG groups of the block.
  __shared__ float sm_m[NG][GMAX];
  __shared__ float sm_l[NG][GMAX];
  __shared__ float sm_acc[NG][GMAX][D];
#pragma unroll
  for (int g = 0; g < GMAX; ++g) {
    if (lane == 0) {
      sm_m[grp][g] = m[g];
      sm_l[grp][g] = lsum[g];
    }
#pragma unroll
    for (int j = 0; j < NV; ++j) {
#pragma unroll
      for (int i = 0; i < N; ++i) sm_acc[grp][g][(lane + j * TPK) * N + i] = acc[g][j * N + i];
    }
  }
  __syncthreads();

  for (int o = threadIdx.x; o < GMAX * D; o += kDecodeThreads) {
    const int g = o / D, d = o % D;
    if (g0 + g >= G) continue;
    float M = -INFINITY;
#pragma unroll
    for (int r = 0; r < NG; ++r) M = fmaxf(M, sm_m[r][g]);
    float lt = 0.f, a = 0.f;
    if (M != -INFINITY) {
#pragma unroll
      for (int r = 0; r < NG; ++r) {
        const float w = exp2f(sm_m[r][g] - M);  // 0 for an empty group
        lt = fmaf(sm_l[r][g], w, lt);
        a = fmaf(sm_acc[r][g][d], w, a);
      }
    }
    const int64_t row = (int64_t)b * Hq + hk * G + g0 + g;
    if (S == 1) {
      out[row * D + d] = Vec<T>::from_float(lt > 0.f ? a / lt : 0.f);
    } else {
      ws_acc[(row * S + split) * D + d] = a;
      if (d == 0) {
        ws_ml[(row * S + split) * 2] = M;
        ws_ml[(row * S + split) * 2 + 1] = lt;
      }
    }
  }
}

// One block per (sequence, query head): merge the S split partials.
template <typename T>
__global__ void combine_kernel(const float *__restrict__ ws_acc, const float *__restrict__ ws_ml,
                               T *__restrict__ out, int S, int D) {
  const int64_t row = blockIdx.x;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float M = -INFINITY;
    for (int s = 0; s < S; ++s) M = fmaxf(M, ws_ml[(row * S + s) * 2]);
    float lt = 0.f, a = 0.f;
    if (M != -INFINITY) {
      for (int s = 0; s < S; ++s) {
        const float w = exp2f(ws_ml[(row * S + s) * 2] - M);  // 0 for an empty split
        lt = fmaf(ws_ml[(row * S + s) * 2 + 1], w, lt);
        a = fmaf(ws_acc[(row * S + s) * D + d], w, a);
      }
    }
    out[row * D + d] = Vec<T>::from_float(lt > 0.f ? a / lt : 0.f);
  }
}

// ---------------------------------------------------------------------------
// Host side

int dtype_size(int dtype) {
  switch (dtype) {
    case RKVC_F32: return 4;
    case RKVC_F16: return 2;
    case RKVC_BF16: return 2;
    default: return 0;
  }
}

int gmax_for(int64_t G) { return G <= 1 ? 1 : G <= 2 ? 2 : G <= 4 ? 4 : 8; }

bool decode_dim_supported(int64_t D) { return D == 64 || D == 128 || D == 256; }

int check_seq_layer(const rkvc_cache *h, int64_t layer, int64_t seq) {
  if (layer < 0 || layer >= h->L) return RKVC_E_LAYER;
  if (seq < 0 || seq >= h->B) return RKVC_E_SEQ;
  return RKVC_OK;
}

// q_heads the decode kernel can launch for: a multiple of Hkv, a supported head dim, a grid y
// (KV head x head chunk) within 65535 and int32 row indices. One rule for decode and auto-splits.
int check_decode_heads(const rkvc_cache *h, int64_t q_heads) {
  if (q_heads < 1 || q_heads % h->H != 0 || !decode_dim_supported(h->D)) return RKVC_E_DIM;
  const int64_t G = q_heads / h->H;
  const int gmax = gmax_for(G);
  if (h->H * ((G + gmax - 1) / gmax) > 65535 || q_heads > INT32_MAX / 2) return RKVC_E_DIM;
  return RKVC_OK;
}

unsigned grid_for(int64_t total, int threads) {
  int64_t blocks = (total + threads - 1) / threads;
  if (blocks > (int64_t(1) << 20)) blocks = int64_t(1) << 20;  // grid-stride beyond
  return (unsigned)(blocks < 1 ? 1 : blocks);
}

template <typename T, int D, int GMAX>
void *decode_kernel_ptr() {
  return reinterpret_cast<void *>(&decode_kernel<T, D, GMAX>);
}

template <typename T, int D>
void *pick_gmax(int gmax) {
  switch (gmax) {
    case 1: return decode_kernel_ptr<T, D, 1>();
    case 2: return decode_kernel_ptr<T, D, 2>();
    case 4: return decode_kernel_ptr<T, D, 4>();
    default: return decode_kernel_ptr<T, D, 8>();
  }
}

template <typename T>
void *pick_dim(int64_t D, int gmax) {
  switch (D) {
    case 64: return pick_gmax<T, 64>(gmax);
    case 128: return pick_gmax<T, 128>(gmax);
    default: return pick_gmax<T, 256>(gmax);
  }
}

void *decode_kernel_for(int dtype, int64_t D, int gmax) {
  switch (dtype) {
    case RKVC_F32: return pick_dim<float>(D, gmax);
    case RKVC_F16: return pick_dim<__half>(D, gmax);
    default: return pick_dim<__nv_bfloat16>(D, gmax);
  }
}

void *combine_kernel_for(int dtype) {
  switch (dtype) {
    case RKVC_F32: return reinterpret_cast<void *>(&combine_kernel<float>);
    case RKVC_F16: return reinterpret_cast<void *>(&combine_kernel<__half>);
    default: return reinterpret_cast<void *>(&combine_kernel<__nv_bfloat16>);
  }
}

// Split-K choice: enough blocks to fill every SM at the kernel's occupancy, rounded so the
// last wave is at least 90% full, with at least 128 keys per split.
int auto_splits(const rkvc_cache *h, int64_t Hq) {
  const int64_t G = Hq / h->H;
  const int gmax = gmax_for(G);
  const int64_t base = h->B * h->H * ((G + gmax - 1) / gmax);
  int occ = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, decode_kernel_for(h->dtype, h->D, gmax),
                                                    kDecodeThreads, 0) != cudaSuccess ||
      occ < 1) {
    (void)cudaGetLastError();
    occ = 2;
  }
  const int64_t resident = (int64_t)occ * (h->sms > 0 ? h->sms : 1);
  int64_t smax = (h->W + 127) / 128;
  if (smax > 64) smax = 64;
  if (smax < 1) smax = 1;
  if (base >= resident) {  // already a wave or more: split only to even out the last wave
    for (int64_t s = 1; s <= smax && s <= 4; ++s) {
      const int64_t blocks = base * s, waves = (blocks + resident - 1) / resident;
      if (blocks * 10 >= waves * resident * 9) return (int)s;
    }
    return 1;
  }
  int64_t best = smax;
  for (int64_t s = (resident + base - 1) / base; s <= smax; ++s) {
    const int64_t blocks = base * s, waves = (blocks + resident - 1) / resident;
    if (blocks * 10 >= waves * resident * 9) { best = s; break; }
  }
  return (int)best;
}

int ensure_workspace(rkvc_cache *h, size_t bytes) {
  if (bytes <= h->ws_bytes) return RKVC_OK;
  if (h->ws) {
    cudaFree(h->ws);  // synchronizes: no kernel still uses the old workspace
    h->ws = nullptr;
    h->ws_bytes = 0;
  }
  void *p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(g_detail, sizeof g_detail, "cudaMalloc(%zu) for the split-K workspace: %s", bytes,
             cudaGetErrorString(e));
    return RKVC_E_NOMEM;
  }
  h->ws = static_cast<float *>(p);
  h->ws_bytes = bytes;
  return RKVC_OK;
}

}  // namespace

extern "C" {

const char *rkvc_strerror(int code) {
  switch (code) {
    case RKVC_OK: return "ok";
    case RKVC_E_NULL: return "null pointer";
    case RKVC_E_ALIGN: return "pointer not 16-byte aligned, or head_dim * element size not a multiple of 16";
    case RKVC_E_WINDOW: return "window must be >= 1 (and <= 2^30)";
    case RKVC_E_DTYPE: return "dtype not supported by this build (0 = fp32, 1 = fp16, 2 = bf16)";
    case RKVC_E_POSITION: return "positions out of order: a chunk must start at the stream's next position n";
    case RKVC_E_SEQ: return "sequence index out of range [0, batch)";
    case RKVC_E_LAYER: return "layer index out of range [0, layers)";
    case RKVC_E_DIM: return "bad dimension (batch, layers, kv_heads, head_dim >= 1; q_heads a multiple of kv_heads; decode head_dim 64, 128 or 256)";
    case RKVC_E_ARG: return "bad argument (negative chunk length, scale not finite and > 0, or num_splits outside 0..256)";
    case RKVC_E_CUDA: return "CUDA runtime error (see rkvc_cuda_detail)";
    case RKVC_E_NOMEM: return "out of memory";
    case RKVC_E_NOTDEVICE: return "cache pointer is not CUDA device memory";
    default: return "unknown ringkv_cuda status";
  }
}

const char *rkvc_cuda_detail(void) { return g_detail; }

int rkvc_dtype_supported(int dtype) { return dtype_size(dtype) != 0; }

int rkvc_dtype_size(int dtype) { return dtype_size(dtype); }

int rkvc_open(rkvc_cache **out, int64_t batch, int64_t layers, int64_t kv_heads, int64_t window,
              int64_t head_dim, int dtype, void *k_cache, void *v_cache) {
  if (!out) return RKVC_E_NULL;
  *out = nullptr;
  if (!k_cache || !v_cache) return RKVC_E_NULL;
  const int es = dtype_size(dtype);
  if (!es) return RKVC_E_DTYPE;
  if (window < 1 || window > kMaxWindow) return RKVC_E_WINDOW;
  if (batch < 1 || batch > 65535 || layers < 1 || layers > kMaxDim || kv_heads < 1 ||
      kv_heads > 65535 || head_dim < 1 || head_dim > kMaxDim)
    return RKVC_E_DIM;
  if ((head_dim * es) % 16 != 0 || !aligned16(k_cache) || !aligned16(v_cache)) return RKVC_E_ALIGN;
  // Element count B*L*H*W*D (and its byte count) must fit in int64.
  {
    int64_t total = batch, t = 0;
    const int64_t f[4] = {layers, kv_heads, window, head_dim};
    for (int i = 0; i < 4; ++i) {
      if (__builtin_mul_overflow(total, f[i], &t) || t > INT64_MAX / 16) return RKVC_E_DIM;
      total = t;
    }
  }
  void *const cache_ptrs[2] = {k_cache, v_cache};
  for (void *p : cache_ptrs) {
    cudaPointerAttributes attr;
    cudaError_t e = cudaPointerGetAttributes(&attr, p);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      cuda_fail(e, "cudaPointerGetAttributes");
      return e == cudaErrorInvalidValue ? RKVC_E_NOTDEVICE : RKVC_E_CUDA;
    }
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) return RKVC_E_NOTDEVICE;
  }
  int dev = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return cuda_fail(e, "cudaGetDevice/cudaDeviceGetAttribute");
  }

  rkvc_cache *h = static_cast<rkvc_cache *>(calloc(1, sizeof(rkvc_cache)));
  if (!h) return RKVC_E_NOMEM;
  h->B = batch;
  h->L = layers;
  h->H = kv_heads;
  h->W = window;
  h->D = head_dim;
  h->dtype = dtype;
  h->esize = es;
  h->k = static_cast<char *>(k_cache);
  h->v = static_cast<char *>(v_cache);
  h->sms = sms;
  h->n_host = static_cast<int64_t *>(calloc((size_t)(batch * layers), sizeof(int64_t)));
  if (!h->n_host) {
    free(h);
    return RKVC_E_NOMEM;
  }
  void *nd = nullptr;
  e = cudaMalloc(&nd, (size_t)(batch * layers) * sizeof(int64_t));
  if (e == cudaSuccess) e = cudaMemset(nd, 0, (size_t)(batch * layers) * sizeof(int64_t));
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (nd) cudaFree(nd);
    free(h->n_host);
    free(h);
    return e == cudaErrorMemoryAllocation ? RKVC_E_NOMEM : cuda_fail(e, "cudaMalloc/cudaMemset");
  }
  h->n_dev = static_cast<int64_t *>(nd);
  *out = h;
  return RKVC_OK;
}

void rkvc_close(rkvc_cache *h) {
  if (!h) return;
  cudaFree(h->n_dev);
  if (h->ws) cudaFree(h->ws);
  (void)cudaGetLastError();
  free(h->n_host);
  free(h);
}

int rkvc_reset(rkvc_cache *h, int64_t seq, void *stream) {
  if (!h) return RKVC_E_NULL;
  if (seq < 0 || seq >= h->B) return RKVC_E_SEQ;
  cudaError_t e = cudaMemsetAsync(h->n_dev + seq * h->L, 0, (size_t)h->L * sizeof(int64_t),
                                  static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return cuda_fail(e, "cudaMemsetAsync (reset)");
  }
  for (int64_t l = 0; l < h->L; ++l) h->n_host[seq * h->L + l] = 0;
  return RKVC_OK;
}

int rkvc_length(const rkvc_cache *h, int64_t layer, int64_t seq, int64_t *n_out) {
  if (!h || !n_out) return RKVC_E_NULL;
  const int rc = check_seq_layer(h, layer, seq);
  if (rc) return rc;
  *n_out = h->n_host[seq * h->L + layer];
  return RKVC_OK;
}

int rkvc_append(rkvc_cache *h, int64_t layer, int64_t seq, int64_t pos0, int64_t k,
                const void *k_new, const void *v_new, void *stream) {
  if (!h) return RKVC_E_NULL;
  int rc = check_seq_layer(h, layer, seq);
  if (rc) return rc;
  if (k < 0) return RKVC_E_ARG;
  int64_t *n = &h->n_host[seq * h->L + layer];
  if (pos0 != *n) return RKVC_E_POSITION;
  if (k == 0) return RKVC_OK;  // nothing to write; pointers may be NULL
  if (!k_new || !v_new) return RKVC_E_NULL;
  if (!aligned16(k_new) || !aligned16(v_new)) return RKVC_E_ALIGN;
  if (k > INT64_MAX / 2 - pos0) return RKVC_E_ARG;
  const int64_t vpr = h->D * h->esize / 16;
  const int64_t total = rkv_chunk_kept(k, h->W) * h->H * vpr;
  append_chunk_kernel<<<grid_for(total, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<int4 *>(h->k), reinterpret_cast<int4 *>(h->v),
      static_cast<const int4 *>(k_new), static_cast<const int4 *>(v_new), h->n_dev, seq, layer,
      h->L, h->H, h->W, vpr, pos0, k, total);
  rc = launch_status("append_chunk_kernel launch");
  if (rc) return rc;
  *n = pos0 + k;
  return RKVC_OK;
}

int rkvc_append_step(rkvc_cache *h, int64_t layer, const int64_t *positions, const void *k_new,
                     const void *v_new, void *stream) {
  if (!h || !positions) return RKVC_E_NULL;
  if (layer < 0 || layer >= h->L) return RKVC_E_LAYER;
  for (int64_t b = 0; b < h->B; ++b)
    if (positions[b] != h->n_host[b * h->L + layer]) return RKVC_E_POSITION;
  if (!k_new || !v_new) return RKVC_E_NULL;
  if (!aligned16(k_new) || !aligned16(v_new)) return RKVC_E_ALIGN;
  const int64_t vpr = h->D * h->esize / 16;
  append_step_kernel<<<(unsigned)h->B, 128, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<int4 *>(h->k), reinterpret_cast<int4 *>(h->v),
      static_cast<const int4 *>(k_new), static_cast<const int4 *>(v_new), h->n_dev, layer, h->L,
      h->H, h->W, vpr);
  const int rc = launch_status("append_step_kernel launch");
  if (rc) return rc;
  for (int64_t b = 0; b < h->B; ++b) h->n_host[b * h->L + layer] += 1;
  return RKVC_OK;
}

int rkvc_gather(rkvc_cache *h, int64_t layer, int64_t seq0, int64_t count, void *k_out,
                void *v_out, void *stream) {
  if (!h) return RKVC_E_NULL;
  if (layer < 0 || layer >= h->L) return RKVC_E_LAYER;
  if (count < 0) return RKVC_E_ARG;
  if (seq0 < 0 || seq0 > h->B || count > h->B - seq0) return RKVC_E_SEQ;
  if (count == 0) return RKVC_OK;
  if (!k_out || !v_out) return RKVC_E_NULL;
  if (!aligned16(k_out) || !aligned16(v_out)) return RKVC_E_ALIGN;
  const int64_t vpr = h->D * h->esize / 16;
  const int64_t total = count * h->H * h->W * vpr;
  gather_kernel<<<grid_for(total, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<const int4 *>(h->k), reinterpret_cast<const int4 *>(h->v),
      static_cast<int4 *>(k_out), static_cast<int4 *>(v_out), h->n_dev, seq0, layer, h->L, h->H,
      h->W, vpr, total);
  return launch_status("gather_kernel launch");
}

int rkvc_decode_auto_splits(const rkvc_cache *h, int64_t q_heads) {
  if (!h) return RKVC_E_NULL;
  const int rc = check_decode_heads(h, q_heads);
  return rc ? rc : auto_splits(h, q_heads);
}

int rkvc_decode_attention(rkvc_cache *h, int64_t layer, int64_t q_heads, const void *q, void *out,
                          float scale, int num_splits, void *stream) {
  if (!h) return RKVC_E_NULL;
  if (layer < 0 || layer >= h->L) return RKVC_E_LAYER;
  if (const int rc = check_decode_heads(h, q_heads)) return rc;
  const int64_t G = q_heads / h->H;
  const int gmax = gmax_for(G);
  const int64_t gchunks = (G + gmax - 1) / gmax;
  if (!q || !out) return RKVC_E_NULL;
  if (!aligned16(q) || !aligned16(out)) return RKVC_E_ALIGN;
  if (!(scale > 0.f) || !isfinite(scale)) return RKVC_E_ARG;
  if (num_splits < 0 || num_splits > kMaxSplits) return RKVC_E_ARG;
  const int S = num_splits ? num_splits : auto_splits(h, q_heads);
  float *ws_acc = nullptr, *ws_ml = nullptr;
  if (S > 1) {
    const size_t rows = (size_t)h->B * (size_t)q_heads * (size_t)S;
    const int rc = ensure_workspace(h, rows * (size_t)(h->D + 2) * sizeof(float));
    if (rc) return rc;
    ws_acc = h->ws;
    ws_ml = h->ws + rows * (size_t)h->D;
  }
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const void *kcache = h->k, *vcache = h->v;
  const int64_t *n_dev = h->n_dev;
  int64_t l = layer, L = h->L, H = h->H, W = h->W;
  int Hq = (int)q_heads, Gi = (int)G, gc = (int)gchunks, Si = S;
  float qscale = scale * kLog2e;
  void *args[] = {&kcache, &vcache, &n_dev, &q, &out, &ws_acc, &ws_ml, &l,  &L,
                  &H,      &W,      &Hq,    &Gi, &gc, &Si,     &qscale};
  const dim3 grid((unsigned)S, (unsigned)(h->H * gchunks), (unsigned)h->B);
  cudaError_t e = cudaLaunchKernel(decode_kernel_for(h->dtype, h->D, gmax), grid,
                                   dim3(kDecodeThreads), args, 0, st);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return cuda_fail(e, "decode_kernel launch");
  }
  if (S > 1) {
    int Di = (int)h->D;
    void *cargs[] = {&ws_acc, &ws_ml, &out, &Si, &Di};
    e = cudaLaunchKernel(combine_kernel_for(h->dtype), dim3((unsigned)(h->B * q_heads)),
                         dim3(Di < 256 ? Di : 256), cargs, 0, st);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return cuda_fail(e, "combine_kernel launch");
    }
  }
  return RKVC_OK;
}

int rkvc_device_memory_info(int device, int *mem_clock_khz, int *bus_width_bits) {
  if (!mem_clock_khz || !bus_width_bits) return RKVC_E_NULL;
  cudaError_t e = cudaDeviceGetAttribute(mem_clock_khz, cudaDevAttrMemoryClockRate, device);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(bus_width_bits, cudaDevAttrGlobalMemoryBusWidth, device);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return cuda_fail(e, "cudaDeviceGetAttribute (memory clock / bus width)");
  }
  return RKVC_OK;
}

}  // extern "C"
