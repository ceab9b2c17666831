"""SGLang's real SWA allocator and out-of-window eviction as a paged cache: target ``sglang:swa``.

What is driven (SGLang 0.5.23, ``sglang.srt.mem_cache``):

* ``swa_memory_pool.SWAKVPool`` (a sliding-window layer and a full-attention layer, tiny CPU
  tensors) and ``allocator.swa.SWATokenToKVPoolAllocator`` over it: the full-attention pool holds
  every token, the SWA pool ``N`` pages of ``B`` tokens; ``full_to_swa_index_mapping`` pairs them;
* ``memory_pool.ReqToTokenPool``: the request's token-to-slot row (SGLang's block table);
* ``managers.schedule_batch.ReqKvInfo``: the request's KV record (row, allocated length, the SWA
  eviction cursor); the ``Req`` handed to SGLang's functions is a stand-in holding only ``.kv``
  (every function called here reads nothing else of the request);
* the allocation and eviction functions the scheduler calls: ``allocator.alloc_extend`` (a
  prefill chunk, ``alloc_paged_token_slots_extend`` in ``mem_cache/allocation.py``),
  ``allocator.alloc_decode`` (a decode step, ``alloc_paged_token_slots_decode``),
  ``allocator.alloc`` (page size 1, ``alloc_token_slots``), ``req_to_token_pool.write`` (both
  ``alloc_for_*`` functions), ``common.free_swa_out_of_window_slots`` (the out-of-window eviction:
  ``ScheduleBatch._evict_swa`` -> ``tree_cache.evict_sliding_windows``; with no prefix sharing,
  ``evict_threshold = pre_len - sliding_window_size``, floored to a page), and on finish
  ``common.free_kv_row_segments`` + ``req_to_token_pool.free`` (``release_kv_cache``).

Reads go through SGLang's own tables: position ``p`` -> ``req_to_token[row, p]`` (a full-pool slot)
-> ``full_to_swa_index_mapping`` (``translate_loc_from_full_to_swa``, what the attention backends
call for a sliding layer) -> the SWA slot, where :class:`~impl.serving._base.SimStore` holds what
was written there. An evicted position maps to SWA slot 0 (the padding slot) and reads wrong.

Convention (DESIGN §6): ``sliding_window_size = W - 1``. SGLang's models define
``get_attention_sliding_window_size(config)`` as ``config.sliding_window - 1``
(``sglang/srt/models/gemma2.py``), ``resolve_sliding_window_size`` takes it
(``model_executor/model_runner_components/load_model_utils.py``: ``sliding_window_size =
model.get_attention_sliding_window_size()``), ``ModelRunner.sliding_window_size`` stores it and the
scheduler's eviction reads it. One rule for every release.

Adapter choices:

* The first entries of a sequence are a prefill (``alloc_extend``, or ``alloc`` at page size 1);
  a single later entry is a decode step (``alloc_decode``), a later chunk an extend from the
  sequence's length (chunked prefill).
* Eager eviction: after each step ``free_swa_out_of_window_slots(req, pre_len=n, ...)`` (the call
  ``alloc_for_decode_default`` makes through ``batch.maybe_evict_swa()`` before the next step, with
  ``pre_len = seqlen - 1``, the tokens already in the cache), so after an op the SWA pages are the
  spec's, and a failed step frees nothing.
* Pool exhaustion is pre-checked, as the scheduler does before it builds a batch: the pages a step
  needs (SGLang's ``get_num_new_pages``) against ``allocator.new_pages_available`` (tokens against
  ``full_available_size`` / ``swa_available_size`` at page size 1); a refused step calls nothing.
  (SGLang's allocators themselves answer an empty pool with ``None``, the scheduler with an
  out-of-memory ``RuntimeError``.)
* ``free_blocks()`` is the SWA pool's free pages; ``table()`` the SWA page of each logical block
  (SGLang page ``k`` reported as ``k - 1``; page 0 is SGLang's padding), ``None`` once evicted.
  The full-attention pool has ``FULL_TOKENS`` slots (not part of ``N``); :meth:`read_full` reads
  every position through it.
* ``fork`` and ``admit`` are :class:`~impl.serving._base.Unsupported`: SGLang has no table fork,
  and its prefix cache (the SWA radix tree and its match validator) is not driven by this adapter
  (docs/serving.md says why).

Efficiency expectations: at most ``ceil((W-1)/B) + 1`` SWA pages per sequence after each op; a chunk
needs pages for all its tokens at once (it may be refused where the reference fits it).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Iterable

import numpy as np

from impl.engines import EngineIncompatible
from impl.paged import E_RANGE, RangeError
from impl.serving._base import (PoolExhaustedError, SeqRegistry, SimStore, Unsupported, as_entries, check_config, exhausted,
                                not_configured)
from impl.serving._imports import import_sglang

FULL_TOKENS = 1 << 15  # the full-attention pool's slots (every token of every live sequence)
MAX_CONTEXT = 1 << 14  # ReqToTokenPool row length: positions a sequence may reach
MAX_ROWS = 64  # ReqToTokenPool rows: live sequences


@dataclass
class _Seq:
    req: Any  # a stand-in Req: SimpleNamespace(kv=ReqKvInfo())
    n: int = 0


class SglangSwa:
    """``sglang:swa``: SGLang's ``SWATokenToKVPoolAllocator`` and window eviction; see the module docstring."""

    ops = ("configure", "add", "append", "append_chunk", "free", "read", "table", "free_blocks", "read_full")
    #: No optional paged op is drawn (DESIGN §4): ``fork`` and ``admit`` exist only to refuse.
    paged_ops = ()
    #: What an append raises when SGLang's allocator refuses (``alloc`` returned None).
    exhausted_error = PoolExhaustedError
    #: The most tokens one sequence may reach: the adapter's ``ReqToTokenPool`` row (its memory is allocated per
    #: pool, 64 rows; a longer row costs tens of ms a case). The harness leaves out cases that go further.
    max_seq_tokens = MAX_CONTEXT
    name = "sglang"

    def __init__(self):
        self._al = None
        self._cfg = (0, 0, 0, 0)
        self._seqs: dict[int, _Seq] = {}
        self._reg = SeqRegistry()

    @staticmethod
    def engine_window(W: int) -> int:
        """The spec's ``W`` as SGLang's ``sliding_window_size`` (DESIGN §6; the module docstring cites it)."""
        return W - 1

    def configure(self, window: int, block_size: int, num_blocks: int, width: int) -> None:
        W, B, N, D = check_config(window, block_size, num_blocks, width)
        s = import_sglang()
        import torch

        self._t = torch
        try:
            pool = s.SWAKVPool(size=FULL_TOKENS, size_swa=N * B, page_size=B, dtype=torch.float32, head_num=1,
                               head_dim=1, swa_attention_layer_ids=[0], full_attention_layer_ids=[1], device="cpu")
            al = s.SWATokenToKVPoolAllocator(FULL_TOKENS, N * B, B, torch.float32, "cpu", pool, need_sort=False)
            r2t = s.ReqToTokenPool(size=MAX_ROWS, max_context_len=MAX_CONTEXT, device="cpu", enable_memory_saver=False)
        except (TypeError, AssertionError, AttributeError, ValueError) as e:
            raise EngineIncompatible("sglang", s.release, "SWAKVPool / SWATokenToKVPoolAllocator / ReqToTokenPool",
                                     f"refused page size {B}, {N * B} SWA tokens: {type(e).__name__}: {e}") from e
        if al.swa_available_size() != N * B:
            raise EngineIncompatible("sglang", s.release, "SWATokenToKVPoolAllocator.swa_available_size",
                                     f"{al.swa_available_size()} for a pool of {N * B} SWA tokens")
        self._s, self._al, self._r2t = s, al, r2t
        self._cfg = (W, B, N, D)
        self._swa = SimStore(N * B + B + 1, 1, D)  # SWA slots (0: padding)
        self._full = SimStore(FULL_TOKENS + B + 1, 1, D)
        self._seqs, self._reg = {}, SeqRegistry()

    def _pool(self, what: str):
        if self._al is None:
            raise not_configured(what)
        return self._al

    # -- the paged protocol --------------------------------------------------------------------
    def add(self, seq: int) -> None:
        self._pool("add")
        seq = self._reg.absent("add", seq)
        self._seqs[seq] = _Seq(SimpleNamespace(kv=self._s.ReqKvInfo(), rid=f"seq{seq}"))
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
        t, al, r2t, s = self._t, self._al, self._r2t, self._s
        W, B, N, _ = self._cfg
        st, k = self._seqs[seq], len(es)
        n, kv = st.n, st.req.kv
        if n + k > MAX_CONTEXT:
            raise RangeError(f"{what}: sequence {seq} would reach {n + k} tokens, past the adapter's "
                             f"ReqToTokenPool rows of {MAX_CONTEXT}", E_RANGE, what)
        # Pre-check (nothing is allocated when it fails): pages, as get_num_new_pages counts them.
        if B == 1:
            fits = k <= al.full_available_size() and k <= al.swa_available_size()
        else:
            pages = s.get_num_new_pages(seq_lens=t.tensor([n + k]), page_size=B, prefix_lens=t.tensor([n]))
            fits = al.new_pages_available(pages, pages)
        if fits and not kv.holds_kv and r2t.available_size() < 1:
            raise RangeError(f"{what}: no ReqToTokenPool row left for sequence {seq} ({MAX_ROWS} live sequences)",
                             E_RANGE, what)
        if not fits:
            raise exhausted(what, seq, f"needs pages for {k} token(s) at position {n}", self.free_blocks(), N)
        if not kv.holds_kv:
            r2t.alloc([st.req])
        row = kv.req_pool_idx
        if B == 1:
            loc = al.alloc(k)
        elif n > 0 and k == 1:
            last = r2t.req_to_token[row, n - 1:n].to(t.int64)
            loc = al.alloc_decode(t.tensor([n + 1]), t.tensor([n + 1]), last)
        else:
            last = r2t.req_to_token[row, n - 1:n].to(t.int64) if n > 0 else t.tensor([-1])
            loc = al.alloc_extend(t.tensor([n]), t.tensor([n]), t.tensor([n + k]), t.tensor([n + k]), last, k)
        if loc is None:  # the pre-check said it fits: SGLang disagrees with its own counts
            raise EngineIncompatible("sglang", s.release, "allocator.alloc_*", f"refused {k} token(s) after "
                                     "new_pages_available said they fit")
        r2t.write((row, slice(n, n + k)), loc.to(t.int32))
        kv.kv_allocated_len += k
        kv.kv_committed_len = kv.kv_allocated_len
        swa = al.translate_loc_from_full_to_swa(loc.to(t.int64)).tolist()
        for (p, key, val), f, w in zip(es, loc.tolist(), swa):
            self._full.write(int(f), p, key, val)
            self._swa.write(int(w), p, key, val)
        st.n = n + k
        self._reg.n[seq] = st.n
        s.free_swa_out_of_window_slots(st.req, st.n, sliding_window_size=self.engine_window(W), page_size=B,
                                       req_to_token_pool=r2t, token_to_kv_pool_allocator=al,
                                       supports_prefix_sharing=False)

    def fork(self, src: int, dst: int) -> None:
        raise Unsupported(type(self).__name__, "fork", f"SGLang has no block-table fork; ops = {self.ops}")

    def admit(self, seq: int, entries: Iterable, identity: int = 0) -> int:
        raise Unsupported(type(self).__name__, "admit", "this adapter does not drive SGLang's SWA radix cache "
                          f"(docs/serving.md); ops = {self.ops}")

    def free(self, seq: int) -> None:
        self._pool("free")
        seq = self._reg.exists("free", seq)
        st = self._seqs.pop(seq)
        del self._reg.n[seq]
        kv = st.req.kv
        if kv.holds_kv:
            row = self._r2t.req_to_token[kv.req_pool_idx]
            self._s.free_kv_row_segments(self._al, [(row[0:st.n].to(self._t.int64), 0)],
                                         swa_evicted_seqlen=kv.get_evicted_seqlen(self._s.SWA),
                                         swa_dead_lo=kv.swa_dead_lo(self._cfg[1]))
            self._r2t.free(st.req)
            kv.mark_kv_released()

    def _slots(self, seq: int, lo: int, hi: int) -> tuple[list[int], list[int]]:
        st = self._seqs[seq]
        if hi <= lo or not st.req.kv.holds_kv:
            return [], []
        t = self._t
        full = self._r2t.req_to_token[st.req.kv.req_pool_idx, lo:hi].to(t.int64)
        return full.tolist(), self._al.translate_loc_from_full_to_swa(full).tolist()

    def read(self, seq: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Positions ``max(0, n-W+1) .. n-1`` through ``req_to_token`` and the full-to-SWA mapping."""
        self._pool("read")
        seq = self._reg.exists("read", seq)
        n = self._seqs[seq].n
        lo = max(0, n - self._cfg[0] + 1)
        _, swa = self._slots(seq, lo, n)
        return self._swa.gather(swa, 0, len(swa))

    def read_full(self, seq: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Every position ``0 .. n-1`` through the full-attention pool's slots."""
        self._pool("read_full")
        seq = self._reg.exists("read_full", seq)
        full, _ = self._slots(seq, 0, self._seqs[seq].n)
        return self._full.gather(full, 0, len(full))

    def table(self, seq: int) -> list[int | None]:
        """The SWA page of each logical block (SGLang page - 1), ``None`` once evicted (mapped to slot 0)."""
        self._pool("table")
        seq = self._reg.exists("table", seq)
        n, B = self._seqs[seq].n, self._cfg[1]
        _, swa = self._slots(seq, 0, n)
        return [None if swa[j] <= 0 else swa[j] // B - 1 for j in range(0, n, B)] if swa else []

    def free_blocks(self) -> int:
        return self._pool("free_blocks").swa_available_size() // self._cfg[1]

    def sequences(self) -> list[int]:
        return sorted(self._seqs)

    def length(self, seq: int) -> int:
        self._pool("length")
        return self._seqs[self._reg.exists("length", seq)].n
