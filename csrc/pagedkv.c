/* pagedkv.c — the reference paged pool of pagedkv.h.
 *
 * State: the slot arrays of the N blocks, a reference count per block, the free list (doubly
 * linked, least-recently-freed at the head), the prefix cache (per block: whether it holds a
 * content identity, its identity tag and 128-bit chained hash, in hash buckets), and the
 * sequences (records in a dense array, found through an open-addressing map from id).
 *
 * A sequence does not store its whole table: entries below pkv_first_kept_block are none by the
 * freeing rule, so only the live entries [first kept, table len) are kept, in a ring of
 * pkv_table_cap entries (pagedkv_index.h) — a long stream costs no memory beyond the window.
 *
 * Every op validates and reserves everything it may need (sequence slots, scratch, the free
 * blocks a chunk will take) before its first mutation, so an error leaves the pool as it was.
 */
#include "pagedkv.h"
#include "pagedkv_index.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint64_t a, b;
} h128_t;

typedef struct {
  int64_t id, n, identity;
  h128_t chain; /* identity tag and every full block 0 .. n/B-1: the prefix's content identity */
} seq_t;

struct pagedkv {
  int64_t w, b, nb, d, tcap;
  int64_t *pos;           /* [nb*b] position held by each slot */
  float *keys, *values;   /* [nb*b*d] */
  int64_t *ref;           /* [nb] tables referencing the block */
  int64_t *fprev, *fnext; /* [nb] free list links (-1 ends) */
  int64_t fhead, ftail, nfree;
  unsigned char *cached;  /* [nb] 1 iff the block holds a content identity */
  int64_t *ctag;          /* [nb] its identity tag */
  h128_t *chash;          /* [nb] its chained hash */
  int64_t *hprev, *hnext; /* [nb] bucket chain links */
  int64_t *bucket;        /* [bmask+1] first block of each bucket, -1 if none */
  uint64_t bmask;
  seq_t *seqs;            /* [seq_cap] live sequences, dense */
  int64_t *tab;           /* [seq_cap * tcap] live-table ring of each sequence */
  int64_t nseq, seq_cap;
  int64_t *map;           /* [map_mask+1] sequence index + 1, 0 = empty (linear probing) */
  uint64_t map_mask;
};

const char *pagedkv_strerror(int code) {
  switch (code) {
    case PAGEDKV_OK: return "ok";
    case PAGEDKV_E_NULL: return "null handle or null pointer argument";
    case PAGEDKV_E_CONFIG: return "window, block_size, num_blocks and width must be >= 1";
    case PAGEDKV_E_NOMEM: return "allocation failed (or an array would exceed PTRDIFF_MAX bytes)";
    case PAGEDKV_E_UNKNOWN_SEQ: return "no sequence with this id";
    case PAGEDKV_E_DUPLICATE_SEQ: return "a sequence with this id already exists";
    case PAGEDKV_E_POSITION: return "position is not the sequence's next position (gap or duplicate)";
    case PAGEDKV_E_EXHAUSTED: return "pool exhausted: the op needs a free block and none is free";
    case PAGEDKV_E_CAPACITY: return "output buffer is smaller than the result";
    case PAGEDKV_E_RANGE:
      return "negative id or count, block id out of range, empty prompt, or positions would overflow int64";
    default: return "unknown pagedkv status code";
  }
}

/* ---- sizes and allocation ------------------------------------------------------------ */

/* count * size bytes, or 0 when that would exceed PTRDIFF_MAX (callers never ask for 0 bytes). */
static size_t bytes(uint64_t count, size_t size) {
  if (count == 0 || count > (uint64_t)PTRDIFF_MAX / size) return 0;
  return (size_t)count * size;
}

static void *alloc(uint64_t count, size_t size) {
  size_t n = bytes(count, size);
  return n ? malloc(n) : NULL;
}

static uint64_t pow2_at_least(uint64_t x) {
  uint64_t p = 1;
  while (p < x && p <= UINT64_MAX / 2) p <<= 1;
  return p;
}

/* ---- hashing ------------------------------------------------------------------------- */

static uint64_t mix64(uint64_t x) { /* splitmix64's finalizer: a bijection */
  x ^= x >> 30;
  x *= UINT64_C(0xbf58476d1ce4e5b9);
  x ^= x >> 27;
  x *= UINT64_C(0x94d049bb133111eb);
  return x ^ (x >> 31);
}

static void h_word(h128_t *h, uint64_t w) { /* two differently keyed lanes */
  h->a = mix64(h->a ^ w);
  h->b = mix64(((h->b << 23) | (h->b >> 41)) + w * UINT64_C(0x9E3779B97F4A7C15) + UINT64_C(0x632BE59BD9B4E019));
}

static h128_t chain_root(int64_t identity) {
  h128_t h = {UINT64_C(0x243F6A8885A308D3), UINT64_C(0x13198A2E03707344)};
  h_word(&h, (uint64_t)identity);
  return h;
}

/* The chain through one full block, of positions first .. first+b-1: the positions and the bits
 * of its keys and values. */
static void chain_block(h128_t *h, int64_t b, int64_t d, int64_t first, const float *k, const float *v) {
  for (int64_t s = 0; s < b; s++) {
    h_word(h, (uint64_t)(first + s));
    for (int64_t j = 0; j < d; j++) {
      uint32_t kb, vb;
      memcpy(&kb, k + s * d + j, sizeof kb);
      memcpy(&vb, v + s * d + j, sizeof vb);
      h_word(h, ((uint64_t)kb << 32) | vb);
    }
  }
}

/* ---- blocks: free list and prefix cache --------------------------------------------- */

static void free_push_tail(pagedkv_t *p, int64_t x) {
  p->fnext[x] = -1;
  p->fprev[x] = p->ftail;
  if (p->ftail >= 0) p->fnext[p->ftail] = x;
  else p->fhead = x;
  p->ftail = x;
  p->nfree++;
}

static void free_unlink(pagedkv_t *p, int64_t x) {
  if (p->fprev[x] >= 0) p->fnext[p->fprev[x]] = p->fnext[x];
  else p->fhead = p->fnext[x];
  if (p->fnext[x] >= 0) p->fprev[p->fnext[x]] = p->fprev[x];
  else p->ftail = p->fprev[x];
  p->nfree--;
}

static void cache_insert(pagedkv_t *p, int64_t x, int64_t tag, h128_t h) {
  uint64_t bk = h.a & p->bmask;
  p->cached[x] = 1;
  p->ctag[x] = tag;
  p->chash[x] = h;
  p->hprev[x] = -1;
  p->hnext[x] = p->bucket[bk];
  if (p->bucket[bk] >= 0) p->hprev[p->bucket[bk]] = x;
  p->bucket[bk] = x;
}

static void cache_evict(pagedkv_t *p, int64_t x) {
  if (!p->cached[x]) return;
  if (p->hprev[x] >= 0) p->hnext[p->hprev[x]] = p->hnext[x];
  else p->bucket[p->chash[x].a & p->bmask] = p->hnext[x];
  if (p->hnext[x] >= 0) p->hprev[p->hnext[x]] = p->hprev[x];
  p->cached[x] = 0;
}

/* Take the least-recently-freed block for a new use (evicting its content identity). The
 * caller has checked nfree > 0. */
static int64_t take_free(pagedkv_t *p) {
  int64_t x = p->fhead;
  free_unlink(p, x);
  cache_evict(p, x);
  p->ref[x] = 1;
  return x;
}

static void release(pagedkv_t *p, int64_t x) {
  if (--p->ref[x] == 0) free_push_tail(p, x);
}

/* ---- sequences ----------------------------------------------------------------------- */

static uint64_t map_home(const pagedkv_t *p, int64_t id) { return mix64((uint64_t)id) & p->map_mask; }

/* Index of sequence id, or -1. */
static int64_t seq_find(const pagedkv_t *p, int64_t id) {
  for (uint64_t i = map_home(p, id);; i = (i + 1) & p->map_mask) {
    int64_t e = p->map[i];
    if (e == 0) return -1;
    if (p->seqs[e - 1].id == id) return e - 1;
  }
}

static void map_put(pagedkv_t *p, int64_t id, int64_t index) {
  uint64_t i = map_home(p, id);
  while (p->map[i] != 0 && p->seqs[p->map[i] - 1].id != id) i = (i + 1) & p->map_mask;
  p->map[i] = index + 1;
}

static void map_delete(pagedkv_t *p, int64_t id) { /* backward-shift deletion */
  uint64_t i = map_home(p, id);
  while (p->seqs[p->map[i] - 1].id != id) i = (i + 1) & p->map_mask;
  for (uint64_t j = (i + 1) & p->map_mask; p->map[j] != 0; j = (j + 1) & p->map_mask) {
    uint64_t h = map_home(p, p->seqs[p->map[j] - 1].id);
    /* j's entry may move to the hole i iff its home is not cyclically in (i, j]. */
    if (((j - h) & p->map_mask) >= ((j - i) & p->map_mask)) {
      p->map[i] = p->map[j];
      i = j;
    }
  }
  p->map[i] = 0;
}

static int64_t *tab_of(const pagedkv_t *p, int64_t si) { return p->tab + si * p->tcap; }

/* Room for one more sequence, allocated all-or-nothing; changes nothing observable. */
static int reserve_seq(pagedkv_t *p) {
  if (p->nseq < p->seq_cap && (uint64_t)(p->nseq + 1) * 2 <= p->map_mask + 1) return PAGEDKV_OK;
  uint64_t cap = (uint64_t)p->seq_cap, need = (uint64_t)p->nseq + 1;
  if (need > cap) cap = cap < 4 ? 4 : cap * 2;
  uint64_t msize = pow2_at_least(2 * cap);
  if (cap > (uint64_t)INT64_MAX / (uint64_t)p->tcap || !bytes(cap * (uint64_t)p->tcap, sizeof(int64_t)) ||
      !bytes(msize, sizeof(int64_t)))
    return PAGEDKV_E_NOMEM;
  seq_t *seqs = alloc(cap, sizeof(seq_t));
  int64_t *tab = alloc(cap * (uint64_t)p->tcap, sizeof(int64_t));
  int64_t *map = alloc(msize, sizeof(int64_t));
  if (!seqs || !tab || !map) {
    free(seqs);
    free(tab);
    free(map);
    return PAGEDKV_E_NOMEM;
  }
  if (p->nseq) {
    memcpy(seqs, p->seqs, (size_t)p->nseq * sizeof(seq_t));
    memcpy(tab, p->tab, (size_t)(p->nseq * p->tcap) * sizeof(int64_t));
  }
  memset(map, 0, (size_t)msize * sizeof(int64_t));
  free(p->seqs);
  free(p->tab);
  free(p->map);
  p->seqs = seqs;
  p->tab = tab;
  p->map = map;
  p->seq_cap = (int64_t)cap;
  p->map_mask = msize - 1;
  for (int64_t i = 0; i < p->nseq; i++) map_put(p, p->seqs[i].id, i);
  return PAGEDKV_OK;
}

/* Insert a record (room reserved); returns its index. */
static int64_t seq_insert(pagedkv_t *p, int64_t id, int64_t n, int64_t identity, h128_t chain) {
  int64_t si = p->nseq++;
  seq_t *s = &p->seqs[si];
  s->id = id;
  s->n = n;
  s->identity = identity;
  s->chain = chain;
  map_put(p, id, si);
  return si;
}

static void seq_remove(pagedkv_t *p, int64_t si) {
  map_delete(p, p->seqs[si].id);
  int64_t last = --p->nseq;
  if (si != last) {
    p->seqs[si] = p->seqs[last];
    memcpy(tab_of(p, si), tab_of(p, last), (size_t)p->tcap * sizeof(int64_t));
    map_put(p, p->seqs[si].id, si);
  }
}

/* ---- create / destroy / getters ----------------------------------------------------- */

int pagedkv_create(int64_t window, int64_t block_size, int64_t num_blocks, int64_t width,
                   pagedkv_t **out) {
  if (!out) return PAGEDKV_E_NULL;
  if (window < 1 || block_size < 1 || num_blocks < 1 || width < 1) return PAGEDKV_E_CONFIG;
  uint64_t nb = (uint64_t)num_blocks, slots = 0, floats = 0;
  if ((uint64_t)block_size <= (uint64_t)PTRDIFF_MAX / nb) slots = nb * (uint64_t)block_size;
  if (slots && (uint64_t)width <= (uint64_t)PTRDIFF_MAX / slots) floats = slots * (uint64_t)width;
  uint64_t nbucket = pow2_at_least(nb);
  if (!slots || !floats || !bytes(slots, sizeof(int64_t)) || !bytes(floats, sizeof(float)) ||
      !bytes(nb, sizeof(h128_t)) || !bytes(nbucket, sizeof(int64_t)))
    return PAGEDKV_E_NOMEM;
  pagedkv_t *p = calloc(1, sizeof *p);
  if (!p) return PAGEDKV_E_NOMEM;
  p->w = window;
  p->b = block_size;
  p->nb = num_blocks;
  p->d = width;
  p->tcap = pkv_table_cap(window, block_size, num_blocks);
  p->pos = alloc(slots, sizeof(int64_t));
  p->keys = alloc(floats, sizeof(float));
  p->values = alloc(floats, sizeof(float));
  p->ref = calloc((size_t)nb, sizeof(int64_t));
  p->fprev = alloc(nb, sizeof(int64_t));
  p->fnext = alloc(nb, sizeof(int64_t));
  p->cached = calloc((size_t)nb, 1);
  p->ctag = alloc(nb, sizeof(int64_t));
  p->chash = alloc(nb, sizeof(h128_t));
  p->hprev = alloc(nb, sizeof(int64_t));
  p->hnext = alloc(nb, sizeof(int64_t));
  p->bucket = alloc(nbucket, sizeof(int64_t));
  if (!p->pos || !p->keys || !p->values || !p->ref || !p->fprev || !p->fnext || !p->cached || !p->ctag ||
      !p->chash || !p->hprev || !p->hnext || !p->bucket) {
    pagedkv_destroy(p);
    return PAGEDKV_E_NOMEM;
  }
  p->bmask = nbucket - 1;
  for (uint64_t i = 0; i < nbucket; i++) p->bucket[i] = -1;
  p->fhead = p->ftail = -1;
  for (int64_t x = 0; x < num_blocks; x++) free_push_tail(p, x);
  *out = p;
  return PAGEDKV_OK;
}

int pagedkv_destroy(pagedkv_t *p) {
  if (!p) return PAGEDKV_E_NULL;
  void *arrays[] = {p->pos,  p->keys,  p->values, p->ref,    p->fprev, p->fnext, p->cached, p->ctag,
                    p->chash, p->hprev, p->hnext, p->bucket, p->seqs, p->tab,   p->map};
  for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) free(arrays[i]);
  free(p);
  return PAGEDKV_OK;
}

int pagedkv_config(const pagedkv_t *p, int64_t *window, int64_t *block_size, int64_t *num_blocks,
                   int64_t *width) {
  if (!p) return PAGEDKV_E_NULL;
  if (window) *window = p->w;
  if (block_size) *block_size = p->b;
  if (num_blocks) *num_blocks = p->nb;
  if (width) *width = p->d;
  return PAGEDKV_OK;
}

/* Validation shared by the ops on an existing sequence: its index in *si. */
static int lookup(const pagedkv_t *p, int64_t seq, int64_t *si) {
  if (seq < 0) return PAGEDKV_E_RANGE;
  *si = p->seq_cap ? seq_find(p, seq) : -1;
  return *si < 0 ? PAGEDKV_E_UNKNOWN_SEQ : PAGEDKV_OK;
}

static int absent(const pagedkv_t *p, int64_t seq) {
  if (seq < 0) return PAGEDKV_E_RANGE;
  return p->seq_cap && seq_find(p, seq) >= 0 ? PAGEDKV_E_DUPLICATE_SEQ : PAGEDKV_OK;
}

int pagedkv_free_blocks(const pagedkv_t *p, int64_t *out) {
  if (!p || !out) return PAGEDKV_E_NULL;
  *out = p->nfree;
  return PAGEDKV_OK;
}

int pagedkv_length(const pagedkv_t *p, int64_t seq, int64_t *out) {
  if (!p || !out) return PAGEDKV_E_NULL;
  int64_t si;
  int rc = lookup(p, seq, &si);
  if (rc == PAGEDKV_OK) *out = p->seqs[si].n;
  return rc;
}

int pagedkv_identity(const pagedkv_t *p, int64_t seq, int64_t *out) {
  if (!p || !out) return PAGEDKV_E_NULL;
  int64_t si;
  int rc = lookup(p, seq, &si);
  if (rc == PAGEDKV_OK) *out = p->seqs[si].identity;
  return rc;
}

int pagedkv_refcount(const pagedkv_t *p, int64_t block, int64_t *out) {
  if (!p || !out) return PAGEDKV_E_NULL;
  if (block < 0 || block >= p->nb) return PAGEDKV_E_RANGE;
  *out = p->ref[block];
  return PAGEDKV_OK;
}

/* ---- sequence ops -------------------------------------------------------------------- */

int pagedkv_add(pagedkv_t *p, int64_t seq) {
  if (!p) return PAGEDKV_E_NULL;
  int rc = absent(p, seq);
  if (rc == PAGEDKV_OK) rc = reserve_seq(p);
  if (rc == PAGEDKV_OK) seq_insert(p, seq, 0, 0, chain_root(0));
  return rc;
}

int pagedkv_fork(pagedkv_t *p, int64_t src, int64_t dst) {
  if (!p) return PAGEDKV_E_NULL;
  if (src < 0 || dst < 0) return PAGEDKV_E_RANGE;
  int64_t si;
  int rc = lookup(p, src, &si);
  if (rc == PAGEDKV_OK) rc = absent(p, dst);
  if (rc == PAGEDKV_OK) rc = reserve_seq(p);
  if (rc != PAGEDKV_OK) return rc;
  si = seq_find(p, src); /* the records may have moved */
  seq_t s = p->seqs[si];
  int64_t di = seq_insert(p, dst, s.n, s.identity, s.chain);
  memcpy(tab_of(p, di), tab_of(p, si), (size_t)p->tcap * sizeof(int64_t));
  for (int64_t j = pkv_first_kept_block(s.n, p->w, p->b); j < pkv_table_len(s.n, p->b); j++)
    p->ref[tab_of(p, di)[pkv_ring_index(j, p->tcap)]]++;
  return PAGEDKV_OK;
}

int pagedkv_free(pagedkv_t *p, int64_t seq) {
  if (!p) return PAGEDKV_E_NULL;
  int64_t si;
  int rc = lookup(p, seq, &si);
  if (rc != PAGEDKV_OK) return rc;
  int64_t n = p->seqs[si].n, *t = tab_of(p, si);
  for (int64_t j = pkv_first_kept_block(n, p->w, p->b); j < pkv_table_len(n, p->b); j++)
    release(p, t[pkv_ring_index(j, p->tcap)]);
  seq_remove(p, si);
  return PAGEDKV_OK;
}

/* One append at position n of sequence si (validated; the free block it may need is there). */
static void append_one(pagedkv_t *p, int64_t si, const float *key, const float *value) {
  seq_t *s = &p->seqs[si];
  int64_t *t = tab_of(p, si);
  const int64_t b = p->b, d = p->d, n = s->n, j = pkv_logical_block(n, b), slot = pkv_block_slot(n, b);
  int64_t *e = &t[pkv_ring_index(j, p->tcap)];
  if (pkv_starts_block(n, b)) {
    *e = take_free(p);
  } else if (p->ref[*e] > 1) { /* copy on write: a shared block is never written */
    int64_t copy = take_free(p);
    memcpy(p->pos + copy * b, p->pos + *e * b, (size_t)slot * sizeof(int64_t));
    memcpy(p->keys + copy * b * d, p->keys + *e * b * d, (size_t)(slot * d) * sizeof(float));
    memcpy(p->values + copy * b * d, p->values + *e * b * d, (size_t)(slot * d) * sizeof(float));
    p->ref[*e]--;
    *e = copy;
  }
  const int64_t row = pkv_pool_row(*e, slot, b);
  p->pos[row] = n;
  memcpy(p->keys + row * d, key, (size_t)d * sizeof(float));
  memcpy(p->values + row * d, value, (size_t)d * sizeof(float));
  s->n = n + 1;
  if (slot == b - 1) { /* the block is full: it gets the content identity of the prefix */
    const int64_t r0 = pkv_pool_row(*e, 0, b);
    chain_block(&s->chain, b, d, n - slot, p->keys + r0 * d, p->values + r0 * d);
    cache_evict(p, *e); /* (a block being filled holds no identity yet: defensive) */
    cache_insert(p, *e, s->identity, s->chain);
  }
  for (int64_t jj = pkv_first_kept_block(n, p->w, b); jj < pkv_first_kept_block(n + 1, p->w, b); jj++) {
    int64_t *f = &t[pkv_ring_index(jj, p->tcap)];
    release(p, *f);
    *f = -1;
  }
}

/* Whether count appends from the sequence's state find a free block every time they need one,
 * simulating the free count only: blocks taken in the chunk (and a copy made on its first append)
 * are owned, blocks of the table before it are freed by the rule iff their refcount is 1. */
static int chunk_fits(const pagedkv_t *p, int64_t si, int64_t count) {
  const int64_t b = p->b, w = p->w, n0 = p->seqs[si].n, len0 = pkv_table_len(n0, b);
  const int64_t *t = tab_of(p, si);
  int64_t f = p->nfree, copied = -1;
  for (int64_t k = 0; k < count; k++) {
    const int64_t n = n0 + k;
    if (pkv_starts_block(n, b)) {
      f--;
    } else if (k == 0 && p->ref[t[pkv_ring_index(pkv_logical_block(n, b), p->tcap)]] > 1) {
      f--;
      copied = pkv_logical_block(n, b);
    }
    if (f < 0) return 0;
    for (int64_t jj = pkv_first_kept_block(n, w, b); jj < pkv_first_kept_block(n + 1, w, b); jj++)
      if (jj >= len0 || jj == copied || p->ref[t[pkv_ring_index(jj, p->tcap)]] == 1) f++;
  }
  return 1;
}

int pagedkv_append(pagedkv_t *p, int64_t seq, int64_t pos, const float *key, const float *value) {
  if (!p) return PAGEDKV_E_NULL;
  int64_t si;
  int rc = lookup(p, seq, &si);
  if (rc != PAGEDKV_OK) return rc;
  if (!key || !value) return PAGEDKV_E_NULL;
  if (pos != p->seqs[si].n) return PAGEDKV_E_POSITION;
  if (pos == INT64_MAX) return PAGEDKV_E_RANGE;
  if (!chunk_fits(p, si, 1)) return PAGEDKV_E_EXHAUSTED;
  append_one(p, si, key, value);
  return PAGEDKV_OK;
}

int pagedkv_append_chunk(pagedkv_t *p, int64_t seq, int64_t first_pos, int64_t n,
                         const float *keys, const float *values) {
  if (!p) return PAGEDKV_E_NULL;
  if (n < 0) return PAGEDKV_E_RANGE;
  int64_t si;
  int rc = lookup(p, seq, &si);
  if (rc != PAGEDKV_OK || n == 0) return rc;
  if (!keys || !values) return PAGEDKV_E_NULL;
  if (first_pos != p->seqs[si].n) return PAGEDKV_E_POSITION;
  if (n > INT64_MAX - first_pos) return PAGEDKV_E_RANGE;
  if (!chunk_fits(p, si, n)) return PAGEDKV_E_EXHAUSTED;
  for (int64_t k = 0; k < n; k++) append_one(p, si, keys + k * p->d, values + k * p->d);
  return PAGEDKV_OK;
}

/* ---- reads --------------------------------------------------------------------------- */

int pagedkv_read(const pagedkv_t *p, int64_t seq, int64_t capacity, int64_t *positions,
                 float *keys, float *values, int64_t *out_len) {
  if (!p || !out_len) return PAGEDKV_E_NULL;
  if (capacity < 0) return PAGEDKV_E_RANGE;
  int64_t si;
  int rc = lookup(p, seq, &si);
  if (rc != PAGEDKV_OK) return rc;
  const int64_t n = p->seqs[si].n, b = p->b, d = p->d, len = pkv_needed_len(n, p->w);
  *out_len = len;
  if (capacity < len) return PAGEDKV_E_CAPACITY;
  const int64_t *t = tab_of(p, si), first = pkv_first_needed(n, p->w);
  for (int64_t i = 0; i < len;) { /* one run per block */
    const int64_t q = first + i, slot = pkv_block_slot(q, b);
    const int64_t run = b - slot < len - i ? b - slot : len - i;
    const int64_t row = pkv_pool_row(t[pkv_ring_index(pkv_logical_block(q, b), p->tcap)], slot, b);
    if (positions) memcpy(positions + i, p->pos + row, (size_t)run * sizeof(int64_t));
    if (keys) memcpy(keys + i * d, p->keys + row * d, (size_t)(run * d) * sizeof(float));
    if (values) memcpy(values + i * d, p->values + row * d, (size_t)(run * d) * sizeof(float));
    i += run;
  }
  return PAGEDKV_OK;
}

int pagedkv_table(const pagedkv_t *p, int64_t seq, int64_t capacity, int64_t *blocks,
                  int64_t *out_len) {
  if (!p || !out_len) return PAGEDKV_E_NULL;
  if (capacity < 0) return PAGEDKV_E_RANGE;
  int64_t si;
  int rc = lookup(p, seq, &si);
  if (rc != PAGEDKV_OK) return rc;
  const int64_t n = p->seqs[si].n, len = pkv_table_len(n, p->b), kept = pkv_first_kept_block(n, p->w, p->b);
  *out_len = len;
  if (!blocks) return PAGEDKV_OK;
  if (capacity < len) return PAGEDKV_E_CAPACITY;
  const int64_t *t = tab_of(p, si);
  for (int64_t j = 0; j < len; j++) blocks[j] = j < kept ? -1 : t[pkv_ring_index(j, p->tcap)];
  return PAGEDKV_OK;
}

/* ---- prefix cache -------------------------------------------------------------------- */

/* A cached block holding prompt block c (tag, chained hash and its own entries exactly), a
 * referenced one first, then the lowest id; -1 if none. */
static int64_t cache_find(const pagedkv_t *p, int64_t tag, h128_t h, int64_t c, const float *keys,
                          const float *values) {
  const int64_t b = p->b, d = p->d;
  int64_t best = -1;
  for (int64_t x = p->bucket[h.a & p->bmask]; x >= 0; x = p->hnext[x]) {
    if (p->ctag[x] != tag || p->chash[x].a != h.a || p->chash[x].b != h.b) continue;
    const int64_t r0 = pkv_pool_row(x, 0, b);
    int same = 1;
    for (int64_t s = 0; s < b && same; s++) same = p->pos[r0 + s] == c * b + s;
    same = same && !memcmp(p->keys + r0 * d, keys + c * b * d, (size_t)(b * d) * sizeof(float)) &&
           !memcmp(p->values + r0 * d, values + c * b * d, (size_t)(b * d) * sizeof(float));
    if (!same) continue;
    if (best < 0 || (p->ref[x] > 0) > (p->ref[best] > 0) ||
        ((p->ref[x] > 0) == (p->ref[best] > 0) && x < best))
      best = x;
  }
  return best;
}

int pagedkv_admit(pagedkv_t *p, int64_t seq, int64_t identity, int64_t n, const float *keys,
                  const float *values, int64_t *hit_len) {
  if (!p || !hit_len) return PAGEDKV_E_NULL;
  if (n < 1) return PAGEDKV_E_RANGE;
  int rc = absent(p, seq);
  if (rc != PAGEDKV_OK) return rc;
  if (!keys || !values) return PAGEDKV_E_NULL;
  const int64_t b = p->b, d = p->d, cmax = pkv_logical_block(n - 1, b); /* full blocks before n-1 */
  int64_t *found = cmax ? alloc((uint64_t)cmax, sizeof(int64_t)) : NULL;
  h128_t *chains = alloc((uint64_t)cmax + 1, sizeof(h128_t));
  if ((cmax && !found) || !chains || reserve_seq(p) != PAGEDKV_OK) {
    free(found);
    free(chains);
    return PAGEDKV_E_NOMEM;
  }
  chains[0] = chain_root(identity);
  for (int64_t c = 0; c < cmax; c++) {
    chains[c + 1] = chains[c];
    chain_block(&chains[c + 1], b, d, c * b, keys + c * b * d, values + c * b * d);
    found[c] = cache_find(p, identity, chains[c + 1], c, keys, values);
  }
  int64_t hit = 0; /* blocks covered: L = hit * b; L = 0 always qualifies */
  for (int64_t c = cmax; c > 0 && hit == 0; c--) {
    int ok = 1;
    for (int64_t j = pkv_first_kept_block(c * b, p->w, b); j < c && ok; j++) ok = found[j] >= 0;
    if (ok) hit = c;
  }
  const int64_t si = seq_insert(p, seq, hit * b, identity, chains[hit]);
  int64_t *t = tab_of(p, si);
  for (int64_t j = pkv_first_kept_block(hit * b, p->w, b); j < hit; j++) {
    const int64_t x = found[j];
    if (p->ref[x]++ == 0) free_unlink(p, x);
    t[pkv_ring_index(j, p->tcap)] = x;
  }
  free(found);
  free(chains);
  *hit_len = hit * b;
  return PAGEDKV_OK;
}
