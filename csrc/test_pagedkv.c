/* test_pagedkv.c — directed cases and a randomized burst against pagedkv.h, checked by a tiny
 * in-C model of the paged semantics (docs/paged.md).
 *
 * Built like test_ringkv.c: linked to the ASan+UBSan library and plainly for valgrind memcheck.
 * The model is the semantics written literally: full block tables (none = -1), a refcount per
 * block, the free list as a least-recently-freed queue, and, for the prefix cache, the content
 * identity of each full block. Payloads are a pure function of (lineage, position): a sequence's
 * history is a list of lineage segments (a fork starts a new lineage at the fork point), so two
 * histories agree on a prefix iff their segment lists cut at its end are equal — an exact model of
 * content identity. After every op the whole observable state (every table, read, length,
 * identity, refcount and the free count) must equal the model's; a refused op must change none of it.
 *
 * Two regimes of pool shapes (the third argument): `small` (the default) draws windows 1..9, blocks of
 * 1..4, pools of <= 16 blocks and <= 12 sequences — where most bugs show, and cheap enough for tens of
 * thousands of ops; `scale` draws production shapes: blocks of 15..257 (16, 32, 64, 128, 256 and their
 * neighbours), windows W = k*B-1 .. k*B+1 spanning up to 9 blocks, up to 64 live sequences in a pool
 * sized so that 64 sequences press on it (exhausted appends happen), long-lived pools (hundreds to
 * thousands of ops before a recreate), widths 1..4. The model and its checks are the same in both;
 * the scale burst prints a second line saying what it reached, so a test can insist on it.
 *
 * usage: test_pagedkv [seed] [iterations] [small|scale]; exit 0 iff every check passed.
 */
#include "pagedkv.h"
#include "pagedkv_index.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Huge allocations must fail with NULL under ASan too, not abort the run. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

static uint64_t rng_state = 0x853c49e6748fea9bULL;
static uint64_t rnd(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1DULL;
}
static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

static long failures = 0, checks = 0;
/* What the burst exercised (printed, so a test can insist every path was taken). */
static long n_cow = 0, n_exhausted = 0, n_released = 0, n_hits = 0, n_bad = 0;
/* ... and, in the scale regime, at what scale (the "scale:" line). */
static long sc_pools = 0, sc_max_b = 0, sc_max_nb = 0, sc_max_block = 0, sc_max_live = 0, sc_max_held = 0,
            sc_max_n = 0, sc_max_life = 0, sc_exhausted_busy = 0;
#define BUSY 48 /* live sequences from which an exhausted append counts as pressure from many */
#define CHECK(cond, ...)                                   \
  do {                                                     \
    checks++;                                              \
    if (!(cond)) {                                         \
      failures++;                                          \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fputc('\n', stderr);                                 \
      if (failures > 20) exit(1);                          \
    }                                                      \
  } while (0)

/* The model's arrays hold either regime; a pool's own limits (model_t's maxseq, maxt) are its regime's. */
#define MAXSEG 10
#define MAXSEQ 64  /* live sequences: 12 in the small regime, 64 at scale */
#define MAXN 576   /* blocks of a pool: 16 in the small regime, 64 * 9 at scale */
#define MAXT 1024  /* logical blocks a model table may reach: 512 in the small regime, 1024 at scale */

typedef struct {
  int64_t from, lin;
} seg_t;

typedef struct { /* a content identity: identity tag, the prefix's end and its lineage segments cut there */
  int64_t tag, end, nseg;
  seg_t seg[MAXSEG];
} ident_t;

typedef struct {
  int64_t id, n, tag, nseg;
  seg_t seg[MAXSEG];
  int64_t lo; /* every table entry below lo is none (only spares the model rescanning released entries) */
  int64_t tab[MAXT];
} mseq_t;

typedef struct {
  pagedkv_t *p;
  int64_t w, b, nb, d;
  int64_t ref[MAXN], fq[MAXN], nfq; /* free queue: fq[0] is least recently freed */
  int cached[MAXN];
  ident_t cid[MAXN];
  mseq_t s[MAXSEQ];
  int64_t ns, next_lin;
  int scale;                   /* the regime this pool was drawn in */
  int64_t maxseq, maxt;        /* its limits: live sequences, logical blocks of a table */
  long ops, life;              /* ops run on it; at scale, how many it lives before a recreate */
} model_t;

static float key_of(int64_t lin, int64_t pos, int64_t j) {
  return (float)((lin * 1000003 + pos * 131 + j * 7) % 4194304);
}
static float value_of(int64_t lin, int64_t pos, int64_t j) { return -1.0f - key_of(lin, pos, j); }

static int64_t lin_at(const mseq_t *s, int64_t pos) {
  int64_t lin = s->seg[0].lin;
  for (int64_t i = 0; i < s->nseg && s->seg[i].from <= pos; i++) lin = s->seg[i].lin;
  return lin;
}

static void payload(const mseq_t *s, int64_t first, int64_t count, int64_t d, float *k, float *v) {
  for (int64_t i = 0; i < count; i++) {
    const int64_t lin = lin_at(s, first + i);
    for (int64_t j = 0; j < d; j++) {
      k[i * d + j] = key_of(lin, first + i, j);
      v[i * d + j] = value_of(lin, first + i, j);
    }
  }
}

static ident_t ident_of(const mseq_t *s, int64_t end) {
  ident_t c;
  memset(&c, 0, sizeof c);
  c.tag = s->tag;
  c.end = end;
  for (int64_t i = 0; i < s->nseg && s->seg[i].from < end; i++) c.seg[c.nseg++] = s->seg[i];
  return c;
}

static int ident_eq(const ident_t *a, const ident_t *b) {
  if (a->tag != b->tag || a->end != b->end || a->nseg != b->nseg) return 0;
  for (int64_t i = 0; i < a->nseg; i++)
    if (a->seg[i].from != b->seg[i].from || a->seg[i].lin != b->seg[i].lin) return 0;
  return 1;
}

static mseq_t *mfind(model_t *m, int64_t id) {
  for (int64_t i = 0; i < m->ns; i++)
    if (m->s[i].id == id) return &m->s[i];
  return NULL;
}

/* ---- the model's ops: the semantics, literally ------------------------------------- */

static int64_t m_take(model_t *m) {
  int64_t x = m->fq[0];
  memmove(m->fq, m->fq + 1, (size_t)(m->nfq - 1) * sizeof(int64_t));
  m->nfq--;
  m->cached[x] = 0;
  m->ref[x] = 1;
  return x;
}

static void m_unref(model_t *m, int64_t x) {
  if (--m->ref[x] == 0) m->fq[m->nfq++] = x;
}

/* One append; 0 if the pool is exhausted (then nothing changed). */
static int m_append(model_t *m, mseq_t *s) {
  int64_t b = m->b, n = s->n, j = n / b, len = (n + b - 1) / b;
  if (j == len || s->tab[j] < 0) {
    if (m->nfq == 0) return 0;
    s->tab[j] = m_take(m);
  } else if (m->ref[s->tab[j]] > 1) {
    if (m->nfq == 0) return 0;
    int64_t old = s->tab[j];
    s->tab[j] = m_take(m);
    m->ref[old]--;
    n_cow++;
  }
  s->n = n + 1;
  if (s->n % b == 0) {
    m->cached[s->tab[j]] = 1;
    m->cid[s->tab[j]] = ident_of(s, s->n);
  }
  for (int64_t jj = s->lo; jj < (s->n + b - 1) / b; jj++)
    if (s->tab[jj] >= 0 && (jj + 1) * b <= s->n - m->w + 1) {
      m_unref(m, s->tab[jj]);
      s->tab[jj] = -1;
      n_released++;
    }
  while (s->lo < (s->n + b - 1) / b && s->tab[s->lo] < 0) s->lo++;
  return 1;
}

/* ---- checking the implementation against the model --------------------------------- */

static void check_seq(model_t *m, const mseq_t *s, const char *after) {
  int64_t x = -7, len = -7;
  CHECK(pagedkv_length(m->p, s->id, &x) == PAGEDKV_OK && x == s->n, "%s: length of %" PRId64 ": %" PRId64
        " want %" PRId64, after, s->id, x, s->n);
  CHECK(pagedkv_identity(m->p, s->id, &x) == PAGEDKV_OK && x == s->tag, "%s: identity of %" PRId64, after, s->id);
  int64_t tlen = pkv_table_len(s->n, m->b);
  int64_t *t = malloc(sizeof(int64_t) * (size_t)(tlen + 1));
  CHECK(pagedkv_table(m->p, s->id, tlen, t, &len) == PAGEDKV_OK && len == tlen, "%s: table len", after);
  for (int64_t j = 0; j < tlen && len == tlen; j++)
    CHECK(t[j] == s->tab[j], "%s: seq %" PRId64 " table[%" PRId64 "] = %" PRId64 " want %" PRId64, after, s->id, j,
          t[j], s->tab[j]);
  free(t);
  int64_t want = s->n < m->w - 1 ? s->n : m->w - 1, first = s->n - want;
  int64_t *pos = malloc(sizeof(int64_t) * (size_t)(want + 1));
  float *k = malloc(sizeof(float) * (size_t)((want + 1) * m->d)), *v = malloc(sizeof(float) * (size_t)((want + 1) * m->d));
  float *ek = malloc(sizeof(float) * (size_t)((want + 1) * m->d)), *ev = malloc(sizeof(float) * (size_t)((want + 1) * m->d));
  CHECK(pagedkv_read(m->p, s->id, want, pos, k, v, &len) == PAGEDKV_OK && len == want, "%s: read len", after);
  payload(s, first, want, m->d, ek, ev);
  for (int64_t i = 0; i < want && len == want; i++) {
    CHECK(pos[i] == first + i, "%s: seq %" PRId64 " read[%" PRId64 "] position %" PRId64, after, s->id, i, pos[i]);
    CHECK(!memcmp(k + i * m->d, ek + i * m->d, (size_t)m->d * sizeof(float)) &&
              !memcmp(v + i * m->d, ev + i * m->d, (size_t)m->d * sizeof(float)),
          "%s: seq %" PRId64 " payload of position %" PRId64, after, s->id, first + i);
  }
  free(pos);
  free(k);
  free(v);
  free(ek);
  free(ev);
}

/* The whole observable state equals the model, and the model keeps the semantics' invariants. */
static void check_state(model_t *m, const char *after) {
  int64_t x = -7, refs[MAXN] = {0};
  CHECK(pagedkv_free_blocks(m->p, &x) == PAGEDKV_OK && x == m->nfq, "%s: free blocks %" PRId64 " want %" PRId64,
        after, x, m->nfq);
  for (int64_t i = 0; i < m->ns; i++) {
    const mseq_t *s = &m->s[i];
    int64_t held = 0;
    for (int64_t j = s->lo; j < pkv_table_len(s->n, m->b); j++)
      if (s->tab[j] >= 0) {
        refs[s->tab[j]]++, held++;
        if (m->scale && s->tab[j] > sc_max_block) sc_max_block = s->tab[j];
      }
    CHECK(held <= pkv_max_blocks(m->w, m->b), "%s: model seq holds %" PRId64 " blocks", after, held);
    if (m->scale && held > sc_max_held) sc_max_held = held;
    if (m->scale && s->n > sc_max_n) sc_max_n = s->n;
    check_seq(m, s, after);
  }
  for (int64_t blk = 0; blk < m->nb; blk++) {
    CHECK(refs[blk] == m->ref[blk], "%s: model refcount of %" PRId64, after, blk);
    CHECK(pagedkv_refcount(m->p, blk, &x) == PAGEDKV_OK && x == m->ref[blk], "%s: refcount of block %" PRId64
          ": %" PRId64 " want %" PRId64, after, blk, x, m->ref[blk]);
  }
}

#include "test_pagedkv_cases.h"

static int64_t pick_id(void) {
  static const int64_t big[] = {INT64_MAX, (int64_t)1 << 40, 1000003};
  return rnd() % 6 ? rnd_in(0, 5) : big[rnd() % 3];
}

static void op_append(model_t *m, mseq_t *s, int64_t count) {
  float *k = malloc(sizeof(float) * (size_t)(count * m->d + 1)), *v = malloc(sizeof(float) * (size_t)(count * m->d + 1));
  payload(s, s->n, count, m->d, k, v);
  mseq_t saved = *s;
  model_t *before = malloc(sizeof *before); /* what the appends may change: s and the pool's blocks */
  const size_t nb = (size_t)m->nb;
  memcpy(before->ref, m->ref, nb * sizeof m->ref[0]);
  memcpy(before->fq, m->fq, nb * sizeof m->fq[0]);
  memcpy(before->cached, m->cached, nb * sizeof m->cached[0]);
  memcpy(before->cid, m->cid, nb * sizeof m->cid[0]);
  before->nfq = m->nfq;
  int ok = 1;
  for (int64_t i = 0; i < count && ok; i++) ok = m_append(m, s);
  int rc = count == 1 && rnd() % 2 ? pagedkv_append(m->p, s->id, saved.n, k, v)
                                   : pagedkv_append_chunk(m->p, s->id, saved.n, count, k, v);
  if (!ok) { /* the chunk is all-or-nothing: the model rolls back */
    *s = saved;
    memcpy(m->ref, before->ref, nb * sizeof m->ref[0]);
    memcpy(m->fq, before->fq, nb * sizeof m->fq[0]);
    memcpy(m->cached, before->cached, nb * sizeof m->cached[0]);
    memcpy(m->cid, before->cid, nb * sizeof m->cid[0]);
    m->nfq = before->nfq;
    n_exhausted++;
    if (m->scale && m->ns >= BUSY) sc_exhausted_busy++;
    CHECK(rc == PAGEDKV_E_EXHAUSTED, "append of %" PRId64 " at %" PRId64 ": %s, the model says exhausted", count,
          saved.n, pagedkv_strerror(rc));
  } else {
    CHECK(rc == PAGEDKV_OK, "append of %" PRId64 " at %" PRId64 ": %s", count, saved.n, pagedkv_strerror(rc));
  }
  free(before);
  free(k);
  free(v);
}

static void op_admit(model_t *m, int64_t id) {
  int64_t lin = rnd_in(0, 3), tag = rnd_in(0, 1), n = rnd_in(1, 3 * m->w + 2 * m->b);
  if (n / m->b + 1 >= m->maxt) return;
  mseq_t *s = &m->s[m->ns];
  memset(s, 0, sizeof *s);
  s->id = id;
  s->tag = tag;
  s->nseg = 1;
  s->seg[0].lin = lin;
  float *k = malloc(sizeof(float) * (size_t)(n * m->d)), *v = malloc(sizeof(float) * (size_t)(n * m->d));
  payload(s, 0, n, m->d, k, v);
  /* The model's hit: for each full prompt block c the cached block of that content identity
   * (a referenced one first, then the lowest id), and the largest valid L. */
  int64_t cmax = (n - 1) / m->b, found[MAXT], hit = 0, got = -1;
  for (int64_t c = 0; c < cmax; c++) {
    ident_t want = ident_of(s, (c + 1) * m->b);
    found[c] = -1;
    for (int64_t x = 0; x < m->nb; x++)
      if (m->cached[x] && ident_eq(&m->cid[x], &want) && (found[c] < 0 || (m->ref[x] > 0 && m->ref[found[c]] == 0)))
        found[c] = x;
  }
  for (int64_t c = cmax; c > 0 && !hit; c--) {
    int ok = 1;
    for (int64_t j = pkv_first_kept_block(c * m->b, m->w, m->b); j < c; j++) ok = ok && found[j] >= 0;
    if (ok) hit = c;
  }
  int rc = pagedkv_admit(m->p, id, tag, n, k, v, &got);
  CHECK(rc == PAGEDKV_OK && got == hit * m->b, "admit %" PRId64 " (tag %" PRId64 ", lineage %" PRId64 ", %" PRId64
        " entries): %s, hit %" PRId64 " want %" PRId64, id, tag, lin, n, pagedkv_strerror(rc), got, hit * m->b);
  s->n = hit * m->b;
  n_hits += hit > 0;
  for (int64_t j = 0; j < hit; j++) s->tab[j] = -1;
  s->lo = pkv_first_kept_block(s->n, m->w, m->b);
  for (int64_t j = pkv_first_kept_block(s->n, m->w, m->b); j < hit; j++) {
    int64_t x = found[j];
    if (m->ref[x]++ == 0) {
      int64_t at = 0;
      while (m->fq[at] != x) at++;
      memmove(m->fq + at, m->fq + at + 1, (size_t)(m->nfq - at - 1) * sizeof(int64_t));
      m->nfq--;
    }
    s->tab[j] = x;
  }
  m->ns++;
  free(k);
  free(v);
}

/* At scale: ids from a range a little wider than 64, so the live count climbs to 64 and stays near it. */
static int64_t pick_id_scale(void) {
  static const int64_t big[] = {INT64_MAX, (int64_t)1 << 40, 1000003};
  return rnd() % 6 ? rnd_in(0, 71) : big[rnd() % 3];
}

static void one_op(model_t *m) {
  int op = (int)(rnd() % 20);
  int64_t id = m->scale ? pick_id_scale() : pick_id();
  /* A full pool: free a live sequence more often (at scale seldom, so that it stays pressed). */
  if (m->nfq == 0 && m->ns > 0 && (m->scale ? rnd() % 8 == 0 : rnd() % 2 != 0)) {
    id = m->s[rnd() % (uint64_t)m->ns].id;
    op = 16;
  }
  mseq_t *s = mfind(m, id);
  if (op < 2 && !s && m->ns < m->maxseq) { /* add, with a lineage that others may share */
    CHECK(pagedkv_add(m->p, id) == PAGEDKV_OK, "add %" PRId64, id);
    s = &m->s[m->ns++];
    memset(s, 0, sizeof *s);
    s->id = id;
    s->nseg = 1;
    s->seg[0].lin = rnd_in(0, 3);
  } else if (op < 9 && s) {
    int64_t edges[] = {1, 1, m->b - 1, m->b, m->w - 1, m->w, m->b * m->nb, m->b * (m->nb + 1)};
    if (m->scale) { /* the pool-sized edges would be a long stream: a window plus a block, and beyond */
      edges[6] = m->w + m->b;
      edges[7] = m->b * (pkv_max_blocks(m->w, m->b) + 1);
    }
    int64_t count = rnd() % 2 ? edges[rnd() % 8] : rnd_in(0, 2 * m->w + m->b);
    if (count < 0) count = 0;
    if ((s->n + count) / m->b + 1 < m->maxt) op_append(m, s, count);
  } else if (op < 15 && s && m->ns < m->maxseq) { /* fork to a free id; the child's lineage is new */
    int64_t dst = pick_id();
    if (!mfind(m, dst) && s->nseg < MAXSEG) {
      CHECK(pagedkv_fork(m->p, id, dst) == PAGEDKV_OK, "fork %" PRId64 " -> %" PRId64, id, dst);
      mseq_t *c = &m->s[m->ns++];
      *c = *s;
      c->id = dst;
      if (c->seg[c->nseg - 1].from == c->n) c->nseg--; /* an empty segment is replaced */
      c->seg[c->nseg].from = c->n;
      c->seg[c->nseg++].lin = 100 + m->next_lin++;
      for (int64_t j = 0; j < pkv_table_len(c->n, m->b); j++)
        if (c->tab[j] >= 0) m->ref[c->tab[j]]++;
      check_state(m, "fork");
      if (rnd() % 2 && (c->n + m->b) / m->b + 1 < m->maxt) /* into the shared partial block, often */
        op_append(m, rnd() % 2 ? c : s, rnd_in(1, m->b));
    }
  } else if (op < 17 && s && (!m->scale || op == 16 || m->ns >= m->maxseq)) { /* at scale: half as often */
    CHECK(pagedkv_free(m->p, id) == PAGEDKV_OK, "free %" PRId64, id);
    for (int64_t j = 0; j < pkv_table_len(s->n, m->b); j++)
      if (s->tab[j] >= 0) m_unref(m, s->tab[j]);
    *s = m->s[--m->ns];
  } else if (op < 19 && !s && m->ns < m->maxseq) {
    op_admit(m, id);
  } else if (s) {
    bad_inputs(m, s);
    n_bad++;
  }
  check_state(m, "op");
}

/* A new pool for m in its regime: the small regime's shapes as they always were; at scale a production shape
 * (the first of each pool fixed: a page of 257 with a window over 4 pages, and 300 blocks of 32 with windows
 * over 9, so every run has a page past 256, block ids past 255 and a window across many blocks). */
static void recreate(model_t *m, int scale, int first_shape, long it, long iters) {
  int64_t w, b, nb, d;
  long life = 0;
  if (m->p) CHECK(pagedkv_destroy(m->p) == PAGEDKV_OK, "destroy");
  if (!scale) {
    static const int64_t shapes[2][4] = {{5, 2, 8, 3}, {3, 3, 5, 1}};
    const int64_t *sh = shapes[first_shape];
    w = it ? rnd_in(1, 9) : sh[0], b = it ? rnd_in(1, 4) : sh[1], nb = it ? rnd_in(1, 16) : sh[2];
    d = it ? rnd_in(1, 4) : sh[3];
  } else {
    static const int64_t sizes[] = {15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257};
    static const int64_t firsts[2][4] = {{3 * 257 + 1, 257, 128, 2}, {8 * 32 - 1, 32, 300, 1}};
    if (m->life == 0) { /* this pool's first shape */
      w = firsts[first_shape][0], b = firsts[first_shape][1], nb = firsts[first_shape][2], d = firsts[first_shape][3];
    } else {
      b = sizes[rnd() % 15];
      w = rnd_in(1, 8) * b + rnd_in(-1, 1);
      const int64_t most = pkv_max_blocks(w, b); /* blocks one sequence may hold: 2 .. 9 */
      nb = rnd() % 2 ? rnd_in(24 * most, 48 * most) : rnd_in(8, 24 * most); /* 64 sequences press on it */
      d = rnd_in(1, 4);
    }
    life = rnd_in(iters / 8, iters / 2) + 50; /* long-lived: hundreds to thousands of ops */
    sc_pools++;
    if (b > sc_max_b) sc_max_b = b;
    if (nb > sc_max_nb) sc_max_nb = nb;
  }
  memset(m, 0, sizeof *m);
  m->w = w, m->b = b, m->nb = nb, m->d = d;
  m->scale = scale;
  m->maxseq = scale ? 64 : 12;
  m->maxt = scale ? MAXT : 512;
  m->life = life;
  CHECK(pagedkv_create(w, b, nb, d, &m->p) == PAGEDKV_OK, "create %" PRId64 "/%" PRId64 "/%" PRId64 "/%" PRId64, w,
        b, nb, d);
  for (int64_t x = 0; x < nb; x++) m->fq[m->nfq++] = x;
  check_state(m, "create");
}

int main(int argc, char **argv) {
  rng_state ^= argc > 1 ? strtoull(argv[1], NULL, 10) * 0x9E3779B97F4A7C15ULL : 0;
  if (rng_state == 0) rng_state = 1;
  long iters = argc > 2 ? strtol(argv[2], NULL, 10) : 20000;
  const char *regime = argc > 3 ? argv[3] : "small";
  if (strcmp(regime, "small") != 0 && strcmp(regime, "scale") != 0) {
    fprintf(stderr, "usage: test_pagedkv [seed] [iterations] [small|scale]; got regime %s\n", regime);
    return 2;
  }
  const int scale = regime[1] == 'c';
  directed_cases();
  /* Two independent pools of different shapes, interleaved: no shared state. */
  static model_t pools[2];
  for (long it = 0; it < iters && failures == 0; it++) {
    model_t *m = &pools[rnd() % 2];
    /* (re)create with a random shape now and then (at scale: once the pool has lived its life) */
    if (!m->p || (scale ? m->ops >= m->life : rnd() % 4000 == 0)) recreate(m, scale, (int)(m - pools), it, iters);
    one_op(m);
    m->ops++;
    if (scale && m->ops > sc_max_life) sc_max_life = m->ops;
    if (scale && m->ns > sc_max_live) sc_max_live = m->ns;
  }
  for (int i = 0; i < 2; i++)
    if (pools[i].p) CHECK(pagedkv_destroy(pools[i].p) == PAGEDKV_OK, "destroy");
  printf("test_pagedkv: %ld iterations, %ld checks, %ld failures\n", iters, checks, failures);
  printf("exercised: %ld copies on write, %ld exhausted appends, %ld blocks released, %ld prefix hits, "
         "%ld bad-input sweeps\n", n_cow, n_exhausted, n_released, n_hits, n_bad);
  if (scale)
    printf("scale: %ld pools, largest block size %ld, largest pool %ld blocks, highest block id held %ld, "
           "most live sequences %ld, most blocks held by one sequence %ld, longest sequence %ld tokens, "
           "longest pool life %ld ops, %ld exhausted appends with >= %d live\n", sc_pools, sc_max_b, sc_max_nb,
           sc_max_block, sc_max_live, sc_max_held, sc_max_n, sc_max_life, sc_exhausted_busy, BUSY);
  return failures ? 1 : 0;
}
