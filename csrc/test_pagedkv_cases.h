/* test_pagedkv_cases.h — the directed cases and the bad-input sweep of test_pagedkv.c (included
 * once, after its model; split out only to keep each file short).
 *
 * The directed cases are small pools whose every table, refcount and free count is written out
 * by hand from the semantics: the basic window, copy on write, exhaustion (an append, a chunk, a
 * copy), atomic chunks that fit only because blocks are released part-way, every prefix-cache
 * rule, many sequences with large ids, and the overflow-checked sizes.
 */

#define UNKNOWN_ID INT64_C(77777777)

static void fill(int64_t d, int64_t first, int64_t count, float tag, float *k, float *v) {
  for (int64_t i = 0; i < count; i++)
    for (int64_t j = 0; j < d; j++) {
      k[i * d + j] = tag * 1000.0f + (float)((first + i) * 10 + j);
      v[i * d + j] = -k[i * d + j];
    }
}

static int chunk(pagedkv_t *p, int64_t seq, int64_t first, int64_t count, int64_t d, float tag) {
  float k[512], v[512];
  if (count * d > 512) return -1;
  fill(d, first, count, tag, k, v);
  return pagedkv_append_chunk(p, seq, first, count, k, v);
}

static int admit(pagedkv_t *p, int64_t seq, int64_t tag, int64_t count, int64_t d, float payload_tag, int64_t *hit) {
  float k[512], v[512];
  if (count * d > 512) return -1;
  fill(d, 0, count, payload_tag, k, v);
  return pagedkv_admit(p, seq, tag, count, k, v, hit);
}

static void expect(pagedkv_t *p, int64_t seq, int64_t len, const int64_t *table, const char *what) {
  int64_t got[64], n = -1;
  int rc = pagedkv_table(p, seq, 64, got, &n);
  CHECK(rc == PAGEDKV_OK && n == len, "%s: table of %" PRId64 ": %s, length %" PRId64 " want %" PRId64, what, seq,
        pagedkv_strerror(rc), n, len);
  for (int64_t j = 0; j < len && n == len; j++)
    CHECK(got[j] == table[j], "%s: table[%" PRId64 "] of %" PRId64 " = %" PRId64 " want %" PRId64, what, j, seq,
          got[j], table[j]);
}

static void expect_refs(pagedkv_t *p, int64_t nb, const int64_t *refs, int64_t nfree, const char *what) {
  int64_t x = -1;
  for (int64_t b = 0; b < nb; b++)
    CHECK(pagedkv_refcount(p, b, &x) == PAGEDKV_OK && x == refs[b], "%s: refcount of block %" PRId64 " = %" PRId64
          " want %" PRId64, what, b, x, refs[b]);
  CHECK(pagedkv_free_blocks(p, &x) == PAGEDKV_OK && x == nfree, "%s: free %" PRId64 " want %" PRId64, what, x, nfree);
}

/* Read positions of seq equal first .. first+len-1 with payload tag `tag`. */
static void expect_read(pagedkv_t *p, int64_t seq, int64_t first, int64_t len, int64_t d, float tag, const char *what) {
  int64_t pos[64], n = -1;
  float k[256], v[256], ek[256], ev[256];
  CHECK(pagedkv_read(p, seq, 64, pos, k, v, &n) == PAGEDKV_OK && n == len, "%s: read of %" PRId64 " has %" PRId64
        " entries, want %" PRId64, what, seq, n, len);
  fill(d, first, len, tag, ek, ev);
  for (int64_t i = 0; i < len && n == len; i++)
    CHECK(pos[i] == first + i && !memcmp(k + i * d, ek + i * d, sizeof(float) * (size_t)d) &&
              !memcmp(v + i * d, ev + i * d, sizeof(float) * (size_t)d),
          "%s: read[%" PRId64 "] of %" PRId64, what, i, seq);
}

static void case_basic_cow(void) {
  pagedkv_t *p = NULL;
  int64_t hit = -1;
  CHECK(pagedkv_create(4, 2, 6, 3, &p) == PAGEDKV_OK, "create 4/2/6/3");
  CHECK(pagedkv_add(p, 5) == PAGEDKV_OK, "add");
  CHECK(chunk(p, 5, 0, 7, 3, 1) == PAGEDKV_OK, "chunk 0..6");
  expect(p, 5, 4, (int64_t[]){-1, -1, 2, 3}, "7 tokens, W=4: blocks 0, 1 released");
  expect_refs(p, 6, (int64_t[]){0, 0, 1, 1, 0, 0}, 4, "7 tokens");
  expect_read(p, 5, 4, 3, 3, 1, "7 tokens");
  CHECK(pagedkv_fork(p, 5, 9) == PAGEDKV_OK, "fork");
  expect(p, 9, 4, (int64_t[]){-1, -1, 2, 3}, "fork shares the table");
  expect_refs(p, 6, (int64_t[]){0, 0, 2, 2, 0, 0}, 4, "fork takes a reference");
  CHECK(chunk(p, 9, 7, 1, 3, 2) == PAGEDKV_OK, "append into the shared partial block");
  expect(p, 9, 4, (int64_t[]){-1, -1, 2, 4}, "copy on write takes the least recently freed block 4");
  expect(p, 5, 4, (int64_t[]){-1, -1, 2, 3}, "the source keeps block 3");
  expect_refs(p, 6, (int64_t[]){0, 0, 2, 1, 1, 0}, 3, "copy on write");
  expect_read(p, 5, 4, 3, 3, 1, "the source reads its own history");
  int64_t pos[3], n;
  float k[9];
  CHECK(pagedkv_read(p, 9, 3, pos, k, NULL, &n) == PAGEDKV_OK && n == 3 && pos[2] == 7 && k[6] == 2070.0f &&
            k[3] == 1060.0f,
        "the fork reads the copied slot and its own write");
  CHECK(chunk(p, 5, 7, 2, 3, 1) == PAGEDKV_OK, "the source appends 7, 8");
  expect(p, 5, 5, (int64_t[]){-1, -1, -1, 3, 5}, "9 tokens: block 2 released (still held by the fork)");
  expect_refs(p, 6, (int64_t[]){0, 0, 1, 1, 1, 1}, 2, "9 tokens");
  CHECK(pagedkv_free(p, 9) == PAGEDKV_OK, "free the fork");
  expect_refs(p, 6, (int64_t[]){0, 0, 0, 1, 0, 1}, 4, "free");
  CHECK(pagedkv_admit(p, 9, 0, 9, NULL, NULL, &hit) == PAGEDKV_E_NULL, "admit NULL keys");
  pagedkv_destroy(p);
}

static void case_exhaustion(void) {
  pagedkv_t *p = NULL;
  CHECK(pagedkv_create(5, 2, 2, 1, &p) == PAGEDKV_OK, "create 5/2/2/1");
  CHECK(pagedkv_add(p, 1) == PAGEDKV_OK, "add");
  CHECK(chunk(p, 1, 0, 6, 1, 1) == PAGEDKV_E_EXHAUSTED, "a chunk needing 3 blocks of 2");
  expect(p, 1, 0, NULL, "a refused chunk leaves the table empty");
  expect_refs(p, 2, (int64_t[]){0, 0}, 2, "a refused chunk takes nothing");
  CHECK(chunk(p, 1, 0, 4, 1, 1) == PAGEDKV_OK, "a chunk of 2 blocks");
  CHECK(chunk(p, 1, 4, 1, 1, 1) == PAGEDKV_E_EXHAUSTED, "append into a third block");
  expect(p, 1, 2, (int64_t[]){0, 1}, "exhausted append");
  expect_read(p, 1, 0, 4, 1, 1, "exhausted append");
  pagedkv_destroy(p);

  /* W=3, B=2, N=2: a chunk of 10 fits because blocks are released part-way and reused. */
  CHECK(pagedkv_create(3, 2, 2, 1, &p) == PAGEDKV_OK, "create 3/2/2/1");
  CHECK(pagedkv_add(p, 1) == PAGEDKV_OK, "add");
  CHECK(chunk(p, 1, 0, 10, 1, 1) == PAGEDKV_OK, "a chunk reusing its own released blocks");
  expect(p, 1, 5, (int64_t[]){-1, -1, -1, -1, 0}, "10 tokens: blocks taken 0, 1, 0, 1, 0");
  expect_refs(p, 2, (int64_t[]){1, 0}, 1, "10 tokens");
  expect_read(p, 1, 8, 2, 1, 1, "10 tokens");
  pagedkv_destroy(p);

  /* N=1: the copy on write finds the pool empty. */
  CHECK(pagedkv_create(8, 2, 1, 1, &p) == PAGEDKV_OK, "create 8/2/1/1");
  CHECK(pagedkv_add(p, 1) == PAGEDKV_OK && chunk(p, 1, 0, 1, 1, 1) == PAGEDKV_OK, "one token");
  CHECK(pagedkv_fork(p, 1, 2) == PAGEDKV_OK, "fork needs no block");
  CHECK(chunk(p, 2, 1, 1, 1, 2) == PAGEDKV_E_EXHAUSTED, "copy on write needs a block");
  CHECK(chunk(p, 2, 1, 3, 1, 2) == PAGEDKV_E_EXHAUSTED, "a chunk starting with a copy");
  expect_refs(p, 1, (int64_t[]){2}, 0, "refused copy");
  expect_read(p, 1, 0, 1, 1, 1, "refused copy");
  CHECK(pagedkv_free(p, 1) == PAGEDKV_OK, "free the source");
  CHECK(chunk(p, 2, 1, 1, 1, 2) == PAGEDKV_OK, "unshared: written in place");
  expect(p, 2, 1, (int64_t[]){0}, "in place");
  pagedkv_destroy(p);
}

static void case_admit(void) {
  pagedkv_t *p = NULL;
  int64_t hit = -1;
  float k[16], v[16];
  CHECK(pagedkv_create(3, 2, 8, 2, &p) == PAGEDKV_OK, "create 3/2/8/2");
  CHECK(pagedkv_add(p, 1) == PAGEDKV_OK && chunk(p, 1, 0, 6, 2, 1) == PAGEDKV_OK, "prompt P through seq 1");
  expect(p, 1, 3, (int64_t[]){-1, -1, 2}, "W=3 keeps block 2");
  CHECK(admit(p, 2, 0, 7, 2, 1, &hit) == PAGEDKV_OK && hit == 6, "P of 7: L = 6 (block 2, referenced): %" PRId64, hit);
  expect(p, 2, 3, (int64_t[]){-1, -1, 2}, "hit table");
  expect_read(p, 2, 4, 2, 2, 1, "hit read");
  CHECK(admit(p, 3, 1, 7, 2, 1, &hit) == PAGEDKV_OK && hit == 0, "another identity tag: miss, %" PRId64, hit);
  CHECK(admit(p, 4, 0, 6, 2, 1, &hit) == PAGEDKV_OK && hit == 4, "P of 6: L <= 5, L = 4 (cached free block 1)");
  expect(p, 4, 2, (int64_t[]){-1, 1}, "a cached free block is taken off the free list");
  expect_refs(p, 8, (int64_t[]){0, 1, 2, 0, 0, 0, 0, 0}, 6, "after the hits");
  fill(2, 0, 7, 1, k, v);
  k[0] = 42.0f; /* Q: P with position 0 changed; its blocks 1 and 2 hold P's entries */
  CHECK(pagedkv_admit(p, 5, 0, 7, k, v, &hit) == PAGEDKV_OK && hit == 0,
        "a prefix differing in block 0 matches no later block: %" PRId64, hit);
  CHECK(pagedkv_admit(p, 5, 0, 7, k, v, &hit) == PAGEDKV_E_DUPLICATE_SEQ, "admit of an existing sequence");
  CHECK(pagedkv_admit(p, 6, 0, 0, k, v, &hit) == PAGEDKV_E_RANGE, "admit of 0 entries");
  CHECK(pagedkv_admit(p, -1, 0, 3, k, v, &hit) == PAGEDKV_E_RANGE, "admit of a negative id");
  CHECK(pagedkv_admit(p, 6, 0, 3, k, v, NULL) == PAGEDKV_E_NULL, "admit without hit_len");
  CHECK(pagedkv_admit(p, 6, 0, 3, k, NULL, &hit) == PAGEDKV_E_NULL, "admit without values");
  expect_refs(p, 8, (int64_t[]){0, 1, 2, 0, 0, 0, 0, 0}, 6, "refused admits");
  /* Free list now 3 4 5 6 7 0: a 12-token stream of seq 7 takes 3 4 5 6 7 0, evicting block 0. */
  CHECK(pagedkv_add(p, 7) == PAGEDKV_OK && chunk(p, 7, 0, 12, 2, 9) == PAGEDKV_OK, "stream of seq 7");
  expect(p, 7, 6, (int64_t[]){-1, -1, -1, -1, -1, 0}, "least recently freed first: block 0 last");
  CHECK(admit(p, 8, 0, 3, 2, 1, &hit) == PAGEDKV_OK && hit == 0, "P's block 0 was evicted: %" PRId64, hit);
  CHECK(admit(p, 9, 0, 7, 2, 1, &hit) == PAGEDKV_OK && hit == 6, "blocks before the needed ones may be evicted");
  expect_refs(p, 8, (int64_t[]){1, 1, 3, 0, 0, 0, 0, 0}, 5, "after the eviction");
  pagedkv_destroy(p);

  CHECK(pagedkv_create(1, 2, 1, 1, &p) == PAGEDKV_OK, "create 1/2/1/1");
  CHECK(admit(p, 1, 0, 5, 1, 1, &hit) == PAGEDKV_OK && hit == 4, "W=1 needs no block: L = 4 of 5");
  expect(p, 1, 2, (int64_t[]){-1, -1}, "W=1 hit table");
  CHECK(chunk(p, 1, 4, 1, 1, 1) == PAGEDKV_OK, "the caller appends the rest");
  expect_refs(p, 1, (int64_t[]){1}, 0, "W=1: a block is held until all its positions are written");
  CHECK(chunk(p, 1, 5, 1, 1, 1) == PAGEDKV_OK, "position 5 fills the block");
  expect_refs(p, 1, (int64_t[]){0}, 1, "W=1: a full block is released at once");
  expect_read(p, 1, 6, 0, 1, 1, "W=1 reads nothing");
  pagedkv_destroy(p);
}

static int64_t many_id(int64_t i) { return i * 7919 + (i % 3) * ((int64_t)1 << 50); }

static void case_many_and_sizes(void) {
  pagedkv_t *p = (pagedkv_t *)0x1;
  int64_t x;
  CHECK(pagedkv_create(0, 1, 1, 1, &p) == PAGEDKV_E_CONFIG && pagedkv_create(1, 0, 1, 1, &p) == PAGEDKV_E_CONFIG &&
            pagedkv_create(1, 1, 0, 1, &p) == PAGEDKV_E_CONFIG && pagedkv_create(1, 1, 1, -4, &p) == PAGEDKV_E_CONFIG,
        "every config value < 1");
  CHECK(pagedkv_create(1, 1, 1, 1, NULL) == PAGEDKV_E_NULL, "create out NULL");
  CHECK(pagedkv_create(4, 1, INT64_MAX, 1, &p) == PAGEDKV_E_NOMEM, "num_blocks INT64_MAX");
  CHECK(pagedkv_create(4, (int64_t)1 << 62, 2, 1, &p) == PAGEDKV_E_NOMEM, "block_size 2^62");
  CHECK(pagedkv_create(4, 2, 2, (int64_t)1 << 62, &p) == PAGEDKV_E_NOMEM, "width 2^62");
  CHECK(pagedkv_create(4, (int64_t)1 << 31, (int64_t)1 << 31, 2, &p) == PAGEDKV_E_NOMEM, "slots x width over PTRDIFF_MAX");
  CHECK(p == (pagedkv_t *)0x1, "a failed create leaves *out untouched");
  CHECK(pagedkv_create(INT64_MAX, 2, 8, 1, &p) == PAGEDKV_OK, "W = INT64_MAX: every position is needed");
  CHECK(pagedkv_add(p, INT64_MAX) == PAGEDKV_OK && chunk(p, INT64_MAX, 0, 10, 1, 3) == PAGEDKV_OK, "10 tokens");
  expect_read(p, INT64_MAX, 0, 10, 1, 3, "W = INT64_MAX");
  CHECK(chunk(p, INT64_MAX, 10, 7, 1, 3) == PAGEDKV_E_EXHAUSTED, "block 8 of 8 does not exist");
  pagedkv_destroy(p);

  /* 300 sequences (the records and the id map grow and rehash), half freed (swap-removal). */
  CHECK(pagedkv_create(2, 1, 4, 1, &p) == PAGEDKV_OK, "create 2/1/4/1");
  for (int64_t i = 0; i < 300; i++) CHECK(pagedkv_add(p, many_id(i)) == PAGEDKV_OK, "add many");
  for (int64_t i = 0; i < 300; i += 2) CHECK(pagedkv_free(p, many_id(i)) == PAGEDKV_OK, "free");
  for (int64_t i = 0; i < 300; i++) {
    int rc = pagedkv_length(p, many_id(i), &x);
    CHECK(i % 2 ? rc == PAGEDKV_OK && x == 0 : rc == PAGEDKV_E_UNKNOWN_SEQ, "seq %" PRId64 " after frees", i);
  }
  CHECK(pagedkv_add(p, many_id(1)) == PAGEDKV_E_DUPLICATE_SEQ && pagedkv_add(p, many_id(0)) == PAGEDKV_OK, "re-add");
  CHECK(chunk(p, many_id(1), 0, 3, 1, 1) == PAGEDKV_OK && pagedkv_fork(p, many_id(1), 5) == PAGEDKV_OK,
        "fork among many");
  expect_read(p, 5, 2, 1, 1, 1, "fork among many");
  pagedkv_destroy(p);
}

static void directed_cases(void) {
  case_basic_cow();
  case_exhaustion();
  case_admit();
  case_many_and_sizes();
  CHECK(strcmp(pagedkv_strerror(PAGEDKV_E_EXHAUSTED), pagedkv_strerror(PAGEDKV_E_CAPACITY)) != 0, "strerror");
  CHECK(strcmp(pagedkv_strerror(-1), pagedkv_strerror(99)) == 0 && pagedkv_strerror(-1) != NULL, "strerror unknown");
}

/* Every documented bad call on a live pool returns its code; check_state then sees no change. */
static void bad_inputs(model_t *m, mseq_t *s) {
  pagedkv_t *p = m->p;
  float k[64] = {0}, v[64] = {0};
  int64_t x = -5, buf[4] = {-99, -99, -99, -99}, id = s->id, n = s->n;
  CHECK(pagedkv_add(NULL, 1) == PAGEDKV_E_NULL && pagedkv_append(NULL, id, n, k, v) == PAGEDKV_E_NULL &&
            pagedkv_append_chunk(NULL, id, n, 1, k, v) == PAGEDKV_E_NULL && pagedkv_fork(NULL, id, 1) == PAGEDKV_E_NULL &&
            pagedkv_free(NULL, id) == PAGEDKV_E_NULL && pagedkv_read(NULL, id, 9, NULL, NULL, NULL, &x) == PAGEDKV_E_NULL &&
            pagedkv_table(NULL, id, 9, NULL, &x) == PAGEDKV_E_NULL && pagedkv_free_blocks(NULL, &x) == PAGEDKV_E_NULL &&
            pagedkv_length(NULL, id, &x) == PAGEDKV_E_NULL && pagedkv_identity(NULL, id, &x) == PAGEDKV_E_NULL &&
            pagedkv_refcount(NULL, 0, &x) == PAGEDKV_E_NULL && pagedkv_admit(NULL, 1, 0, 1, k, v, &x) == PAGEDKV_E_NULL &&
            pagedkv_config(NULL, &x, NULL, NULL, NULL) == PAGEDKV_E_NULL && pagedkv_destroy(NULL) == PAGEDKV_E_NULL,
        "NULL handle");
  CHECK(pagedkv_free_blocks(p, NULL) == PAGEDKV_E_NULL && pagedkv_length(p, id, NULL) == PAGEDKV_E_NULL &&
            pagedkv_refcount(p, 0, NULL) == PAGEDKV_E_NULL && pagedkv_read(p, id, 9, NULL, NULL, NULL, NULL) == PAGEDKV_E_NULL,
        "NULL out");
  CHECK(pagedkv_add(p, id) == PAGEDKV_E_DUPLICATE_SEQ && pagedkv_add(p, -1) == PAGEDKV_E_RANGE, "add");
  CHECK(pagedkv_append(p, -1, 0, k, v) == PAGEDKV_E_RANGE && pagedkv_append(p, UNKNOWN_ID, 0, k, v) == PAGEDKV_E_UNKNOWN_SEQ,
        "append seq");
  CHECK(pagedkv_append(p, id, n, NULL, v) == PAGEDKV_E_NULL && pagedkv_append(p, id, n + 1, k, v) == PAGEDKV_E_POSITION &&
            (n == 0 || pagedkv_append(p, id, n - 1, k, v) == PAGEDKV_E_POSITION),
        "append data/position");
  CHECK(pagedkv_append_chunk(p, id, n, -1, k, v) == PAGEDKV_E_RANGE &&
            pagedkv_append_chunk(p, UNKNOWN_ID, n, 0, NULL, NULL) == PAGEDKV_E_UNKNOWN_SEQ &&
            pagedkv_append_chunk(p, id, n, 1, k, NULL) == PAGEDKV_E_NULL &&
            pagedkv_append_chunk(p, id, n + 2, 1, k, v) == PAGEDKV_E_POSITION &&
            pagedkv_append_chunk(p, id, 12345, 0, NULL, NULL) == PAGEDKV_OK &&
            (n == 0 || pagedkv_append_chunk(p, id, n, INT64_MAX, k, v) == PAGEDKV_E_RANGE),
        "append_chunk");
  CHECK(pagedkv_fork(p, UNKNOWN_ID, UNKNOWN_ID + 1) == PAGEDKV_E_UNKNOWN_SEQ && pagedkv_fork(p, id, id) == PAGEDKV_E_DUPLICATE_SEQ &&
            pagedkv_fork(p, id, -3) == PAGEDKV_E_RANGE && pagedkv_fork(p, -3, UNKNOWN_ID) == PAGEDKV_E_RANGE,
        "fork");
  CHECK(pagedkv_free(p, UNKNOWN_ID) == PAGEDKV_E_UNKNOWN_SEQ && pagedkv_free(p, -1) == PAGEDKV_E_RANGE, "free");
  int64_t len = n < m->w - 1 ? n : m->w - 1;
  if (len > 0) {
    CHECK(pagedkv_read(p, id, len - 1, buf, NULL, NULL, &x) == PAGEDKV_E_CAPACITY && x == len && buf[0] == -99,
          "short read: capacity, length reported, buffer untouched");
  }
  CHECK(pagedkv_read(p, id, -1, NULL, NULL, NULL, &x) == PAGEDKV_E_RANGE &&
            pagedkv_read(p, UNKNOWN_ID, 9, NULL, NULL, NULL, &x) == PAGEDKV_E_UNKNOWN_SEQ,
        "read");
  int64_t tl = pkv_table_len(n, m->b);
  if (tl > 0) {
    CHECK(pagedkv_table(p, id, tl - 1, buf, &x) == PAGEDKV_E_CAPACITY && x == tl && buf[0] == -99, "short table");
  }
  CHECK(pagedkv_table(p, id, 0, NULL, &x) == PAGEDKV_OK && x == tl, "table length query");
  CHECK(pagedkv_refcount(p, -1, &x) == PAGEDKV_E_RANGE && pagedkv_refcount(p, m->nb, &x) == PAGEDKV_E_RANGE, "refcount range");
  CHECK(pagedkv_identity(p, UNKNOWN_ID, &x) == PAGEDKV_E_UNKNOWN_SEQ && pagedkv_length(p, -2, &x) == PAGEDKV_E_RANGE, "getters");
  CHECK(pagedkv_admit(p, id, 0, 1, k, v, &x) == PAGEDKV_E_DUPLICATE_SEQ && pagedkv_admit(p, UNKNOWN_ID, 0, 0, k, v, &x) == PAGEDKV_E_RANGE,
        "admit");
  int64_t w = 0, b = 0, nb = 0, d = 0;
  CHECK(pagedkv_config(p, &w, &b, &nb, &d) == PAGEDKV_OK && w == m->w && b == m->b && nb == m->nb && d == m->d &&
            pagedkv_config(p, NULL, NULL, NULL, NULL) == PAGEDKV_OK,
        "config");
  check_state(m, "bad inputs");
}
