/* pagedkv.h — a paged sliding-window KV pool shared by many sequences: the C ABI that
 * `--target paged-c:PATH.so` fuzzes (DESIGN §4 "Paged protocol").
 *
 * Semantics (DESIGN §1 "Paged caches", docs/paged.md): a pool of num_blocks blocks of
 * block_size positions, each slot a position and a key and a value of width float32. A sequence
 * s (an id >= 0) has n_s, the tokens it has seen, an identity tag (0 unless admitted), and a
 * block table of ceil(n_s / block_size) entries: entry j is the physical block holding
 * positions j*B .. j*B+B-1, or none (-1) once freed. The next query (position n_s) needs
 * positions max(0, n_s-W+1) .. n_s-1, lastWindow (W-1) of the history: what pagedkv_read
 * returns. An append takes a free block when it starts a logical block, copies a shared block
 * before writing into it (copy on write), and then releases, eagerly, every block all of whose
 * positions are below n_s-W+1; a block whose reference count reaches 0 is free. Free blocks are
 * taken least-recently-freed first (at create: block 0 first; the blocks one op frees join the
 * free list in table order).
 *
 * Prefix cache (pagedkv_admit): a block filled by a sequence keeps the content identity of that
 * sequence's prefix up to the block's end (identity tag and every entry of positions
 * 0 .. (j+1)*B-1) while it holds those entries, also while free; it loses it when it is taken
 * for another use (evicted). The reference compares a cached block with a prompt exactly on the
 * block's own entries (positions and key/value bits) and the identity tag, and on the prefix
 * before it through a 128-bit chained hash (as vLLM and SGLang chain block hashes): a false hit
 * needs a 128-bit collision.
 *
 * Contract for every implementation of this header:
 *   - every call returns a pagedkv_status code; none aborts or exits;
 *   - a call that returns an error changes nothing (tables, reference counts, the free list and
 *     its order, the prefix cache, every sequence's reads); an append or chunk that finds the
 *     pool exhausted is such an error (a chunk is all-or-nothing);
 *   - no global state: pools are independent;
 *   - sizes are overflow-checked: a pool whose arrays would exceed PTRDIFF_MAX bytes is
 *     PAGEDKV_E_NOMEM.
 * Checks come in this order, the first failing one is returned: a null handle or output
 * pointer (E_NULL); a negative sequence id or count, or a block id outside 0 .. N-1 (E_RANGE);
 * an unknown or duplicate sequence; null data where data is needed (E_NULL); a position
 * (E_POSITION); positions that would overflow int64 (E_RANGE); memory; exhaustion.
 *
 * The region between the cffi markers is plain C declarations only, so the Python bindings
 * (impl/_paged_build.py, and cffi ABI mode for paged-c:PATH.so) read their declarations from
 * this file and cannot drift from it.
 */
#ifndef PAGEDKV_H
#define PAGEDKV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cffi:begin */
typedef struct pagedkv pagedkv_t;

typedef enum {
  PAGEDKV_OK = 0,
  PAGEDKV_E_NULL = 1,          /* null handle, or a null pointer where data is needed */
  PAGEDKV_E_CONFIG = 2,        /* window, block_size, num_blocks or width < 1 */
  PAGEDKV_E_NOMEM = 3,         /* allocation failed, or an array would exceed PTRDIFF_MAX bytes */
  PAGEDKV_E_UNKNOWN_SEQ = 4,   /* no sequence with this id */
  PAGEDKV_E_DUPLICATE_SEQ = 5, /* a sequence with this id exists already (add, fork's dst, admit) */
  PAGEDKV_E_POSITION = 6,      /* position is not the sequence's next one (gap or duplicate) */
  PAGEDKV_E_EXHAUSTED = 7,     /* the op needs a free block and none is free */
  PAGEDKV_E_CAPACITY = 8,      /* caller's buffer is smaller than the result */
  PAGEDKV_E_RANGE = 9          /* negative id or count, block id out of range, admit of 0 entries,
                                  or positions would overflow int64 */
} pagedkv_status;

/* Static text for a status code (never NULL; unknown codes get a generic text). */
const char *pagedkv_strerror(int code);

/* New empty pool (no sequences, every block free). On success *out is the handle; on error
 * *out is untouched. */
int pagedkv_create(int64_t window, int64_t block_size, int64_t num_blocks, int64_t width,
                   pagedkv_t **out);

/* Free the pool and every sequence in it. NULL is PAGEDKV_E_NULL (and harmless). */
int pagedkv_destroy(pagedkv_t *p);

/* The pool's configuration; any out pointer may be NULL to skip it. */
int pagedkv_config(const pagedkv_t *p, int64_t *window, int64_t *block_size, int64_t *num_blocks,
                   int64_t *width);

/* A new sequence: n = 0, empty table, identity 0. */
int pagedkv_add(pagedkv_t *p, int64_t seq);

/* Append one entry at position pos == n_seq; key/value: width floats. May take a free block
 * (a new logical block, or the copy of a shared one): E_EXHAUSTED if none is free. */
int pagedkv_append(pagedkv_t *p, int64_t seq, int64_t pos, const float *key, const float *value);

/* Append n entries at positions first_pos .. first_pos+n-1 (first_pos == n_seq): exactly n
 * appends in order (blocks released part-way are reused later in the chunk), or, if any of
 * them would find the pool exhausted, nothing at all. keys/values: n x width, row-major.
 * n == 0 is a no-op returning PAGEDKV_OK once the sequence is known (keys/values may be NULL). */
int pagedkv_append_chunk(pagedkv_t *p, int64_t seq, int64_t first_pos, int64_t n,
                         const float *keys, const float *values);

/* dst starts as a copy of src: its n, identity and table; every block in it gets refcount + 1. */
int pagedkv_fork(pagedkv_t *p, int64_t src, int64_t dst);

/* Drop the sequence: every block in its table gets refcount - 1 (free at 0). */
int pagedkv_free(pagedkv_t *p, int64_t seq);

/* The entries the next query needs, oldest first: positions[len], keys and values[len x width],
 * len = min(n_seq, W-1). Any of the three may be NULL to skip it. If capacity (in entries) <
 * len: PAGEDKV_E_CAPACITY, buffers untouched, *out_len = len. On success *out_len = len. */
int pagedkv_read(const pagedkv_t *p, int64_t seq, int64_t capacity, int64_t *positions,
                 float *keys, float *values, int64_t *out_len);

/* The block table: blocks[j] = physical block of logical block j, -1 for none; len =
 * ceil(n_seq / B). blocks may be NULL to learn len; capacity and out_len as in pagedkv_read. */
int pagedkv_table(const pagedkv_t *p, int64_t seq, int64_t capacity, int64_t *blocks,
                  int64_t *out_len);

int pagedkv_free_blocks(const pagedkv_t *p, int64_t *out);                /* blocks with refcount 0 */
int pagedkv_length(const pagedkv_t *p, int64_t seq, int64_t *out);        /* n_seq */
int pagedkv_identity(const pagedkv_t *p, int64_t seq, int64_t *out);      /* identity tag of seq */
int pagedkv_refcount(const pagedkv_t *p, int64_t block, int64_t *out);    /* tables referencing block */

/* Prefix cache: create seq (which must not exist) from the longest valid cached prefix of a
 * prompt of n >= 1 entries at positions 0 .. n-1 (keys/values n x width) under identity tag
 * `identity`. The hit length L is the largest multiple of B with L <= n-1 such that every block
 * covering positions max(0, L-W+1) .. L-1 is a cached block with the prompt's content identity
 * (L = 0 always qualifies). seq gets n = L, that identity, and a table whose entries for those
 * blocks are the cached blocks (taken off the free list if free; refcount + 1) and -1 before
 * them (of several cached blocks with that content, a referenced one first, then the lowest id).
 * *hit_len = L; the caller then appends entries L .. n-1. Takes no free block for another use,
 * so it never returns E_EXHAUSTED. */
int pagedkv_admit(pagedkv_t *p, int64_t seq, int64_t identity, int64_t n, const float *keys,
                  const float *values, int64_t *hit_len);
/* cffi:end */

#ifdef __cplusplus
}
#endif

#endif /* PAGEDKV_H */
