/* ringkv.c — the ring buffer of ringkv.h, as an inference engine would write it.
 *
 * State is the window, the width, the slot arrays and n (tokens seen). Head
 * and fill are not stored: they are functions of n (ringkv_index.h), so there
 * is no second counter to get out of step — the class of bug where head and
 * tail are updated in the wrong order cannot arise here.
 *
 * Validation always comes before mutation, so an error leaves the ring as it was.
 */
#include "ringkv.h"
#include "ringkv_index.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RKV_K1 UINT64_C(0x9E3779B97F4A7C15)
#define RKV_K2 UINT64_C(0xC2B2AE3D27D4EB4F)

struct ringkv {
  int64_t w;      /* window = number of slots */
  int64_t width;  /* floats per key and per value */
  int64_t n;      /* tokens seen since reset = next position */
  int64_t *pos;   /* [w] position held by each slot */
  float *keys;    /* [w * width] */
  float *values;  /* [w * width] */
};

const char *ringkv_strerror(int code) {
  switch (code) {
    case RINGKV_OK: return "ok";
    case RINGKV_E_NULL: return "null handle or null pointer argument";
    case RINGKV_E_WINDOW: return "window must be >= 1";
    case RINGKV_E_WIDTH: return "width must be >= 1";
    case RINGKV_E_NOMEM: return "allocation failed (or an array would exceed PTRDIFF_MAX bytes)";
    case RINGKV_E_POSITION: return "position is not the next expected position (gap or duplicate)";
    case RINGKV_E_CAPACITY: return "output buffer is smaller than the cache length";
    case RINGKV_E_RANGE: return "count is negative or positions would overflow int64";
    default: return "unknown ringkv status code";
  }
}

/* Slot arrays for (w, width), allocated all-or-nothing. Sizes are checked
 * before multiplying, so a huge w fails instead of wrapping; no array may
 * exceed PTRDIFF_MAX bytes (malloc cannot provide that anyway). */
static int alloc_slots(int64_t w, int64_t width, int64_t **pos, float **keys, float **values) {
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

int ringkv_create(int64_t window, int64_t width, ringkv_t **out) {
  if (!out) return RINGKV_E_NULL;
  if (window < 1) return RINGKV_E_WINDOW;
  if (width < 1) return RINGKV_E_WIDTH;
  ringkv_t *r = malloc(sizeof *r);
  if (!r) return RINGKV_E_NOMEM;
  int rc = alloc_slots(window, width, &r->pos, &r->keys, &r->values);
  if (rc != RINGKV_OK) {
    free(r);
    return rc;
  }
  r->w = window;
  r->width = width;
  r->n = 0;
  *out = r;
  return RINGKV_OK;
}

int ringkv_destroy(ringkv_t *r) {
  if (!r) return RINGKV_E_NULL;
  free(r->pos);
  free(r->keys);
  free(r->values);
  free(r);
  return RINGKV_OK;
}

int ringkv_reset(ringkv_t *r, int64_t window) {
  if (!r) return RINGKV_E_NULL;
  if (window < 1) return RINGKV_E_WINDOW;
  if (window != r->w) {
    int64_t *p;
    float *k, *v;
    int rc = alloc_slots(window, r->width, &p, &k, &v);
    if (rc != RINGKV_OK) return rc; /* old stream intact */
    free(r->pos);
    free(r->keys);
    free(r->values);
    r->pos = p;
    r->keys = k;
    r->values = v;
    r->w = window;
  }
  /* Slots are not cleared: reads never go past the fill, which is 0 now. */
  r->n = 0;
  return RINGKV_OK;
}

static void write_slot(ringkv_t *r, int64_t pos, const float *key, const float *value) {
  size_t s = (size_t)rkv_slot(pos, r->w), wd = (size_t)r->width;
  r->pos[s] = pos;
  memcpy(r->keys + s * wd, key, wd * sizeof(float));
  memcpy(r->values + s * wd, value, wd * sizeof(float));
}

int ringkv_push(ringkv_t *r, int64_t pos, const float *key, const float *value) {
  if (!r || !key || !value) return RINGKV_E_NULL;
  if (pos != r->n) return RINGKV_E_POSITION;
  if (r->n == INT64_MAX) return RINGKV_E_RANGE;
  write_slot(r, pos, key, value);
  r->n = pos + 1;
  return RINGKV_OK;
}

int ringkv_push_chunk(ringkv_t *r, int64_t first_pos, int64_t n,
                      const float *keys, const float *values) {
  if (!r) return RINGKV_E_NULL;
  if (n < 0) return RINGKV_E_RANGE;
  if (n == 0) return RINGKV_OK;
  if (!keys || !values) return RINGKV_E_NULL;
  if (first_pos != r->n) return RINGKV_E_POSITION;
  if (n > INT64_MAX - r->n) return RINGKV_E_RANGE;
  /* Only the last min(n, W) entries survive; writing just those keeps each slot written once. */
  size_t wd = (size_t)r->width;
  for (int64_t k = rkv_chunk_first_kept(n, r->w); k < n; k++)
    write_slot(r, first_pos + k, keys + (size_t)k * wd, values + (size_t)k * wd);
  r->n = first_pos + n;
  return RINGKV_OK;
}

int ringkv_length(const ringkv_t *r, int64_t *out) {
  if (!r || !out) return RINGKV_E_NULL;
  *out = rkv_len(r->n, r->w);
  return RINGKV_OK;
}

int ringkv_next_pos(const ringkv_t *r, int64_t *out) {
  if (!r || !out) return RINGKV_E_NULL;
  *out = r->n;
  return RINGKV_OK;
}

int ringkv_window(const ringkv_t *r, int64_t *out) {
  if (!r || !out) return RINGKV_E_NULL;
  *out = r->w;
  return RINGKV_OK;
}

int ringkv_width(const ringkv_t *r, int64_t *out) {
  if (!r || !out) return RINGKV_E_NULL;
  *out = r->width;
  return RINGKV_OK;
}

/* Logical order is the slots from the oldest, wrapping once: at most two runs. */
static void read_positions(const ringkv_t *r, int64_t *dst, int64_t len) {
  if (len == 0) return;
  int64_t first = rkv_logical_slot(r->n, r->w, 0);
  int64_t run1 = r->w - first < len ? r->w - first : len;
  memcpy(dst, r->pos + first, (size_t)run1 * sizeof(int64_t));
  memcpy(dst + run1, r->pos, (size_t)(len - run1) * sizeof(int64_t));
}

static void read_payload(const ringkv_t *r, const float *src, float *dst, int64_t len) {
  if (len == 0) return;
  size_t wd = (size_t)r->width;
  int64_t first = rkv_logical_slot(r->n, r->w, 0);
  int64_t run1 = r->w - first < len ? r->w - first : len;
  memcpy(dst, src + (size_t)first * wd, (size_t)run1 * wd * sizeof(float));
  memcpy(dst + (size_t)run1 * wd, src, (size_t)(len - run1) * wd * sizeof(float));
}

int ringkv_read(const ringkv_t *r, int64_t capacity, int64_t *positions,
                float *keys, float *values, int64_t *out_len) {
  if (!r || !out_len) return RINGKV_E_NULL;
  if (capacity < 0) return RINGKV_E_RANGE;
  int64_t len = rkv_len(r->n, r->w);
  if (capacity < len) {
    *out_len = len;
    return RINGKV_E_CAPACITY;
  }
  if (positions) read_positions(r, positions, len);
  if (keys) read_payload(r, r->keys, keys, len);
  if (values) read_payload(r, r->values, values, len);
  *out_len = len;
  return RINGKV_OK;
}

/* h(e) of ringkv.h, over the bytes stored in slot s. */
static uint64_t slot_hash(const ringkv_t *r, int64_t s) {
  size_t wd = (size_t)r->width;
  const float *k = r->keys + (size_t)s * wd, *v = r->values + (size_t)s * wd;
  uint64_t h = 0;
  for (size_t j = 0; j < wd; j++) {
    uint32_t kb, vb;
    memcpy(&kb, k + j, sizeof kb);
    memcpy(&vb, v + j, sizeof vb);
    h += (uint64_t)(2 * j + 1) * (RKV_K1 * kb + RKV_K2 * vb);
  }
  return h;
}

/* A = sum of h over the cache, B = the checksum (weights i + 1). */
static void sums(const ringkv_t *r, uint64_t *a, uint64_t *b) {
  int64_t len = rkv_len(r->n, r->w);
  uint64_t sa = 0, sb = 0;
  for (int64_t i = 0; i < len; i++) {
    uint64_t h = slot_hash(r, rkv_logical_slot(r->n, r->w, i));
    sa += h;
    sb += (uint64_t)(i + 1) * h;
  }
  *a = sa;
  *b = sb;
}

int ringkv_checksum(const ringkv_t *r, uint64_t *out) {
  if (!r || !out) return RINGKV_E_NULL;
  uint64_t a;
  sums(r, &a, out);
  return RINGKV_OK;
}

int ringkv_trace(ringkv_t *r, int64_t n, const float *keys, const float *values,
                 int64_t *positions_out, uint64_t *checksums_out) {
  if (!r) return RINGKV_E_NULL;
  if (n < 0) return RINGKV_E_RANGE;
  if (n == 0) return RINGKV_OK;
  if (!keys || !values || !positions_out || !checksums_out) return RINGKV_E_NULL;
  if (n > INT64_MAX - r->n) return RINGKV_E_RANGE;
  const int64_t w = r->w;
  const size_t wd = (size_t)r->width;
  uint64_t a, b;
  sums(r, &a, &b);
  for (int64_t t = 0; t < n; t++) {
    const int64_t p = r->n;
    const int64_t s = rkv_slot(p, w);
    if (rkv_len(p, w) == w) {
      /* Full: the oldest entry is in the slot about to be overwritten. Dropping it
       * lowers every remaining weight by one: B -= A, then A loses its hash. */
      uint64_t h_old = slot_hash(r, s);
      b -= a;
      a -= h_old;
    }
    write_slot(r, p, keys + (size_t)t * wd, values + (size_t)t * wd);
    r->n = p + 1;
    const int64_t len = rkv_len(r->n, w);
    uint64_t h_new = slot_hash(r, s); /* read back what was stored */
    a += h_new;
    b += (uint64_t)len * h_new;
    int64_t *row = positions_out + (size_t)t * (size_t)w;
    read_positions(r, row, len);
    for (int64_t j = len; j < w; j++) row[j] = -1;
    checksums_out[t] = b;
  }
  return RINGKV_OK;
}
