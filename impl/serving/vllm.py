"""vLLM's real KV-cache manager as a paged cache (DESIGN §4 "Paged protocol"): targets ``vllm:swa``, ``vllm:hybrid``.

What is driven: ``vllm.v1.core.kv_cache_manager.KVCacheManager`` with its coordinator, its
``BlockPool`` and its single-type managers, over a ``KVCacheConfig`` of

* ``VllmSwa``: one sliding-window group (``SlidingWindowSpec`` -> ``SlidingWindowManager``,
  ``UnitaryKVCacheCoordinator``);
* ``VllmHybrid``: a full-attention group and a sliding-window group sharing one pool
  (``HybridKVCacheCoordinator``), as a Gemma-2/3 or Mistral-interleaved model gets.

No model and no GPU: vLLM hands out block *ids*; :class:`~impl.serving._base.SimStore` is the KV
tensor, written where vLLM's slot mapping puts each token (``block_ids[pos // block_size]``, slot
``pos % block_size``: ``vllm/v1/worker/block_table.py`` ComputeSlotMappingKernel, the lines
``virtual_block_indices = pos // virtual_block_size`` and ``slot_ids = block_numbers *
KV_CACHE_BLOCK_SIZE + local_block_offsets``) and read back through vLLM's own block table
(``KVCacheManager.get_block_ids``), so a block vLLM freed or reused too early reads wrong.

Convention (DESIGN §6): ``sliding_window = W``. vLLM's model code passes the HF config's value
straight through: ``vllm/model_executor/models/gemma2.py`` ``sliding_window = config.sliding_window
if is_sliding else None`` -> ``Attention(per_layer_sliding_window=sliding_window)``
(``vllm/model_executor/layers/attention/attention.py``: ``sliding_window = per_layer_sliding_window``,
``self.sliding_window = sliding_window``) -> ``SlidingWindowSpec(..., sliding_window=self.sliding_window)``
(same file, ``get_kv_cache_spec``). One rule for every release.

The scheduler loop copied (``vllm/v1/core/sched/scheduler.py``, 0.33.0):

* a new request: ``kv_cache_manager.get_computed_blocks(request)`` then
  ``allocate_slots(request, num_new_tokens, num_new_computed_tokens=..., new_computed_blocks=...)``
  (the waiting-queue branch, ``new_blocks = self.kv_cache_manager.allocate_slots(request,
  num_tokens_past_hit, num_new_computed_tokens=..., new_computed_blocks=...)``);
* a running request: ``allocate_slots(request, num_new_tokens)`` (the running branch); a ``None``
  result is "cannot be scheduled" (the scheduler preempts; here: pool exhausted);
* ``_update_after_schedule``: ``request.num_computed_tokens += num_scheduled_token`` (the step is
  taken as finished at once: ``num_in_flight_tokens`` stays 0);
* a sampled token: ``request.append_output_token_ids(token)`` (which extends ``block_hashes``);
* a finished request: ``kv_cache_manager.free(request)``.

Adapter choices (each documented because it changes what a checker sees):

* ``append(s, pos, ...)`` is one decode step of token ``pos``; ``append_chunk`` one step of ``k``
  tokens (vLLM allocates the whole chunk's blocks at once, so a chunk may need more free blocks than
  the reference, which reuses blocks freed part-way: an efficiency difference, not a mismatch).
  The first entries of a sequence are its prompt; later ones are appended as output tokens.
* Eager freeing: after each successful step the adapter calls vLLM's own
  ``kv_cache_manager.remove_skipped_blocks(request_id, num_computed_tokens)`` (the call
  ``allocate_slots`` makes at the start of the next step, and the scheduler makes before handing a
  block table to a KV connector), so the table after an op is the spec's (blocks wholly below
  ``n - W + 1`` freed), and a failed step frees nothing.
* Pool exhaustion rolls back: the tokens the op added to the ``Request`` (``_output_token_ids``,
  ``_all_token_ids``, ``block_hashes``) are removed again; vLLM's ``allocate_slots`` returns
  ``None`` before it changes any block state. Nothing changes.
* Physical ids: vLLM's block 0 is its null block (``BlockPool.null_block``, a freed slot of a
  table). The pool is built with ``N + 1`` blocks so ``N`` are usable; ``table()`` reports vLLM id
  ``b`` as ``b - 1`` and the null block as ``None``.
* ``admit(s, prompt, identity)``: a lookup ``Request`` of the whole prompt (``cache_salt`` =
  the identity, vLLM's extra key of the first block hash, ``None`` for identity 0) gets
  ``get_computed_blocks``; the hit's blocks are then adopted by the sequence's ``Request`` (the
  prompt's first ``L`` tokens) with ``allocate_slots(request, 0, num_new_computed_tokens=L,
  new_computed_blocks=blocks)``, the scheduler's adoption of a hit. Returns ``L``.
* Token ids: an entry's token id is its payload interned in the pool's table
  (:class:`~impl.serving._base.TokenIds`: the ``i``-th distinct ``(key, value)`` gets id ``i``, below
  ``2**31``), so equal payloads hash into equal blocks and different ones never do, on every release
  (0.34.0 holds a ``Request``'s ids in an int32 ``TokenBuffer``, ``vllm/v1/token_buffer.py``).
* ``fork``: vLLM v1 has no block-table fork (parallel sampling shares through the prefix cache):
  :class:`~impl.serving._base.Unsupported`.

Efficiency expectations: ``VllmSwa`` holds at most ``ceil((W-1)/B) + 1`` blocks per sequence after
each op; a chunk may be refused where the reference fits it. ``VllmHybrid``'s full-attention group
holds every block of every live sequence in the same pool (exhaustion comes ``~n/B`` blocks
earlier than for the reference), and its hits are bounded by full attention (every block from 0
cached), so a shorter hit than the reference's is expected there, not a finding; its sliding group
obeys the same bound as ``VllmSwa``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from impl.engines import EngineIncompatible
from impl.serving._base import (PoolExhaustedError, SeqRegistry, SimStore, Unsupported, as_entries, check_config, check_prompt,
                                TokenIds, exhausted, not_configured)
from impl.serving._imports import import_vllm

MAX_MODEL_LEN = 1 << 40
MAX_TOKENS = 1 << 40


@dataclass
class _Seq:
    rid: str
    salt: str | None
    req: Any = None  # vllm.v1.request.Request, created by the first step (or by a hit)
    n: int = 0


@dataclass
class _Stats:
    null_writes: list = field(default_factory=list)  # (seq, pos, group): a token vLLM gave no slot


class _VllmPaged:
    """One ``KVCacheManager`` over the groups of :attr:`groups` ("full" / "swa"); read through "swa"."""

    groups: tuple[str, ...] = ("swa",)
    ops = ("configure", "add", "append", "append_chunk", "free", "read", "table", "free_blocks", "admit")
    #: The optional paged ops the harness may draw (DESIGN §4): ``fork`` exists only to refuse.
    paged_ops = ("admit",)
    #: What an append raises when vLLM refuses the allocation (``allocate_slots`` returned None).
    exhausted_error = PoolExhaustedError
    name = "vllm"

    def __init__(self):
        self._m = None
        self._cfg = (0, 0, 0, 0)
        self._seqs: dict[int, _Seq] = {}
        self._reg = SeqRegistry()
        self._gen = 0
        self.stats = _Stats()

    # -- setup ------------------------------------------------------------------------------
    def configure(self, window: int, block_size: int, num_blocks: int, width: int) -> None:
        W, B, N, D = check_config(window, block_size, num_blocks, width)
        v = import_vllm()
        self._v = v
        import torch

        specs = []
        for g in self.groups:
            common = dict(block_size=B, num_kv_heads=1, head_size=D, dtype=torch.float32)
            specs.append(v.SlidingWindowSpec(sliding_window=self.engine_window(W), **common) if g == "swa"
                         else v.FullAttentionSpec(**common))
        cfg = v.KVCacheConfig(num_blocks=N + 1, kv_cache_tensors=[], kv_cache_groups=[
            v.KVCacheGroupSpec(layer_names=[f"model.layers.{i}.self_attn"], kv_cache_spec=s)
            for i, s in enumerate(specs)])
        try:
            m = v.KVCacheManager(cfg, max_model_len=MAX_MODEL_LEN, scheduler_block_size=B, hash_block_size=B,
                                 enable_caching=True)
        except (TypeError, AttributeError, AssertionError, ValueError) as e:
            raise EngineIncompatible("vllm", v.release, "KVCacheManager(kv_cache_config, ...)",
                                     f"refused a {'+'.join(self.groups)} config with block_size {B}, "
                                     f"{N + 1} blocks: {type(e).__name__}: {e}") from e
        hash_fn = v.get_hash_fn_by_name("sha256")
        v.init_none_hash(hash_fn)
        self._hasher = v.get_request_block_hasher(B, hash_fn)
        if m.block_pool.get_num_free_blocks() != N:
            raise EngineIncompatible("vllm", v.release, "BlockPool", f"a pool of {N + 1} blocks has "
                                     f"{m.block_pool.get_num_free_blocks()} free, expected {N} (one null block)")
        self._m = m
        self._cfg = (W, B, N, D)
        self._gid = {g: i for i, g in enumerate(self.groups)}
        self._store = SimStore(N + 1, B, D)
        self._seqs, self._reg, self.stats = {}, SeqRegistry(), _Stats()
        # token ids of this manager's requests (one table per pool: impl/serving/_base.py TokenIds)
        self._tok = TokenIds("vllm", v.release, "Request(prompt_token_ids)")

    @staticmethod
    def engine_window(W: int) -> int:
        """The spec's ``W`` as vLLM's ``sliding_window`` (DESIGN §6, the module docstring cites the source)."""
        return W

    def _pool(self, what: str):
        if self._m is None:
            raise not_configured(what)
        return self._m

    def _request(self, rid: str, tokens: list[int], salt: str | None):
        v = self._v
        return v.Request(rid, tokens, v.SamplingParams(max_tokens=MAX_TOKENS), None, cache_salt=salt,
                         block_hasher=self._hasher)

    def _new_rid(self, seq: int) -> str:
        self._gen += 1
        return f"seq{seq}.{self._gen}"

    # -- the paged protocol --------------------------------------------------------------------
    def add(self, seq: int) -> None:
        self._pool("add")
        seq = self._reg.absent("add", seq)
        self._seqs[seq] = _Seq(self._new_rid(seq), None)
        self._reg.n[seq] = 0

    def append(self, seq: int, pos: int, key: Any, value: Any) -> None:
        self._pool("append")
        seq = self._reg.exists("append", seq)
        self._step(seq, as_entries([(pos, key, value)], self._seqs[seq].n, self._cfg[3], "append"), "append")

    def append_chunk(self, seq: int, entries: Iterable) -> None:
        self._pool("append_chunk")
        seq = self._reg.exists("append_chunk", seq)
        es = as_entries(list(entries), self._seqs[seq].n, self._cfg[3], "append_chunk")
        if es:
            self._step(seq, es, "append_chunk")

    def _step(self, seq: int, es: list, what: str) -> None:
        """One scheduler step computing the tokens of ``es`` (positions ``n .. n+k-1``)."""
        m, st, k = self._m, self._seqs[seq], len(es)
        toks = [self._tok(e[1], e[2]) for e in es]
        req = st.req
        if req is None:
            req = self._request(st.rid, toks, st.salt)
            mark = None
        else:
            try:
                mark = (len(req._output_token_ids), len(req._all_token_ids), len(req.block_hashes))
            except AttributeError as e:
                raise EngineIncompatible("vllm", self._v.release, "Request._output_token_ids/_all_token_ids",
                                         f"the adapter rolls a refused step back through them: {e}") from e
            req.append_output_token_ids(toks)
        got = m.allocate_slots(req, k)
        if got is None:
            if mark is None:
                m.free(req)  # drop any empty bookkeeping the refused request left
            else:
                del req._output_token_ids[mark[0]:]
                del req._all_token_ids[mark[1]:]
                del req.block_hashes[mark[2]:]
            raise exhausted(what, seq, f"needs blocks for {k} token(s) at position {st.n}",
                            m.block_pool.get_num_free_blocks(), self._cfg[2])
        st.req = req
        req.status = self._v.RequestStatus.RUNNING
        ids = m.get_block_ids(st.rid)
        B = self._cfg[1]
        for g, gi in self._gid.items():
            table = ids[gi]
            for p, key, val in es:
                b = table[p // B] if p // B < len(table) else 0
                if b == 0:
                    self.stats.null_writes.append((seq, p, g))
                self._store.write(b, p, key, val)
        req.num_computed_tokens += k
        st.n += k
        self._reg.n[seq] = st.n
        m.remove_skipped_blocks(st.rid, req.num_computed_tokens)

    def fork(self, src: int, dst: int) -> None:
        raise Unsupported(type(self).__name__, "fork", "vLLM v1's KVCacheManager has no block-table fork "
                          f"(parallel sampling shares blocks through the prefix cache); ops = {self.ops}")

    def free(self, seq: int) -> None:
        self._pool("free")
        seq = self._reg.exists("free", seq)
        st = self._seqs.pop(seq)
        del self._reg.n[seq]
        if st.req is not None:
            self._m.free(st.req)

    def _table_ids(self, seq: int, group: str) -> list[int]:
        st = self._seqs[seq]
        if st.req is None:
            return []
        return list(self._m.get_block_ids(st.rid)[self._gid[group]])

    def read(self, seq: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Positions ``max(0, n-W+1) .. n-1`` gathered through vLLM's sliding-window block table."""
        self._pool("read")
        seq = self._reg.exists("read", seq)
        n = self._seqs[seq].n
        return self._store.gather(self._table_ids(seq, "swa"), max(0, n - self._cfg[0] + 1), n)

    def read_full(self, seq: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """``VllmHybrid``: every position ``0 .. n-1`` through the full-attention group's table."""
        self._pool("read_full")
        seq = self._reg.exists("read_full", seq)
        if "full" not in self._gid:
            raise Unsupported(type(self).__name__, "read_full", "this adapter has no full-attention group")
        return self._store.gather(self._table_ids(seq, "full"), 0, self._seqs[seq].n)

    def table(self, seq: int, group: str = "swa") -> list[int | None]:
        """vLLM's block table of ``group`` as pool ids ``0 .. N-1`` (vLLM id - 1), the null block as ``None``."""
        self._pool("table")
        seq = self._reg.exists("table", seq)
        return [None if b == 0 else b - 1 for b in self._table_ids(seq, group)]

    def free_blocks(self) -> int:
        return self._pool("free_blocks").block_pool.get_num_free_blocks()

    def sequences(self) -> list[int]:
        return sorted(self._seqs)

    def length(self, seq: int) -> int:
        self._pool("length")
        return self._seqs[self._reg.exists("length", seq)].n

    # -- prefix cache ---------------------------------------------------------------------------
    @staticmethod
    def _salt(identity: int) -> str | None:
        return None if identity == 0 else f"kvwindow-identity-{identity}"

    def admit(self, seq: int, entries: Iterable, identity: int = 0) -> int:
        m = self._pool("admit")
        seq = self._reg.absent("admit", seq)
        if isinstance(identity, bool) or not isinstance(identity, (int, np.integer)):
            raise TypeError(f"identity must be an int, got {identity!r}")
        es = check_prompt("admit", list(entries), self._cfg[3])
        toks = [self._tok(e[1], e[2]) for e in es]
        salt, rid = self._salt(int(identity)), self._new_rid(seq)
        blocks, hit, _boundary = m.get_computed_blocks(self._request(rid + ".lookup", toks, salt))
        st = _Seq(rid, salt)
        if hit > 0:
            req = self._request(rid, toks[:hit], salt)
            got = m.allocate_slots(req, 0, num_new_computed_tokens=hit, new_computed_blocks=blocks)
            if got is None:
                m.free(req)
                raise exhausted("admit", seq, f"adopts a hit of {hit} tokens", m.block_pool.get_num_free_blocks(),
                                self._cfg[2])
            req.status = self._v.RequestStatus.RUNNING
            req.num_computed_tokens = hit
            m.remove_skipped_blocks(rid, hit)
            st.req, st.n = req, hit
        self._seqs[seq] = st
        self._reg.n[seq] = st.n
        return hit

    def longest_valid_hit(self, entries: Iterable, identity: int = 0) -> int:
        """The longest hit the spec allows against what vLLM's pool holds cached right now: the largest
        ``L`` (a multiple of ``B``, ``<= m-1``) whose blocks covering ``max(0, L-W+1) .. L-1`` are in
        vLLM's hash table for every group read through (``BlockPool.get_cached_block``; the full
        group of ``VllmHybrid`` needs every block from 0). For efficiency findings."""
        m = self._pool("longest_valid_hit")
        W, B = self._cfg[0], self._cfg[1]
        es = check_prompt("longest_valid_hit", list(entries), self._cfg[3])
        req = self._request("probe", [self._tok(e[1], e[2]) for e in es], self._salt(int(identity)))
        hashes = req.block_hashes
        cached = {g: [m.block_pool.get_cached_block(h, [gi]) is not None for h in hashes]
                  for g, gi in self._gid.items()}
        best = 0
        for L in range(B, len(es), B):
            j0 = 0 if "full" in self._gid else max(0, L - W + 1) // B
            if all(cached["swa"][j] for j in range(max(0, L - W + 1) // B, L // B)) and \
                    all(cached.get("full", cached["swa"])[j] for j in range(j0, L // B)):
                best = L
        return best

    def held_blocks(self, seq: int) -> int:
        """Blocks of the sliding group's table that are not the null block (efficiency bound)."""
        return sum(b is not None for b in self.table(seq))


class VllmSwa(_VllmPaged):
    """``vllm:swa``: one sliding-window group (``SlidingWindowManager``); see the module docstring."""

    groups = ("swa",)


class VllmHybrid(_VllmPaged):
    """``vllm:hybrid``: full-attention + sliding-window groups in one pool (``HybridKVCacheCoordinator``);
    ``read`` goes through the sliding group, :meth:`read_full` through the full group."""

    groups = ("full", "swa")
    ops = _VllmPaged.ops + ("read_full",)
    #: The checker counts the full group's blocks as neither free nor sliding (fuzz/paged/checks.py).
    paged_queries = ("held_elsewhere",)

    def held_elsewhere(self) -> list[int]:
        """The pool ids of every block a full-attention table references (each once; they share the pool)."""
        self._pool("held_elsewhere")
        return sorted({b - 1 for s in self._seqs for b in self._table_ids(s, "full") if b != 0})
